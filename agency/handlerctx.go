package agency

import (
	"context"
	"time"
)

// baseCtx is the context.WithCancel behind the handlers' base context.
type baseCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// handlersContext is the handlers' base context: the conn itself, seen as
// a context that is cancelled when the agent is gone (see stop). It costs
// nothing until a handler waits on it (Done) or derives a cancellable
// context from it; then a context.WithCancel, made once per agent, backs
// it. Most handlers do neither, and a broadcast to many agents would
// otherwise make one per agent for nothing.
type handlersContext conn

// baseContext returns the handlers' base context.
func (c *conn) baseContext() context.Context { return (*handlersContext)(c) }

// cancelable returns the context.WithCancel behind the handlers' context,
// made on first use.
func (c *conn) cancelable() context.Context {
	if b := c.baseIfAny(); b != nil {
		return b.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.extraLocked()
	b := x.base.Load()
	if b == nil {
		b = &baseCtx{}
		b.ctx, b.cancel = context.WithCancel(context.Background())
		if c.is(stateStopped) {
			b.cancel()
		}
		x.base.Store(b)
	}
	return b.ctx
}

// baseIfAny returns the context.WithCancel behind the handlers' context,
// or nil before it is made.
func (c *conn) baseIfAny() *baseCtx {
	if x := c.extra.Load(); x != nil {
		return x.base.Load()
	}
	return nil
}

func (h *handlersContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (h *handlersContext) Done() <-chan struct{} { return (*conn)(h).cancelable().Done() }

func (h *handlersContext) Err() error {
	c := (*conn)(h)
	if b := c.baseIfAny(); b != nil {
		return b.ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.is(stateStopped) {
		return context.Canceled
	}
	return nil
}

func (h *handlersContext) Value(key any) any {
	if _, internal := key.(*int); internal {
		// The context package finds the cancelCtx to hang a child context
		// (and context.Cause) on under a key of type *int: it must be the
		// one whose Done this context returns.
		return (*conn)(h).cancelable().Value(key)
	}
	return nil
}

func (h *handlersContext) String() string { return "agency.handlersContext" }

// stop cancels the handlers' context.
func (c *conn) stop() {
	c.mu.Lock()
	c.set(stateStopped)
	if b := c.baseIfAny(); b != nil {
		b.cancel()
	}
	c.mu.Unlock()
}
