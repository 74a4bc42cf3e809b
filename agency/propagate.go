package agency

import (
	"context"
	"runtime/debug"
)

// TracePropagator connects a tracing library to the traceparent that
// messages carry in __meta__, so that handlers run in the trace of the
// message they handle and messages sent from a traced context carry its
// trace, with no code for it in any handler. Give an agent one with
// [Hooks]; package otelagency has one for OpenTelemetry. Given several,
// the agent asks each in turn: each extracts into the context the one
// before returned, and the first valid traceparent injected is sent.
//
// Without one, a trace still goes on through every agent (see
// [Traceparent]): a TracePropagator lets the tracing library see it.
type TracePropagator interface {
	// ExtractTrace returns the context that the handler (or hook) for an
	// incoming message runs with: ctx, the agent's own for that message
	// (ending when its sender stops waiting), with the trace context of
	// traceparent, the message's valid W3C traceparent, added. It is called
	// only for a message that carries one, and must return ctx or a context
	// derived from it.
	ExtractTrace(ctx context.Context, traceparent string) context.Context
	// InjectTrace returns the W3C traceparent that a message sent with ctx
	// carries: the trace context of ctx's current span, or "" when ctx is
	// in no trace the library knows of.
	InjectTrace(ctx context.Context) string
}

// TraceStatePropagator is a TracePropagator that carries the W3C
// tracestate too (__meta__.tracestate, see [TracestateKey]): the vendor
// entries of a trace, which a TracePropagator alone would drop. When an
// agent's propagator implements it, the agent calls these methods in
// place of ExtractTrace and InjectTrace.
type TraceStatePropagator interface {
	TracePropagator
	// ExtractTraceState is ExtractTrace given the message's tracestate
	// as well ("" when it has none or it is not valid).
	ExtractTraceState(ctx context.Context, traceparent, tracestate string) context.Context
	// InjectTraceState is InjectTrace returning the tracestate of ctx's
	// span as well.
	InjectTraceState(ctx context.Context) (traceparent, tracestate string)
}

// extractTrace returns the context m's handler runs with: base, given the
// trace context of m's traceparent by each of the agent's TracePropagators
// in turn. One that panics, or returns nil, is passed over.
func (c *conn) extractTrace(base context.Context, m *Message) context.Context {
	tp, _ := m.Meta[TraceparentKey].(string)
	if !validTraceparent(tp) {
		return base
	}
	ts := messageTracestate(m)
	ctx := base
	for _, p := range c.agent.hooks.trace {
		c.guard("ExtractTrace", func() {
			var x context.Context
			if sp, ok := p.(TraceStatePropagator); ok {
				x = sp.ExtractTraceState(ctx, tp, ts)
			} else {
				x = p.ExtractTrace(ctx, tp)
			}
			if x != nil {
				ctx = x
			}
		})
	}
	return ctx
}

// injectTrace asks the agent's TracePropagators, in turn, for the
// traceparent (and tracestate) of a message sent with ctx: the first
// valid one, or "". One that panics is passed over.
func (a *Agent) injectTrace(ctx context.Context) (tp, ts string) {
	for _, p := range a.hooks.trace {
		if tp, ts := a.injectOne(ctx, p); validTraceparent(tp) {
			if !validTracestate(ts) {
				ts = ""
			}
			return tp, ts
		}
	}
	return "", ""
}

func (a *Agent) injectOne(ctx context.Context, p TracePropagator) (tp, ts string) {
	defer func() {
		if r := recover(); r != nil {
			a.logger.Error("agency: hook panicked", "agent", a.id, "hook", "InjectTrace", "panic", r, "stack", string(debug.Stack()))
			tp, ts = "", ""
		}
	}()
	if sp, ok := p.(TraceStatePropagator); ok {
		return sp.InjectTraceState(ctx)
	}
	return p.InjectTrace(ctx), ""
}
