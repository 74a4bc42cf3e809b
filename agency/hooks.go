package agency

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
)

// The hook interfaces. A value given to the [Hooks] option may implement any
// of them, [TracePropagator], [SendObserver], [HandleObserver],
// [OperationObserver] or [EventRecorder]; the agent calls each one it implements. Every hook receives a
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
	// BeforeActioner is called before each permitted action runs: before
	// its arguments are decoded, or, for a requested action that its
	// approver (see Approve) let through, after.
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

// hookSet holds the hooks an agent's hook values implement, resolved once.
// Where several values implement one interface, the field holds a value
// that calls each in turn.
type hookSet struct {
	afterAdd     AfterAdder
	beforeRemove BeforeRemover
	before       BeforeActioner
	after        AfterActioner
	value        ValueHandler
	err          ErrorHandler
	permission   PermissionRequester
	trace        []TracePropagator // each asked in turn
	send         SendObserver
	handle       HandleObserver
	op           OperationObserver
	event        EventRecorder
}

// checkHooks reports a value that implements none of the hook interfaces.
func checkHooks(v any) error {
	switch v.(type) {
	case AfterAdder, BeforeRemover, BeforeActioner, AfterActioner, ValueHandler, ErrorHandler, PermissionRequester, TracePropagator, SendObserver, HandleObserver, OperationObserver, EventRecorder:
		return nil
	}
	return fmt.Errorf("%w: Hooks(%T): the value implements none of the hook interfaces", ErrInvalidOption, v)
}

// sameValue reports whether a and b are one value given twice. A type may
// be comparable while a value of it is not (a struct whose field of type
// any holds a slice): == would panic on those, and they are not one value.
func sameValue(a, b any) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	return reflect.ValueOf(a).Comparable() && reflect.ValueOf(b).Comparable() && a == b
}

// resolveHooks sorts the values given to Hooks by the interfaces they
// implement.
func resolveHooks(vs []any) hookSet {
	var h hookSet
	h.afterAdd = combine(vs, func(hs []AfterAdder) AfterAdder { return afterAdders(hs) })
	h.beforeRemove = combine(vs, func(hs []BeforeRemover) BeforeRemover { return beforeRemovers(hs) })
	h.before = combine(vs, func(hs []BeforeActioner) BeforeActioner { return beforeActioners(hs) })
	h.after = combine(vs, func(hs []AfterActioner) AfterActioner { return afterActioners(hs) })
	h.value = combine(vs, func(hs []ValueHandler) ValueHandler { return valueHandlers(hs) })
	h.err = combine(vs, func(hs []ErrorHandler) ErrorHandler { return errorHandlers(hs) })
	h.permission = combine(vs, func(hs []PermissionRequester) PermissionRequester { return permissionRequesters(hs) })
	h.send = combine(vs, func(hs []SendObserver) SendObserver { return sendObservers(hs) })
	h.handle = combine(vs, func(hs []HandleObserver) HandleObserver { return handleObservers(hs) })
	h.op = combine(vs, func(hs []OperationObserver) OperationObserver { return operationObservers(hs) })
	h.event = combine(vs, func(hs []EventRecorder) EventRecorder { return eventRecorders(hs) })
	for _, v := range vs {
		if p, ok := v.(TracePropagator); ok {
			h.trace = append(h.trace, p)
		}
	}
	return h
}

// combine returns the one value of vs that implements H, nil for none, or
// many(all of them).
func combine[H any](vs []any, many func([]H) H) H {
	var hs []H
	for _, v := range vs {
		if h, ok := v.(H); ok {
			hs = append(hs, h)
		}
	}
	switch len(hs) {
	case 0:
		var zero H
		return zero
	case 1:
		return hs[0]
	}
	return many(hs)
}

// wantsResponses reports whether responses that answer no pending request
// have anywhere to go.
func (h *hookSet) wantsResponses() bool {
	return h.value != nil || h.err != nil
}

// hasPermission reports whether a PermissionRequester decides requested
// calls.
func (h *hookSet) hasPermission() bool { return h.permission != nil }

// each calls f, logging rather than passing on a panic, so that the next
// hook value still gets its event. The agent's own guard logs a panic of a
// single hook value.
func each(ctx context.Context, hook string, f func()) (panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			panicked = true
			if c := fromContext(ctx); c.conn != nil {
				a := c.conn.agent
				a.logger.Error("agency: hook panicked", "agent", a.id, "hook", hook, "panic", p, "stack", string(debug.Stack()))
			}
		}
	}()
	f()
	return false
}

// The hook interfaces, for several values that implement them.
type (
	afterAdders          []AfterAdder
	beforeRemovers       []BeforeRemover
	beforeActioners      []BeforeActioner
	afterActioners       []AfterActioner
	valueHandlers        []ValueHandler
	errorHandlers        []ErrorHandler
	permissionRequesters []PermissionRequester
)

func (hs afterAdders) AfterAdd(ctx context.Context) {
	for _, h := range hs {
		each(ctx, "AfterAdd", func() { h.AfterAdd(ctx) })
	}
}

func (hs beforeRemovers) BeforeRemove(ctx context.Context) {
	for _, h := range hs {
		each(ctx, "BeforeRemove", func() { h.BeforeRemove(ctx) })
	}
}

func (hs beforeActioners) BeforeAction(ctx context.Context, m *Message) {
	for _, h := range hs {
		each(ctx, "BeforeAction", func() { h.BeforeAction(ctx, m) })
	}
}

func (hs afterActioners) AfterAction(ctx context.Context, m *Message, value any, err error) {
	for _, h := range hs {
		each(ctx, "AfterAction", func() { h.AfterAction(ctx, m, value, err) })
	}
}

func (hs valueHandlers) HandleActionValue(ctx context.Context, m *Message) {
	for _, h := range hs {
		each(ctx, "HandleActionValue", func() { h.HandleActionValue(ctx, m) })
	}
}

func (hs errorHandlers) HandleActionError(ctx context.Context, m *Message, err *ActionError) {
	for _, h := range hs {
		each(ctx, "HandleActionError", func() { h.HandleActionError(ctx, m, err) })
	}
}

// RequestPermission asks each in turn; the first that refuses, or panics,
// decides.
func (hs permissionRequesters) RequestPermission(ctx context.Context, m *Message) bool {
	for _, h := range hs {
		ok := false
		if each(ctx, "RequestPermission", func() { ok = h.RequestPermission(ctx, m) }) || !ok {
			return false
		}
	}
	return true
}
