package agency_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

type obsKey struct{}

// watcher records what its observer hooks see.
type watcher struct {
	mu      sync.Mutex
	sent    []string // "action request? outcome"
	handled []string // "action outcome"
	done    chan struct{}
}

func outcome(err error) string {
	var ae *agency.ActionError
	if errors.As(err, &ae) {
		return string(ae.Type)
	}
	if err != nil {
		return "error"
	}
	return "ok"
}

func (w *watcher) ObserveSend(ctx context.Context, m *agency.Message, request bool) (context.Context, func(error)) {
	ctx = agency.WithTraceparent(ctx, tpOther) // the "span" the message is sent in
	return ctx, func(err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		kind := "send"
		if request {
			kind = "request"
		}
		w.sent = append(w.sent, m.Action+" "+kind+" "+outcome(err))
	}
}

func (w *watcher) ObserveHandle(ctx context.Context, m *agency.Message) (context.Context, func(error)) {
	ctx = context.WithValue(ctx, obsKey{}, m.ID)
	return ctx, func(err error) {
		w.mu.Lock()
		w.handled = append(w.handled, m.Action+" "+outcome(err))
		w.mu.Unlock()
		w.done <- struct{}{}
	}
}

// Observers see every send with the caller's outcome, and every handling
// with the outcome its sender is told, whether or not the action ran; the
// handler runs with the context ObserveHandle returned, and a message
// carries the trace of the context ObserveSend returned.
func TestObservers(t *testing.T) {
	w := &watcher{done: make(chan struct{}, 16)}
	calc := agency.MustNewAgent("Calc", agency.Hooks(w))
	type args struct {
		N int `json:"n" validate:"min=1"`
	}
	agency.Handle(calc, "ok", func(ctx context.Context, a args) (string, error) {
		if ctx.Value(obsKey{}) != agency.MessageFrom(ctx).ID {
			t.Error("the handler does not run with the context ObserveHandle returned")
		}
		return agency.Traceparent(ctx), nil
	})
	agency.Handle(calc, "fail", func(context.Context, args) (int, error) { return 0, errors.New("no") })
	agency.Handle(calc, "secret", func(context.Context, args) (int, error) { return 0, nil },
		agency.AccessBySender(nil, agency.Denied))
	caller := agency.MustNewAgent("Caller", agency.Hooks(w))
	joinLocal(t, calc, caller)
	ctx := context.Background()

	r, err := caller.Request(ctx, "Calc", "ok", args{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tp, _ := agency.Value[string](r); tp != tpOther {
		t.Errorf("the request carried traceparent %q, want the observer's %q", tp, tpOther)
	}
	for _, c := range []struct {
		action string
		args   any
		want   error
	}{
		{"fail", args{N: 1}, agency.ErrActionFailed},
		{"secret", args{N: 1}, agency.ErrPermissionDenied},
		{"ok", args{N: 0}, agency.ErrInvalidArgs},
		{"none", nil, agency.ErrNotFound},
	} {
		if _, err := caller.Request(ctx, "Calc", c.action, c.args); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.action, err, c.want)
		}
	}
	if _, err := caller.Send(ctx, "Calc", "fail", args{N: 1}); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		<-w.done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wantSent := []string{"ok request ok", "fail request action_failed", "secret request permission_denied",
		"ok request invalid_args", "none request not_found", "fail send ok"}
	wantHandled := []string{"ok ok", "fail action_failed", "secret permission_denied",
		"ok invalid_args", "none not_found", "fail action_failed"}
	if !equal(w.sent, wantSent) {
		t.Errorf("sends seen:\n%q\nwant\n%q", w.sent, wantSent)
	}
	if !equal(w.handled, wantHandled) {
		t.Errorf("handlings seen:\n%q\nwant\n%q", w.handled, wantHandled)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A stream is a request to the SendObserver, with the outcome its loop
// ends with, and its request carries the observer's trace.
func TestObserveStream(t *testing.T) {
	w := &watcher{done: make(chan struct{}, 16)}
	writer := agency.MustNewAgent("Writer")
	agency.Handle(writer, "write", func(ctx context.Context, _ struct{}) (string, error) {
		if err := agency.Emit(ctx, "a part"); err != nil {
			return "", err
		}
		return agency.Traceparent(ctx), nil
	})
	agency.Handle(writer, "fail", func(context.Context, struct{}) (string, error) { return "", errors.New("no") })
	caller := agency.MustNewAgent("Caller", agency.Hooks(w))
	joinLocal(t, writer, caller)
	ctx := context.Background()
	var last *agency.Message
	for m, err := range caller.Stream(ctx, "Writer", "write", struct{}{}) {
		if err != nil {
			t.Fatal(err)
		}
		last = m
	}
	if tp, _ := agency.Value[string](last); tp != tpOther {
		t.Errorf("the stream's request carried traceparent %q, want the observer's %q", tp, tpOther)
	}
	for _, err := range caller.Stream(ctx, "Writer", "fail", struct{}{}) {
		if err == nil {
			t.Fatal("the failing stream ended without an error")
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if want := []string{"write request ok", "fail request action_failed"}; !equal(w.sent, want) {
		t.Errorf("sends seen:\n%q\nwant\n%q", w.sent, want)
	}
}
