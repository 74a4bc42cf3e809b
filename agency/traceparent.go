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

// traceparentFor is Traceparent for a message that a sends with ctx.
func traceparentFor(ctx context.Context, a *Agent) string {
	if tp, ok := ctx.Value(traceparentKey{}).(string); ok {
		return tp
	}
	if a != nil {
		if tp := a.injectTrace(ctx); tp != "" {
			return tp
		}
	}
	if m := MessageFrom(ctx); m != nil {
		if tp, ok := m.Meta[TraceparentKey].(string); ok && validTraceparent(tp) {
			return tp
		}
	}
	return ""
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
	tp := traceparentFor(ctx, a)
	if tp == "" {
		return
	}
	meta := make(map[string]any, len(m.Meta)+1)
	maps.Copy(meta, m.Meta)
	meta[TraceparentKey] = tp
	m.Meta = meta
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
