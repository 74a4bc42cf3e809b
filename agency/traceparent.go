package agency

import (
	"context"
	"maps"
)

// TraceparentKey is the __meta__ key of a message's W3C trace context
// (https://www.w3.org/TR/trace-context/): a message sent while a trace is
// under way carries it, so that tracing tools join the spans of every
// agent, in every process, into one trace.
const TraceparentKey = "traceparent"

// TracestateKey is the __meta__ key of a message's W3C tracestate, the
// vendor entries that go with its traceparent. It travels with the
// traceparent, end to end: a handler's sends carry the tracestate of the
// message it handles, or the one its agent's [TraceStatePropagator]
// injects.
const TracestateKey = "tracestate"

type traceparentKey struct{}

// WithTraceparent returns a copy of ctx whose sends carry tp, a W3C
// traceparent value ("00-<trace id>-<span id>-<flags>"), as
// __meta__.traceparent, ahead of what the agent's [TracePropagator]
// would inject; in an action, it replaces the traceparent of the message
// being handled for the messages the action sends (a child span's, say).
// A tp that is not a valid traceparent is ignored: ctx is returned as it
// is.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if !validTraceparent(tp) {
		return ctx
	}
	return context.WithValue(ctx, traceparentKey{}, tp)
}

// Traceparent returns the traceparent that a message sent with ctx carries:
// the one WithTraceparent gave ctx; else, in an action or hook of an agent
// with a [TracePropagator], the one it injects from ctx; else, in an action
// or hook, the valid traceparent of the message being handled, so that a
// trace goes on through agents that know nothing of tracing; "" when there
// is none. (A send from an agent with a TracePropagator asks it whatever
// ctx is, in an action or not.)
func Traceparent(ctx context.Context) string {
	var a *Agent
	if c := fromContext(ctx); c.conn != nil {
		a = c.conn.agent
	}
	return traceparentFor(ctx, a)
}

// Tracestate returns the W3C tracestate that a message sent with ctx
// carries beside [Traceparent]'s traceparent: the one the agent's
// [TraceStatePropagator] injects, or, in an action or hook, the valid
// tracestate of the message being handled; "" when there is none, or when
// the traceparent came from WithTraceparent.
func Tracestate(ctx context.Context) string {
	var a *Agent
	if c := fromContext(ctx); c.conn != nil {
		a = c.conn.agent
	}
	_, ts := traceContextFor(ctx, a)
	return ts
}

// traceparentFor is Traceparent for a message that a sends with ctx.
func traceparentFor(ctx context.Context, a *Agent) string {
	tp, _ := traceContextFor(ctx, a)
	return tp
}

// traceContextFor returns the traceparent and tracestate of a message
// that a sends with ctx. The tracestate goes with the traceparent it was
// found with.
func traceContextFor(ctx context.Context, a *Agent) (tp, ts string) {
	if tp, ok := ctx.Value(traceparentKey{}).(string); ok {
		return tp, ""
	}
	if a != nil {
		if tp, ts := a.injectTrace(ctx); tp != "" {
			return tp, ts
		}
	}
	if m := MessageFrom(ctx); m != nil {
		if tp, ok := m.Meta[TraceparentKey].(string); ok && validTraceparent(tp) {
			return tp, messageTracestate(m)
		}
	}
	return "", ""
}

// messageTracestate returns m's tracestate when it is one to pass on.
func messageTracestate(m *Message) string {
	ts, _ := m.Meta[TracestateKey].(string)
	if !validTracestate(ts) {
		return ""
	}
	return ts
}

// CarryTrace gives m, unless it has a traceparent, the traceparent and
// tracestate that a message sent with ctx would carry (see [Traceparent]),
// in a copy of its Meta. It is for a message kept to be sent later (an
// outbox that a relay sends from), which belongs to the trace it was made
// in, not to the relay's.
func CarryTrace(ctx context.Context, m *Message) {
	if _, ok := m.Meta[TraceparentKey]; ok {
		return
	}
	var a *Agent
	if c := fromContext(ctx); c.conn != nil {
		a = c.conn.agent
	}
	tp, ts := traceContextFor(ctx, a)
	if tp != "" {
		setTrace(m, tp, ts)
	}
}

// carryTrace sets the traceparent of m, which a sends with ctx, unless m
// has one. The caller's Meta map is copied, not written to.
func (a *Agent) carryTrace(ctx context.Context, m *Message) {
	if ctx == context.Background() && len(a.hooks.trace) == 0 {
		return // no trace under way, and none to start: the common case, quickly
	}
	if _, ok := m.Meta[TraceparentKey]; ok {
		return
	}
	tp, ts := traceContextFor(ctx, a)
	if tp == "" {
		return
	}
	setTrace(m, tp, ts)
}

// setTrace sets m's trace context in a copy of its Meta.
func setTrace(m *Message, tp, ts string) {
	meta := make(map[string]any, len(m.Meta)+2)
	maps.Copy(meta, m.Meta)
	meta[TraceparentKey] = tp
	if ts != "" {
		meta[TracestateKey] = ts
	}
	m.Meta = meta
}

// validTracestate checks a tracestate value loosely: not empty, at most
// 512 characters (the size W3C asks every vendor to pass on), printable
// ASCII. Its list members are the tracing library's business.
func validTracestate(ts string) bool {
	if ts == "" || len(ts) > 512 {
		return false
	}
	for i := range len(ts) {
		if c := ts[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// validTraceparent checks the form of a traceparent value: version, trace
// id, parent id and flags in lowercase hex, the ids not all zeros. A
// version other than 00 may have more after the flags, behind a dash.
func validTraceparent(tp string) bool {
	if len(tp) < 55 || (tp[:2] == "00" && len(tp) != 55) || (len(tp) > 55 && tp[55] != '-') {
		return false
	}
	if tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || tp[:2] == "ff" {
		return false
	}
	zeros := func(s string) bool {
		for i := range len(s) {
			if s[i] != '0' {
				return false
			}
		}
		return true
	}
	for _, part := range [...]string{tp[:2], tp[3:35], tp[36:52], tp[53:55]} {
		for i := range len(part) {
			if c := part[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return !zeros(tp[3:35]) && !zeros(tp[36:52])
}
