package spacetest

import (
	"context"
	"reflect"

	"github.com/seed72275b23/agency-go/agency"
)

// spanKey keys the "current span" of fakeTracer in a context: its
// traceparent.
type spanKey struct{}

// fakeTracer is an agency.TracePropagator for a tracing library that keeps
// the current span's traceparent in the context.
type fakeTracer struct{}

func (fakeTracer) ExtractTrace(ctx context.Context, tp string) context.Context {
	return context.WithValue(ctx, spanKey{}, tp)
}

func (fakeTracer) InjectTrace(ctx context.Context) string {
	tp, _ := ctx.Value(spanKey{}).(string)
	return tp
}

// childSpan returns ctx with a span of the same trace as ctx's current
// one, as a tracing library's Start does.
func childSpan(ctx context.Context, spanID string) context.Context {
	tp, _ := ctx.Value(spanKey{}).(string)
	if len(tp) != 55 {
		return ctx // in no trace
	}
	return context.WithValue(ctx, spanKey{}, tp[:36]+spanID+tp[52:])
}

// With a TracePropagator, a handler runs in the trace context of the
// message it handles (the propagator extracts it into the handler's
// context, which stays the agent's: message, agent and deadline reachable),
// and a message sent with a context in a trace carries its current span
// (the propagator injects it), whether or not the context is a handler's.
// No handler says anything about traceparents.
func testTracePropagator(e *env) {
	const (
		root  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		child = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
	)
	var seen record[string]
	last := e.newAgent("Last", agency.Hooks(fakeTracer{}))
	agency.Handle(last, "ping", func(ctx context.Context, _ empty) (string, error) {
		tp, _ := ctx.Value(spanKey{}).(string)
		seen.add("last " + tp)
		return "pong", nil
	})
	middle := e.newAgent("Middle", agency.Hooks(fakeTracer{}))
	agency.Handle(middle, "relay", func(ctx context.Context, _ empty) (string, error) {
		tp, _ := ctx.Value(spanKey{}).(string)
		seen.add("middle " + tp)
		if _, ok := ctx.Deadline(); !ok || agency.MessageFrom(ctx) == nil || agency.AgentFrom(ctx) != middle {
			e.t.Errorf("the handler's context lost the agent's: deadline %v, message %v, agent %v", ok, agency.MessageFrom(ctx), agency.AgentFrom(ctx))
		}
		ctx = childSpan(ctx, "b7ad6b7169203331")
		seen.add("middle sends " + agency.Traceparent(ctx))
		return agency.Call[string](ctx, agency.AgentFrom(ctx), last.ID(), "ping", nil)
	})
	caller := e.newAgent("Caller", agency.Hooks(fakeTracer{}))
	e.add(last, middle, caller)

	ctx := context.WithValue(e.ctx(), spanKey{}, root)
	if v, err := agency.Call[string](ctx, caller, middle.ID(), "relay", nil); err != nil || v != "pong" {
		e.t.Fatalf("relay: %q, %v", v, err)
	}
	want := []string{"middle " + root, "middle sends " + child, "last " + child}
	if got := seen.all(); !reflect.DeepEqual(got, want) {
		e.t.Errorf("the handlers saw\n%q, want\n%q", got, want)
	}
}
