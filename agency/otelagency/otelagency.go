// Package otelagency connects OpenTelemetry tracing to agency: with its
// [Propagator] among an agent's hooks, each handler runs in the trace of
// the message it handles, and the messages an agent sends carry the
// current span of the context they are sent with, in
// __meta__.traceparent, across agents and processes. Handlers start spans
// as they would anywhere else; none of them reads or writes a traceparent:
//
//	a := agency.MustNewAgent("Calculator", agency.Hooks(otelagency.Propagator{}))
//	agency.Handle(a, "add", func(ctx context.Context, args AddArgs) (float64, error) {
//		ctx, span := tracer.Start(ctx, "Calculator.add") // a child of the caller's span
//		defer span.End()
//		return add(ctx, args) // whatever it sends is in this span's trace
//	})
//
// The package is apart from agency so that a program that does not trace
// does not import OpenTelemetry.
package otelagency

import (
	"context"

	"go.opentelemetry.io/otel/propagation"

	"github.com/seed72275b23/agency-go/agency"
)

// Propagator is an agency.TracePropagator for OpenTelemetry's W3C trace
// context. Give it to every agent whose handlers trace, or that sends with
// a traced context, with agency.Hooks. Its zero value is ready to use and
// it is safe for concurrent use.
type Propagator struct{}

var _ agency.TraceStatePropagator = Propagator{}

// traceContext reads and writes the traceparent and tracestate headers,
// the W3C trace context that agency carries.
var traceContext propagation.TraceContext

// ExtractTrace returns ctx with the remote span context of traceparent,
// so that a span a handler starts from it is a child of the sender's span.
func (Propagator) ExtractTrace(ctx context.Context, traceparent string) context.Context {
	return traceContext.Extract(ctx, propagation.MapCarrier{agency.TraceparentKey: traceparent})
}

// ExtractTraceState is ExtractTrace with the message's tracestate, which
// the remote span context keeps: vendor entries set at the root reach
// every handler.
func (Propagator) ExtractTraceState(ctx context.Context, traceparent, tracestate string) context.Context {
	carrier := propagation.MapCarrier{agency.TraceparentKey: traceparent}
	if tracestate != "" {
		carrier[agency.TracestateKey] = tracestate
	}
	return traceContext.Extract(ctx, carrier)
}

// InjectTrace returns the traceparent of ctx's current span, or "" when
// ctx holds no valid span context.
func (p Propagator) InjectTrace(ctx context.Context) string {
	tp, _ := p.InjectTraceState(ctx)
	return tp
}

// InjectTraceState returns the traceparent and tracestate of ctx's
// current span.
func (Propagator) InjectTraceState(ctx context.Context) (traceparent, tracestate string) {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier.Get(agency.TraceparentKey), carrier.Get(agency.TracestateKey)
}
