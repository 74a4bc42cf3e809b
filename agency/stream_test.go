package agency_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// A request that asks for parts, a part and a streamed answer keep their
// stream, seq and value through the wire format.
func TestStreamWireRoundTrip(t *testing.T) {
	for _, m := range []*agency.Message{
		{To: "Writer", From: "User", ID: "m1", Stream: true, Action: "write"},
		{To: "User", From: "Writer", ID: "m2", ParentID: "m1", Seq: 1, Action: agency.PartAction, Args: "It "},
		{To: "User", From: "Writer", ID: "m3", ParentID: "m1", Seq: 4294967295, Action: agency.ResponseAction, Args: "It rains."},
		{To: "Writer", From: "User", ID: "m4", ParentID: "m1", NoReply: true, Action: agency.CancelAction},
	} {
		b, err := m.MarshalJSON()
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		got, err := agency.DecodeMessage(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got.Stream != m.Stream || got.Seq != m.Seq || got.Action != m.Action || got.ParentID != m.ParentID || got.Meta != nil {
			t.Errorf("%s decodes to %+v", b, got)
		}
		if m.Action == agency.PartAction {
			if !strings.Contains(string(b), `"[part]":{"value":"It "}`) || !strings.Contains(string(b), `"seq":1`) {
				t.Errorf("part on the wire: %s", b)
			}
			if v, err := agency.Value[string](got); err != nil || v != "It " {
				t.Errorf("Value of the part: %q, %v", v, err)
			}
		}
	}
}

// stream and seq are the framework's: malformed ones are refused, and a
// Meta map may not hold them.
func TestStreamMetaRefused(t *testing.T) {
	for _, body := range []string{
		`{"to":"a","from":"b","action":{"__meta__":{"stream":"yes"},"x":{}}}`,
		`{"to":"a","from":"b","action":{"__meta__":{"seq":-1},"[part]":{"value":1}}}`,
		`{"to":"a","from":"b","action":{"__meta__":{"seq":1.5},"[part]":{"value":1}}}`,
		`{"to":"a","from":"b","action":{"__meta__":{"seq":4294967296},"[part]":{"value":1}}}`,
	} {
		if _, err := agency.DecodeMessage([]byte(body)); !errors.Is(err, agency.ErrMalformedMessage) {
			t.Errorf("%s: %v, want ErrMalformedMessage", body, err)
		}
	}
	m := &agency.Message{To: "a", From: "b", Action: "x", Meta: map[string]any{"seq": 1}}
	if _, err := m.MarshalJSON(); !errors.Is(err, agency.ErrMalformedMessage) {
		t.Errorf("Meta with seq: %v", err)
	}
	for _, name := range []string{agency.PartAction, agency.CancelAction} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering %q did not panic", name)
				}
			}()
			agency.Handle(agency.MustNewAgent("R"), name, func(context.Context, struct{}) (int, error) { return 0, nil })
		}()
	}
}

// Emit outside an action is an error.
func TestEmitOutsideAction(t *testing.T) {
	if err := agency.Emit(context.Background(), "x"); err == nil {
		t.Error("Emit outside an action succeeded")
	}
}
