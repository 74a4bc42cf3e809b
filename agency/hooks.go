package agency

import (
	"context"
	"fmt"
)

// The hook interfaces. A value given to the [Hooks] option may implement any
// of them; the agent calls each one it implements. Every hook receives a
// context from which [AgentFrom] and, for the message hooks, [MessageFrom]
// read the agent and the message.
type (
	// AfterAdder is called once the agent is in a space, before Add returns
	// and before the agent handles any message. It may Send; a Request from
	// it delays Add until the answer comes.
	AfterAdder interface {
		AfterAdd(ctx context.Context)
	}
	// BeforeRemover is called when the agent is being removed, while it can
	// still send and before its queued messages are drained.
	BeforeRemover interface {
		BeforeRemove(ctx context.Context)
	}
	// BeforeActioner is called before each permitted action runs, before its
	// arguments are decoded.
	BeforeActioner interface {
		BeforeAction(ctx context.Context, m *Message)
	}
	// AfterActioner is called after each action that BeforeAction saw, with
	// the value it returned or the error its caller receives.
	AfterActioner interface {
		AfterAction(ctx context.Context, m *Message, value any, err error)
	}
	// ValueHandler receives the [response] messages that answer this agent's
	// Send calls (and every response after the first to a Request). [Value]
	// decodes the value.
	ValueHandler interface {
		HandleActionValue(ctx context.Context, m *Message)
	}
	// ErrorHandler receives the [error] messages that answer this agent's
	// Send calls (and later errors to a Request).
	ErrorHandler interface {
		HandleActionError(ctx context.Context, m *Message, err *ActionError)
	}
	// PermissionRequester decides each call of an action whose access is
	// Requested. It runs on the agent's goroutine and may block for as long as
	// a human needs: responses to the agent's own requests do not wait behind
	// it. It should return false when ctx is done.
	PermissionRequester interface {
		RequestPermission(ctx context.Context, m *Message) bool
	}
)

// hookSet holds the hooks an agent's hook value implements, resolved once.
type hookSet struct {
	afterAdd     AfterAdder
	beforeRemove BeforeRemover
	before       BeforeActioner
	after        AfterActioner
	value        ValueHandler
	err          ErrorHandler
	permission   PermissionRequester
}

func resolveHooks(v any) (hookSet, error) {
	var h hookSet
	h.afterAdd, _ = v.(AfterAdder)
	h.beforeRemove, _ = v.(BeforeRemover)
	h.before, _ = v.(BeforeActioner)
	h.after, _ = v.(AfterActioner)
	h.value, _ = v.(ValueHandler)
	h.err, _ = v.(ErrorHandler)
	h.permission, _ = v.(PermissionRequester)
	if h == (hookSet{}) {
		return h, fmt.Errorf("%w: Hooks(%T): the value implements none of the hook interfaces", ErrInvalidOption, v)
	}
	return h, nil
}

// wantsResponses reports whether responses that answer no pending request
// have anywhere to go.
func (h *hookSet) wantsResponses() bool {
	return h.value != nil || h.err != nil
}
