package agency

import (
	"context"
	"log/slog"
)

// OperationObserver sees the operations that a package built on agency
// runs inside an agent's handlers (a model call, a tool call, a plan
// step), so that a tracing library records each as a span, a child of the
// handling's, without that package importing the library. Give it with
// [Hooks]; [StartOperation] calls it.
type OperationObserver interface {
	// ObserveOperation is called when the operation name starts, with
	// attributes named after OpenTelemetry's conventions where there are
	// some (gen_ai.request.model, …). The context it returns is the one
	// the operation runs with (its sends carry its trace); it must be ctx
	// or derived from it. done is called once when it ends, with the
	// attributes known only then and its error.
	ObserveOperation(ctx context.Context, name string, attrs []slog.Attr) (context.Context, func(attrs []slog.Attr, err error))
}

// EventRecorder records the events that a package built on agency emits
// inside an agent's handlers (a handoff, a plan step's outcome), on the
// operation or handling under way: span events, for a tracing library.
// Give it with [Hooks]; [RecordEvent] calls it.
type EventRecorder interface {
	RecordEvent(ctx context.Context, name string, attrs []slog.Attr)
}

// StartOperation tells the OperationObservers of the agent whose handler
// or hook runs with ctx that the operation name starts, and returns the
// context to run it with and the function to call when it ends. Outside
// an agent, or for an agent without one, it returns ctx and a function
// that does nothing, at the cost of a context lookup.
func StartOperation(ctx context.Context, name string, attrs ...slog.Attr) (context.Context, func(err error, attrs ...slog.Attr)) {
	c := fromContext(ctx).conn
	if c == nil || c.agent.hooks.op == nil {
		return ctx, func(error, ...slog.Attr) {}
	}
	a := c.agent
	x, done := ctx, func([]slog.Attr, error) {}
	a.guardHook("ObserveOperation", func() {
		cx, d := a.hooks.op.ObserveOperation(ctx, name, attrs)
		if cx != nil {
			x = cx
		}
		if d != nil {
			done = d
		}
	})
	return x, func(err error, attrs ...slog.Attr) {
		a.guardHook("ObserveOperation done", func() { done(attrs, err) })
	}
}

// RecordEvent gives the event name to the EventRecorders of the agent
// whose handler or hook runs with ctx; outside an agent it does nothing.
func RecordEvent(ctx context.Context, name string, attrs ...slog.Attr) {
	c := fromContext(ctx).conn
	if c == nil || c.agent.hooks.event == nil {
		return
	}
	c.agent.guardHook("RecordEvent", func() { c.agent.hooks.event.RecordEvent(ctx, name, attrs) })
}

// Recording reports whether RecordEvent with ctx reaches an
// EventRecorder, so that a caller builds an event's attributes only then.
func Recording(ctx context.Context) bool {
	c := fromContext(ctx).conn
	return c != nil && c.agent.hooks.event != nil
}

type (
	operationObservers []OperationObserver
	eventRecorders     []EventRecorder
)

func (os operationObservers) ObserveOperation(ctx context.Context, name string, attrs []slog.Attr) (context.Context, func([]slog.Attr, error)) {
	dones := make([]func([]slog.Attr, error), 0, len(os))
	for _, o := range os {
		each(ctx, "ObserveOperation", func() {
			x, done := o.ObserveOperation(ctx, name, attrs)
			if x != nil {
				ctx = x
			}
			if done != nil {
				dones = append(dones, done)
			}
		})
	}
	return ctx, func(attrs []slog.Attr, err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			each(ctx, "ObserveOperation done", func() { dones[i](attrs, err) })
		}
	}
}

func (rs eventRecorders) RecordEvent(ctx context.Context, name string, attrs []slog.Attr) {
	for _, r := range rs {
		each(ctx, "RecordEvent", func() { r.RecordEvent(ctx, name, attrs) })
	}
}
