package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
)

var lifecycleTests = []test{
	{"CancelledContext", testCancelled},
	{"ExpiredDeadline", testExpired},
	{"Close", testClose},
}

// calls runs every method of the store with ctx and returns their errors by
// name. The Apply would create plan "late" and queue a message.
func (e *env) calls(ctx context.Context) map[string]error {
	e.t.Helper()
	o := outgoing(e.t, "A", "Target", "late")
	errs := make(map[string]error)
	_, errs["Get"] = e.st.Get(ctx, "plan", "p1")
	_, errs["List"] = e.st.List(ctx, store.Query{Kind: "plan"})
	errs["Apply"] = e.st.Apply(ctx, store.Changes{
		Put:  []store.Doc{doc("plan", "late", 0, `{}`), doc("plan", "p1", 1, `{"v":2}`)},
		Send: []store.Outgoing{o},
	})
	_, errs["Claim"] = e.st.Claim(ctx, "A", 10, time.Hour)
	errs["Release"] = e.st.Release(ctx, 0, store.Outgoing{ID: 1, Attempts: 1})
	errs["Sent"] = e.st.Sent(ctx, 1)
	return errs
}

func (e *env) unchanged(what string) {
	e.t.Helper()
	e.absent("plan", "late")
	if d := e.get("plan", "p1"); d.Version != 1 {
		e.t.Errorf("%s: plan p1 was written", what)
	}
	if got := e.claim("", 10, time.Hour); len(got) != 1 {
		e.t.Errorf("%s: %d entries in the outbox, want the 1 queued before", what, len(got))
	}
}

func testCancelled(e *env) {
	e.put(doc("plan", "p1", 0, `{}`))
	e.queue("B", "b1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, err := range e.calls(ctx) {
		if !errors.Is(err, context.Canceled) {
			e.t.Errorf("%s with a cancelled context: error %v, want one matching context.Canceled", name, err)
		}
	}
	e.unchanged("cancelled calls")
}

func testExpired(e *env) {
	e.put(doc("plan", "p1", 0, `{}`))
	e.queue("B", "b1")
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for name, err := range e.calls(ctx) {
		if !errors.Is(err, context.DeadlineExceeded) {
			e.t.Errorf("%s with an expired context: error %v, want one matching context.DeadlineExceeded", name, err)
		}
	}
	e.unchanged("calls past their deadline")
}

func testClose(e *env) {
	e.put(doc("plan", "p1", 0, `{}`))
	if err := e.st.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	if err := e.st.Close(); err != nil {
		e.t.Errorf("second Close: %v, want nil", err)
	}
	for name, err := range e.calls(e.ctx()) {
		if !errors.Is(err, store.ErrClosed) {
			e.t.Errorf("%s after Close: error %v, want one matching store.ErrClosed", name, err)
		}
	}
}
