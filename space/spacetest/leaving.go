package spacetest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// afterAddGate is an AfterAdd hook that, once released, watches for a while
// whether an action runs before it returns.
type afterAddGate struct {
	started    chan struct{}
	release    chan struct{}
	ran        chan struct{} // the action signals here when it runs
	stop       chan struct{}
	ranInside  atomic.Bool
	watchLimit time.Duration
}

func (g *afterAddGate) AfterAdd(context.Context) {
	signal(g.started, struct{}{})
	select {
	case <-g.release:
	case <-g.stop:
		return
	}
	// Proving that something does not happen needs a window: a space that
	// passes waits it out; one that runs actions during AfterAdd is caught
	// as soon as the action runs.
	select {
	case <-g.ran:
		g.ranInside.Store(true)
	case <-time.After(g.watchLimit):
	case <-g.stop:
	}
}

// AfterAdd and the agent's actions never run at once: a message that
// reaches the agent while AfterAdd runs waits for it to return.
func testAfterAddBeforeActions(e *env) {
	gate := &afterAddGate{
		started: make(chan struct{}, 1), release: make(chan struct{}), ran: make(chan struct{}, 1),
		stop: e.stop, watchLimit: 200 * time.Millisecond,
	}
	subject := e.newAgent("Subject", agency.Hooks(gate))
	handled := make(chan struct{}, 1)
	agency.Handle(subject, "mark", func(context.Context, empty) (bool, error) {
		signal(gate.ran, struct{}{})
		signal(handled, struct{}{})
		return true, nil
	})
	sender := e.newAgent("Sender")
	e.add(sender)

	added := make(chan error, 1)
	ctx := e.ctx()
	go func() { added <- e.sp.Add(ctx, subject) }()
	receive(e.t, gate.started, "AfterAdd to start")
	e.send(sender, subject.ID(), "mark", nil) // reaches the agent while AfterAdd runs
	close(gate.release)
	if err := receive(e.t, added, "Add to return"); err != nil {
		e.t.Fatalf("Add: %v", err)
	}
	receive(e.t, handled, "the action to run after AfterAdd")
	if gate.ranInside.Load() {
		e.t.Error("an action ran while AfterAdd was still running")
	}
}

// An agent may remove itself from inside one of its actions, given that
// action's context: Remove returns at once instead of waiting for the action
// that called it, and the agent is gone once the action returns.
func testRemoveSelf(e *env) {
	subject := e.newAgent("Subject")
	removed := make(chan error, 1)
	agency.Handle(subject, "leave", func(ctx context.Context, _ empty) (string, error) {
		removed <- e.sp.Remove(ctx, agency.AgentFrom(ctx).ID())
		return "bye", nil
	})
	caller := e.newAgent("Caller")
	e.add(subject, caller)

	if got := call[string](e, caller, subject.ID(), "leave", nil); got != "bye" {
		e.t.Errorf("leave returned %q, want bye", got)
	}
	if err := receive(e.t, removed, "Remove from inside the action"); err != nil {
		e.t.Fatalf("Remove from inside the action: %v", err)
	}
	if _, err := e.request(caller, subject.ID(), "leave", nil); !errors.Is(err, agency.ErrNoRecipient) {
		e.t.Errorf("request to the agent that removed itself: %v, want ErrNoRecipient", err)
	}
}

// A Remove whose context ends before the running action returns reports
// the context's error and cancels the action's context; the agent stays in
// use, so it cannot be added again, until the action returns.
func testRemoveExpired(e *env) {
	subject := e.newAgent("Subject")
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{}, 1)
	release := make(chan struct{})
	agency.Handle(subject, "hold", func(ctx context.Context, _ empty) (bool, error) {
		signal(started, struct{}{})
		select {
		case <-ctx.Done():
			signal(cancelled, struct{}{})
		case <-e.stop:
		}
		select { // a handler that ignores cancellation, for a while
		case <-release:
		case <-e.stop:
		}
		return true, nil
	})
	sender := e.newAgent("Sender")
	e.add(subject, sender)
	e.send(sender, subject.ID(), "hold", nil)
	receive(e.t, started, "the action to start")

	ctx, cancel := context.WithTimeout(e.ctx(), 100*time.Millisecond)
	defer cancel()
	if err := e.sp.Remove(ctx, subject.ID()); !errors.Is(err, context.DeadlineExceeded) {
		e.t.Fatalf("Remove with a context that ends first: %v, want context.DeadlineExceeded", err)
	}
	receive(e.t, cancelled, "the action's context to be cancelled")
	if err := e.sp.Add(e.ctx(), subject); !errors.Is(err, agency.ErrAlreadyAdded) {
		e.t.Errorf("Add while the removed agent's action still runs: %v, want ErrAlreadyAdded", err)
	}
	close(release)
}

// A Request that is waiting when its own agent is removed returns
// ErrNotAdded rather than waiting on.
func testRequestWhileRemoved(e *env) {
	slow := e.newAgent("Slow")
	started, release := blocker(e, slow)
	asker := e.newAgent("Asker")
	e.add(slow, asker)

	result := make(chan error, 1)
	ctx := e.ctx()
	go func() {
		_, err := asker.Request(ctx, slow.ID(), "wait", nil)
		result <- err
	}()
	receive(e.t, started, "the slow action to start")
	if err := e.sp.Remove(e.ctx(), asker.ID()); err != nil {
		e.t.Fatalf("Remove: %v", err)
	}
	if err := receive(e.t, result, "the Request to return"); !errors.Is(err, agency.ErrNotAdded) {
		e.t.Errorf("Request of a removed agent: %v, want ErrNotAdded", err)
	}
	close(release)
}

// An action that runs while its agent is being removed may still make
// requests and get their answers: the drain finishes running actions, and
// an action may need others to finish.
func testRequestWhileDraining(e *env) {
	removing := make(beforeRemove, 1)
	subject := e.newAgent("Subject", agency.Hooks(removing))
	helper := e.newAgent("Helper")
	agency.Handle(helper, "ping", pong)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	answer := make(chan string, 1)
	agency.Handle(subject, "work", func(ctx context.Context, _ empty) (bool, error) {
		signal(started, struct{}{})
		select {
		case <-release:
		case <-e.stop:
			return false, nil
		}
		got, err := agency.Call[string](ctx, agency.AgentFrom(ctx), helper.ID(), "ping", nil)
		if err != nil {
			got = "error: " + err.Error()
		}
		answer <- got
		return true, nil
	})
	sender := e.newAgent("Sender")
	e.add(subject, helper, sender)

	e.send(sender, subject.ID(), "work", nil)
	receive(e.t, started, "the action to start")
	removed := make(chan error, 1)
	ctx := e.ctx()
	go func() { removed <- e.sp.Remove(ctx, subject.ID()) }()
	receive(e.t, removing, "Remove to call BeforeRemove")
	// Let the removal get on, so that the request comes while the agent
	// no longer takes new messages: a space that passes waits this out.
	time.Sleep(200 * time.Millisecond)
	close(release)
	if got := receive(e.t, answer, "the action's request to return"); got != "pong" {
		e.t.Errorf("a request from an action that runs during Remove got %q, want pong", got)
	}
	if err := receive(e.t, removed, "Remove to return"); err != nil {
		e.t.Errorf("Remove: %v", err)
	}
}
