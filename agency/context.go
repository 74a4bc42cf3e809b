package agency

import (
	"context"
	"errors"
	"fmt"
)

// actionContext is the context a handler or hook runs with: the agent's own
// context plus the agent and the message, in one allocation.
type actionContext struct {
	context.Context
	conn *Conn
	msg  *Message
}

type ctxKey struct{}

func (c *actionContext) Value(key any) any {
	if key == (ctxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func fromContext(ctx context.Context) *actionContext {
	c, _ := ctx.Value(ctxKey{}).(*actionContext)
	return c
}

// MessageFrom returns the message an action or hook is handling, or nil when
// ctx does not come from an agent.
func MessageFrom(ctx context.Context) *Message {
	if c := fromContext(ctx); c != nil {
		return c.msg
	}
	return nil
}

// AgentFrom returns the agent running an action or hook, or nil when ctx does
// not come from an agent.
func AgentFrom(ctx context.Context) *Agent {
	if c := fromContext(ctx); c != nil {
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
	if c == nil || c.msg == nil || c.msg.IsResponse() {
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
	if c == nil || c.msg == nil || c.msg.IsResponse() {
		return errNoAction
	}
	if err == nil {
		return fmt.Errorf("agency: RespondError(nil)")
	}
	return c.conn.reply(ctx, c.msg, ErrorAction, asActionError(err))
}
