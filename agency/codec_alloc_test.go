//go:build !race

// The race detector allocates on its own account: these budgets hold
// without it.

package agency_test

import (
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// The codec's allocations per message, for the messages of a request
// round trip over a wire: a request with a deadline and its response. A
// change that needs more breaks the test; one that needs fewer lowers the
// budget with it.
func TestCodecAllocs(t *testing.T) {
	type ping struct {
		N int `json:"n"`
	}
	req := &agency.Message{To: "bench-echo-1f3a", From: "bench-caller-9c2e", ID: "q1Xf3kLm0aB-4s",
		Deadline: time.Now().Add(time.Minute), Action: "ping", Args: ping{N: 300}}
	resp := &agency.Message{To: req.From, From: req.To, ID: "r7Yq2pNc9dD-5t", ParentID: req.ID,
		Action: agency.ResponseAction, Args: 300}
	for _, c := range []struct {
		name   string
		m      *agency.Message
		encode float64 // the body, and json.Marshal's work on the arguments or value
		decode float64 // the copy of the body, one string for to, from, action, id and parent_id, the arguments or value boxed in Args (the Message, dropped here, stays on the stack)
	}{
		// Before 2026-11-26: 3 and 4 to encode (the deadline's text as
		// a string; the response's {"value": …} in a buffer of its own),
		// 7 and 13 to decode (a string each for to, from, the action, id,
		// parent_id and the deadline's text; encoding/json read the
		// response value).
		{"request", req, 2, 3},
		{"response", resp, 2, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, err := c.m.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if got := testing.AllocsPerRun(100, func() { _, _ = c.m.MarshalJSON() }); got > c.encode {
				t.Errorf("encoding: %.0f allocations, budget %.0f", got, c.encode)
			}
			if got := testing.AllocsPerRun(100, func() { _, _ = agency.DecodeMessage(body) }); got > c.decode {
				t.Errorf("decoding: %.0f allocations, budget %.0f", got, c.decode)
			}
		})
	}
}
