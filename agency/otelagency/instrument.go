package otelagency

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed72275b23/agency-go/agency"
)

// ScopeName is the instrumentation scope of the spans and metrics that
// package otelagency records.
const ScopeName = "github.com/seed72275b23/agency-go/agency/otelagency"

// The attributes of the spans and metrics, after OpenTelemetry's messaging
// semantic conventions where they fit; the agency.* ones are this
// package's own.
const (
	AttrSystem         = attribute.Key("messaging.system")                  // always "agency"
	AttrOperationType  = attribute.Key("messaging.operation.type")          // "send" or "process"
	AttrOperationName  = attribute.Key("messaging.operation.name")          // "send", "request" or "process"
	AttrDestination    = attribute.Key("messaging.destination.name")        // the recipient's id; "*" for a broadcast
	AttrMessageID      = attribute.Key("messaging.message.id")              // __meta__.id
	AttrConversationID = attribute.Key("messaging.message.conversation_id") // __meta__.conversation
	AttrErrorType      = attribute.Key("error.type")                        // the [error] type: invalid_args, permission_denied, …
	AttrAgent          = attribute.Key("agency.agent.id")                   // the agent that sends or handles
	AttrAction         = attribute.Key("agency.action")                     // the action's name
	AttrSender         = attribute.Key("agency.message.from")               // the sender of a handled message
	AttrBroadcast      = attribute.Key("agency.broadcast")                  // true on the spans of a broadcast
)

// systemName is the value of messaging.system.
const systemName = "agency"

// Instrumentation is the complete OpenTelemetry instrumentation of an
// agent: given with agency.Hooks, it propagates the W3C trace context as
// [Propagator] does, records a span for each message the agent sends
// (kind producer; client for a request, ending with its answer) and one
// for each message it handles (kind consumer, a child of the sender's
// span and the parent of whatever the handler does), and records the
// metrics documented on [New]. A failed handling or request has status
// Error and its error.type attribute names the [error] type. The span of
// a broadcast's handling links to the sending span as well.
//
// One Instrumentation may serve any number of agents; it is safe for
// concurrent use.
type Instrumentation struct {
	Propagator
	tracer  trace.Tracer
	metrics *instruments
}

var (
	_ agency.TraceStatePropagator = (*Instrumentation)(nil)
	_ agency.SendObserver         = (*Instrumentation)(nil)
	_ agency.HandleObserver       = (*Instrumentation)(nil)
)

// Option configures an Instrumentation.
type Option func(*config)

type config struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider records spans with tp rather than the global
// provider (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider records metrics with mp rather than the global
// provider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// New returns an Instrumentation recording with the global providers, or
// those the options give. Its metrics (instrument names, unit, what they
// count), each with the attributes agency.agent.id, agency.action and,
// for failures, error.type:
//
//   - agency.messages.sent ({message}): messages the agent sent, with
//     messaging.operation.name "send" or "request".
//   - agency.messages.handled ({message}): messages the agent took to
//     handle, whatever the outcome.
//   - agency.errors ({error}): failed handlings and requests, by
//     error.type and messaging.operation.name ("process" or "request").
//   - agency.request.duration (s): from a request's send to its answer.
//   - agency.handle.duration (s): from taking a message to its outcome.
//   - agency.mailbox.depth ({message}): messages waiting in the agent's
//     mailbox when it takes one to handle (a histogram of the depth seen).
//   - gen_ai.client.token.usage ({token}): the tokens of each model call,
//     by gen_ai.token.type ("input", "output"), with gen_ai.request.model,
//     gen_ai.agent.name and gen_ai.provider.name (package actions/openai).
//   - gen_ai.client.operation.duration (s): the time of each model call.
func New(opts ...Option) *Instrumentation {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	return &Instrumentation{
		tracer:  c.tp.Tracer(ScopeName),
		metrics: newInstruments(c.mp.Meter(ScopeName)),
	}
}

// ObserveSend starts the span of a send or request; the message carries
// its trace context. A message that carries a traceparent already, sent
// with a context in no trace (an outbox relay sending what a handler
// wrote), has its span in the message's trace.
func (in *Instrumentation) ObserveSend(ctx context.Context, m *agency.Message, request bool) (context.Context, func(error)) {
	op, kind := "send", trace.SpanKindProducer
	if request {
		op, kind = "request", trace.SpanKindClient
	}
	attrs := []attribute.KeyValue{
		AttrSystem.String(systemName),
		AttrOperationType.String("send"),
		AttrOperationName.String(op),
		AttrDestination.String(m.To),
		AttrMessageID.String(m.ID),
		AttrAgent.String(m.From),
		AttrAction.String(m.Action),
	}
	if conv, ok := m.Meta["conversation"].(string); ok && conv != "" {
		attrs = append(attrs, AttrConversationID.String(conv))
	}
	if m.To == agency.Broadcast {
		attrs = append(attrs, AttrBroadcast.Bool(true))
	}
	if tp, ok := m.Meta[agency.TraceparentKey].(string); ok && !trace.SpanContextFromContext(ctx).IsValid() {
		// A message with a trace of its own, sent from outside it (an
		// outbox's relay sends what a handler wrote): its span joins that
		// trace.
		ts, _ := m.Meta[agency.TracestateKey].(string)
		ctx = in.ExtractTraceState(ctx, tp, ts)
	}
	ctx, span := in.tracer.Start(ctx, op+" "+m.To+"."+m.Action, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	start := time.Now()
	return ctx, func(err error) {
		in.metrics.sent(ctx, m, op)
		if request {
			in.metrics.request(ctx, m, time.Since(start), err)
		}
		endSpan(span, err)
	}
}

// ObserveHandle starts the span of a handling, a child of the sender's
// span (and, for a broadcast, linked to it).
func (in *Instrumentation) ObserveHandle(ctx context.Context, m *agency.Message) (context.Context, func(error)) {
	id := m.To
	if a := agency.AgentFrom(ctx); a != nil {
		id = a.ID()
	}
	attrs := []attribute.KeyValue{
		AttrSystem.String(systemName),
		AttrOperationType.String("process"),
		AttrOperationName.String("process"),
		AttrDestination.String(m.To),
		AttrMessageID.String(m.ID),
		AttrAgent.String(id),
		AttrAction.String(m.Action),
		AttrSender.String(m.From),
	}
	if conv, ok := m.Meta["conversation"].(string); ok && conv != "" {
		attrs = append(attrs, AttrConversationID.String(conv))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if m.To == agency.Broadcast {
		attrs = append(attrs, AttrBroadcast.Bool(true))
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	ctx, span := in.tracer.Start(ctx, "process "+id+"."+m.Action, opts...)
	start := time.Now()
	in.metrics.depth(ctx, id, m.Action, agency.MailboxDepth(ctx))
	return ctx, func(err error) {
		in.metrics.handled(ctx, id, m.Action, time.Since(start), err)
		endSpan(span, err)
	}
}

// endSpan ends span with the outcome err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(AttrErrorType.String(errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// errorType returns the error.type of err: the [error] type of an
// *agency.ActionError, "timeout" for a deadline, else "_OTHER" as the
// conventions ask.
func errorType(err error) string {
	var ae *agency.ActionError
	switch {
	case errors.As(err, &ae):
		return string(ae.Type)
	case errors.Is(err, agency.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return string(agency.TypeTimeout)
	case errors.Is(err, agency.ErrNoRecipient):
		return string(agency.TypeNotFound)
	}
	return "_OTHER"
}
