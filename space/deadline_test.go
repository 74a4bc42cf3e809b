package space_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A handler's context carries the request's deadline, ends with it (for
// the handler and for contexts derived from it), and is cancelled once the
// handler has returned, whether or not the handler asked for Done.
func TestHandlerDeadlineContext(t *testing.T) {
	type seen struct {
		deadline   time.Time
		ok         bool
		errBefore  error
		doneAtEnd  bool
		errAtEnd   error
		childErr   error
		childCause error
	}
	got := make(chan seen, 1)
	kept := make(chan context.Context, 2)
	echo := agency.MustNewAgent("Waiter")
	agency.Handle(echo, "wait", func(ctx context.Context, _ struct{}) (bool, error) {
		var s seen
		s.deadline, s.ok = ctx.Deadline()
		s.errBefore = ctx.Err()
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		select {
		case <-ctx.Done():
			s.doneAtEnd = true
		case <-time.After(10 * time.Second):
		}
		s.errAtEnd = ctx.Err()
		<-child.Done()
		s.childErr = child.Err()
		s.childCause = context.Cause(child)
		got <- s
		return true, nil
	})
	agency.Handle(echo, "quick", func(ctx context.Context, _ struct{}) (bool, error) {
		kept <- ctx
		return true, nil
	})
	caller := agency.MustNewAgent("Caller")
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	for _, a := range []*agency.Agent{echo, caller} {
		if err := sp.Add(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	_, err := caller.Request(ctx, "Waiter", "wait", nil)
	if !errors.Is(err, agency.ErrTimeout) {
		t.Fatalf("Request: %v, want a timeout", err)
	}
	s := <-got
	if !s.ok || !s.deadline.Equal(want) {
		t.Errorf("handler's deadline %v (%v), want %v", s.deadline, s.ok, want)
	}
	if s.errBefore != nil {
		t.Errorf("Err before the deadline: %v", s.errBefore)
	}
	if !s.doneAtEnd || !errors.Is(s.errAtEnd, context.DeadlineExceeded) {
		t.Errorf("at the deadline: Done %v, Err %v", s.doneAtEnd, s.errAtEnd)
	}
	if !errors.Is(s.childErr, context.DeadlineExceeded) || !errors.Is(s.childCause, context.DeadlineExceeded) {
		t.Errorf("derived context: Err %v, Cause %v", s.childErr, s.childCause)
	}

	// A handler that never asked for Done: its context ends when it returns.
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := caller.Request(ctx, "Waiter", "quick", nil); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	first, second := <-kept, <-kept
	select {
	case <-first.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a handler's context is not done after it returned")
	}
	if err := first.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("after the handler: Err %v, want Canceled", err)
	}
	if err := second.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("after the handler, Done never asked: Err %v, want Canceled", err)
	}
	if dl, ok := second.Deadline(); !ok || dl.IsZero() {
		t.Errorf("after the handler: deadline %v, %v", dl, ok)
	}
}
