package agency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// actionContext is the context a handler or hook runs with: the agent's own
// context plus the agent and the message, in one allocation.
//
// A message with a deadline gives its handler a context with that deadline
// (see newActionContext) that makes no timer unless the handler asks for Done:
// most handlers return long before, and a timer per message costs more
// than the rest of its delivery.
type actionContext struct {
	context.Context
	conn *conn
	msg  *Message
	dl   *deadline // nil: the embedded context's deadline holds
}

// deadline is the state of an action context's own deadline.
type deadline struct {
	at     time.Time
	mu     sync.Mutex
	timed  context.Context // made by the first Done: the deadline with its timer
	cancel context.CancelFunc
	endErr error // set by end when timed was never made
}

type ctxKey struct{}

// newActionContext returns the context for m's handler, with m's deadline
// when it has one; the two come in one allocation.
func newActionContext(base context.Context, c *conn, m *Message) *actionContext {
	if m.Deadline.IsZero() {
		return &actionContext{Context: base, conn: c, msg: m}
	}
	both := &struct {
		ctx actionContext
		dl  deadline
	}{ctx: actionContext{Context: base, conn: c, msg: m}}
	if pd, ok := base.Deadline(); !ok || !pd.Before(m.Deadline) {
		both.dl.at = m.Deadline
		both.ctx.dl = &both.dl
	}
	return &both.ctx
}

// end cancels the context, as the cancel function of a
// context.WithDeadline would once the handler has returned.
func (c *actionContext) end() {
	dl := c.dl
	if dl == nil {
		return
	}
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.timed != nil {
		dl.cancel()
		return
	}
	if dl.endErr == nil {
		dl.endErr = c.errLocked()
		if dl.endErr == nil {
			dl.endErr = context.Canceled
		}
	}
}

// timedLocked returns the context with the deadline's timer, made on
// first use, or nil once the context has ended without one.
func (c *actionContext) timedLocked() context.Context {
	dl := c.dl
	if dl.timed == nil && dl.endErr == nil {
		dl.timed, dl.cancel = context.WithDeadline(c.Context, dl.at)
	}
	return dl.timed
}

func (c *actionContext) Deadline() (time.Time, bool) {
	if c.dl == nil {
		return c.Context.Deadline()
	}
	return c.dl.at, true
}

func (c *actionContext) Done() <-chan struct{} {
	if c.dl == nil {
		return c.Context.Done()
	}
	c.dl.mu.Lock()
	defer c.dl.mu.Unlock()
	if t := c.timedLocked(); t != nil {
		return t.Done()
	}
	return closedChan
}

func (c *actionContext) Err() error {
	if c.dl == nil {
		return c.Context.Err()
	}
	c.dl.mu.Lock()
	defer c.dl.mu.Unlock()
	return c.errLocked()
}

func (c *actionContext) errLocked() error {
	dl := c.dl
	switch {
	case dl.timed != nil:
		return dl.timed.Err()
	case dl.endErr != nil:
		return dl.endErr
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if time.Until(dl.at) <= 0 {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *actionContext) Value(key any) any {
	if key == (ctxKey{}) {
		return c
	}
	if c.dl != nil {
		if _, internal := key.(*int); internal {
			// The context package finds the cancelCtx to hang a child
			// context (and context.Cause) on under a key of type *int:
			// it must be the one that ends with the deadline.
			c.dl.mu.Lock()
			t := c.timedLocked()
			c.dl.mu.Unlock()
			if t != nil {
				return t.Value(key)
			}
		}
	}
	return c.Context.Value(key)
}

// sentContext is the handler context of the first recipient of a message
// without a deadline, for an agent without trace or handle hooks: the
// message itself, seen as a context whose parent is the recipient's
// handlers' context (see handlersContext). It needs nothing beyond the
// message's pointer to that recipient's conn, set when the message is
// delivered to it (see claimContext); a broadcast's other recipients make
// an actionContext. It is a Message (a struct of one), so that its
// methods may share the names of Message's fields.
type sentContext struct{ Message }

// claimContext makes m's handler context m itself, for c, unless another
// recipient has it. DeliverFunc calls it before m is queued, on the
// goroutine that delivers m (the sender's, in process, before Send
// returns), so that the one write comes before any handler reads it.
// Spaces deliver a message to one recipient at a time (see
// driver.Conn.Deliver), so a plain write does.
func claimContext(c *conn, m *Message) {
	if m.handler == nil {
		m.handler = c
	}
}

func (s *sentContext) parent() context.Context { return s.handler.baseContext() }

func (s *sentContext) Deadline() (time.Time, bool) { return s.parent().Deadline() }

func (s *sentContext) Done() <-chan struct{} { return s.parent().Done() }

func (s *sentContext) Err() error { return s.parent().Err() }

func (s *sentContext) Value(key any) any {
	if key == (ctxKey{}) {
		return s
	}
	return s.parent().Value(key)
}

func (s *sentContext) String() string { return "agency.sentContext" }

// handling is what a handler's context tells of the action it runs: the
// agent's conn, nil outside an agent, and the message, nil in a hook that
// handles none.
type handling struct {
	conn *conn
	msg  *Message
}

func fromContext(ctx context.Context) handling {
	switch c := ctx.Value(ctxKey{}).(type) {
	case *actionContext:
		return handling{conn: c.conn, msg: c.msg}
	case *sentContext:
		return handling{conn: c.handler, msg: &c.Message}
	}
	return handling{}
}

// MessageFrom returns the message an action or hook is handling, or nil when
// ctx does not come from an agent.
func MessageFrom(ctx context.Context) *Message {
	return fromContext(ctx).msg
}

// AgentFrom returns the agent running an action or hook, or nil when ctx does
// not come from an agent.
func AgentFrom(ctx context.Context) *Agent {
	if c := fromContext(ctx); c.conn != nil {
		return c.conn.agent
	}
	return nil
}

// errNoAction is returned by Respond outside an action.
var errNoAction = errors.New("agency: Respond needs the context of a running action")

// Respond sends value to the sender of the message the current action is
// handling, as a [response], in addition to the value the action returns. An
// action may respond several times: every response reaches the sender's
// ValueHandler, and a Request returns the first. To a sender that takes no
// responses (Message.NoReply) nothing is sent, and Respond returns nil.
func Respond(ctx context.Context, value any) error {
	c := fromContext(ctx)
	if c.conn == nil || c.msg == nil || c.msg.IsResponse() {
		return errNoAction
	}
	return c.conn.reply(ctx, c.msg, ResponseAction, value)
}

// RespondError sends err to the sender of the message the current action is
// handling, as an [error]. An *ActionError keeps its type; any other error is
// action_failed. To a sender that takes no responses (Message.NoReply)
// nothing is sent, and RespondError returns nil.
func RespondError(ctx context.Context, err error) error {
	c := fromContext(ctx)
	if c.conn == nil || c.msg == nil || c.msg.IsResponse() {
		return errNoAction
	}
	if err == nil {
		return fmt.Errorf("agency: RespondError(nil)")
	}
	return c.conn.reply(ctx, c.msg, ErrorAction, asActionError(err))
}
