package agency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
	"github.com/seed72275b23/agency-go/space"
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

// A stream stopped while its request waits in the responder's queue,
// behind an action that runs: the caller sends a [cancel] at once (every
// agent of a space.Local speaks agency-go's wire), and the request, when
// its turn comes, is dropped: its action does not run.
func TestStreamCancelledWhileQueued(t *testing.T) {
	ctx, cancelAll := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelAll()
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free() // before the space closes
	var ran atomic.Int32
	w := agency.MustNewAgent("Worker")
	agency.Handle(w, "block", func(context.Context, struct{}) (bool, error) {
		close(started)
		<-release
		return true, nil
	})
	agency.Handle(w, "work", func(context.Context, struct{}) (bool, error) {
		ran.Add(1)
		return true, nil
	})
	agency.Handle(w, "ran", func(context.Context, struct{}) (int32, error) { return ran.Load(), nil })
	caller := agency.MustNewAgent("Caller")
	for _, a := range []*agency.Agent{w, caller} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := caller.Send(ctx, "Worker", "block", nil); err != nil {
		t.Fatal(err)
	}
	<-started
	// The caller stops as soon as its request is on its way: the tap sees
	// it just before the space queues it.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var cancels atomic.Int32
	untap := sp.Tap(func(m *agency.Message) {
		switch {
		case m.Action == "work" && m.Stream:
			stop()
		case m.Action == agency.CancelAction && m.From == "Caller" && m.To == "Worker":
			cancels.Add(1)
		}
	})
	defer untap()
	for _, err := range caller.Stream(sctx, "Worker", "work", nil) {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the stream: %v, want context.Canceled", err)
		}
	}
	if n := cancels.Load(); n != 1 {
		t.Fatalf("%d [cancel] messages went to the worker, want 1", n)
	}
	free()
	// ran is handled after work: work's turn has come and gone.
	n, err := agency.Call[int32](ctx, caller, "Worker", "ran", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the cancelled request's action ran %d times, want 0", n)
	}
	// The worker serves on, streams too.
	for m, err := range caller.Stream(ctx, "Worker", "work", nil) {
		if err != nil {
			t.Fatalf("a stream after the cancelled one: %v", err)
		}
		if v, _ := agency.Value[bool](m); !v {
			t.Fatalf("a stream after the cancelled one answered %v", m)
		}
	}
}

// A [cancel] that comes after the answer, or for a request the agent never
// had, is dropped: nothing is sent back (it carries no_reply), and the
// agent serves on.
func TestLateCancelDropped(t *testing.T) {
	ctx := context.Background()
	sent := make(chan *agency.Message, 4)
	route := driver.RouterFunc(func(_ context.Context, m *agency.Message) error {
		sent <- m
		return nil
	})
	a := agency.MustNewAgent("Echo")
	agency.Handle(a, "echo", func(_ context.Context, args struct {
		N int `json:"n"`
	}) (int, error) {
		return args.N, nil
	})
	conn, err := driver.Connect(a, route)
	if err != nil {
		t.Fatal(err)
	}
	conn.Added(ctx)
	defer conn.Close(ctx)
	request := func(id string, n int) {
		t.Helper()
		if err := conn.Deliver(&agency.Message{To: "Echo", From: "User", ID: id, Stream: true, Action: "echo", Args: map[string]any{"n": n}}); err != nil {
			t.Fatal(err)
		}
		r := <-sent
		if v, _ := agency.Value[int](r); r.Action != agency.ResponseAction || r.ParentID != id || v != n {
			t.Fatalf("the answer to %s: %v", id, r)
		}
	}
	request("r1", 1)
	for _, m := range []*agency.Message{
		{To: "Echo", From: "User", ID: "c1", ParentID: "r1", NoReply: true, Action: agency.CancelAction},     // answered already
		{To: "Echo", From: "Stranger", ID: "c2", ParentID: "r9", NoReply: true, Action: agency.CancelAction}, // never asked
	} {
		if err := conn.Deliver(m); err != nil {
			t.Fatal(err)
		}
	}
	request("r2", 2) // the next thing sent is r2's answer: nothing answered the [cancel]s
	select {
	case m := <-sent:
		t.Fatalf("sent %v", m)
	default:
	}
}
