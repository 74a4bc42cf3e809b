package agency

import (
	"context"
	"runtime/debug"
	"sync"
)

// The observer hooks: what a tracing or metrics library needs that the
// other hooks do not give. BeforeAction and AfterAction see only the
// actions that run; an observer sees every message the agent takes to
// handle (a denied or unknown action, arguments that do not decode, a
// message whose deadline has passed), with the outcome its sender is told,
// and it gives the handler the context it runs with, so that a span it
// starts is the parent of whatever the handler does. It sees every
// message the agent sends too, before its trace context is set, so that
// the message carries the sending span's. A value given to [Hooks] may
// implement either.
type (
	// SendObserver is called as the agent sends m (Send, SendMessage,
	// Request, RequestMessage, Forward): m has its id, sender and
	// recipient, and request says whether the agent waits for its
	// answer. The context it returns is the one m is sent with (its
	// traceparent is taken from it); done is called once, with nil or the
	// error the caller gets: for a request when its answer has come (an
	// [error] answer is an *ActionError), otherwise when the space has
	// taken m. It must return ctx or a context derived from it.
	SendObserver interface {
		ObserveSend(ctx context.Context, m *Message, request bool) (context.Context, func(err error))
	}
	// HandleObserver is called when the agent takes an incoming message to
	// handle (not a response to its own sends), before its access is
	// decided or its deadline checked; ctx is the agent's, with the
	// trace of m extracted ([AgentFrom] and [MessageFrom] read it). The context it returns is the one the
	// handler and the other hooks run with; it must be ctx or derived
	// from it. done is called once the handling has ended, with nil or
	// the *ActionError that its sender is given (or would be, for a
	// message that takes no response).
	HandleObserver interface {
		ObserveHandle(ctx context.Context, m *Message) (context.Context, func(err error))
	}
)

type (
	sendObservers   []SendObserver
	handleObservers []HandleObserver
)

// ObserveSend calls each in turn, each with the context the one before
// returned; done calls theirs in reverse order.
func (os sendObservers) ObserveSend(ctx context.Context, m *Message, request bool) (context.Context, func(error)) {
	dones := make([]func(error), 0, len(os))
	for _, o := range os {
		each(ctx, "ObserveSend", func() {
			x, done := o.ObserveSend(ctx, m, request)
			if x != nil {
				ctx = x
			}
			if done != nil {
				dones = append(dones, done)
			}
		})
	}
	return ctx, func(err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			each(ctx, "ObserveSend done", func() { dones[i](err) })
		}
	}
}

// ObserveHandle calls each in turn, as ObserveSend does.
func (os handleObservers) ObserveHandle(ctx context.Context, m *Message) (context.Context, func(error)) {
	dones := make([]func(error), 0, len(os))
	for _, o := range os {
		each(ctx, "ObserveHandle", func() {
			x, done := o.ObserveHandle(ctx, m)
			if x != nil {
				ctx = x
			}
			if done != nil {
				dones = append(dones, done)
			}
		})
	}
	return ctx, func(err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			each(ctx, "ObserveHandle done", func() { dones[i](err) })
		}
	}
}

// observeSend runs the agent's SendObserver for m. done is never nil.
//
//go:noinline
func (a *Agent) observeSend(ctx context.Context, m *Message, request bool) (context.Context, func(error)) {
	x, done := ctx, func(error) {}
	a.guardHook("ObserveSend", func() {
		c, d := a.hooks.send.ObserveSend(ctx, m, request)
		if c != nil {
			x = c
		}
		if d != nil {
			done = func(err error) { a.guardHook("ObserveSend done", func() { d(err) }) }
		}
	})
	return x, done
}

// observed is one handling under a HandleObserver: the outcome its
// sender is told, kept for done.
type observed struct {
	mu    sync.Mutex
	err   *ActionError
	ended bool
	done  func(error)
	conn  *conn
}

type observedKey struct{}

// observeHandle runs the agent's HandleObserver for m, and returns the
// context to handle m with, which carries the record of its outcome.
//
//go:noinline
func (c *conn) observeHandle(base context.Context, m *Message) (context.Context, *observed) {
	o := &observed{conn: c}
	// AgentFrom and MessageFrom read the observer's context, as they do
	// every hook's; the handler's own, made from what it returns, comes
	// after the deadline check.
	var ctx context.Context = &actionContext{Context: base, conn: c, msg: m}
	c.guard("ObserveHandle", func() {
		x, done := c.agent.hooks.handle.ObserveHandle(ctx, m)
		if x != nil {
			ctx = x
		}
		o.done = done
	})
	return context.WithValue(ctx, observedKey{}, o), o
}

// note keeps ae as the outcome of the handling in ctx, if it is observed
// and has no outcome yet.
//
//go:noinline
func noteOutcome(ctx context.Context, ae *ActionError) {
	o, _ := ctx.Value(observedKey{}).(*observed)
	if o == nil {
		return
	}
	o.mu.Lock()
	if !o.ended && o.err == nil {
		o.err = ae
	}
	o.mu.Unlock()
}

// end tells the observer that the handling is over.
func (o *observed) end() {
	o.mu.Lock()
	o.ended = true
	ae := o.err
	o.mu.Unlock()
	if o.done == nil {
		return
	}
	var err error
	if ae != nil {
		err = ae
	}
	o.conn.guard("ObserveHandle done", func() { o.done(err) })
}

// guardHook calls f, logging rather than passing on a panic: a hook's bug
// must not fail the send it watches.
func (a *Agent) guardHook(hook string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			a.logger.Error("agency: hook panicked", "agent", a.id, "hook", hook, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// MailboxDepth returns the number of messages waiting in the mailbox of
// the agent whose action or hook runs with ctx, not counting those it has
// taken: a gauge of how far behind the agent is. It is 0 outside an agent.
func MailboxDepth(ctx context.Context) int {
	c := fromContext(ctx).conn
	if c == nil {
		return 0
	}
	return c.mb.depth()
}
