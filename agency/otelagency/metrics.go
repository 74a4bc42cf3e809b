package otelagency

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/seed72275b23/agency-go/agency"
)

// instruments are the metrics an Instrumentation records (see New).
type instruments struct {
	sentC, handledC, errorsC metric.Int64Counter
	requestH, handleH        metric.Float64Histogram
	depthH                   metric.Int64Histogram
	tokens                   metric.Int64Histogram
	genAIDuration            metric.Float64Histogram
}

func newInstruments(m metric.Meter) *instruments {
	// An instrument the meter cannot make is a no-op one: metrics must
	// never fail a message.
	in := &instruments{}
	in.sentC, _ = m.Int64Counter("agency.messages.sent", metric.WithUnit("{message}"),
		metric.WithDescription("Messages an agent sent (send or request)."))
	in.handledC, _ = m.Int64Counter("agency.messages.handled", metric.WithUnit("{message}"),
		metric.WithDescription("Messages an agent took to handle, whatever the outcome."))
	in.errorsC, _ = m.Int64Counter("agency.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed handlings and requests, by error.type."))
	in.requestH, _ = m.Float64Histogram("agency.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a request's send to its answer."))
	in.handleH, _ = m.Float64Histogram("agency.handle.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from taking a message to its outcome."))
	in.depthH, _ = m.Int64Histogram("agency.mailbox.depth", metric.WithUnit("{message}"),
		metric.WithDescription("Messages waiting in an agent's mailbox when it takes one."))
	in.tokens, _ = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens a model call used, by gen_ai.token.type (input, output)."))
	in.genAIDuration, _ = m.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a model call took, retries included."))
	return in
}

func (in *instruments) sent(ctx context.Context, m *agency.Message, op string) {
	if in.sentC == nil {
		return
	}
	in.sentC.Add(ctx, 1, metric.WithAttributes(AttrAgent.String(m.From), AttrAction.String(m.Action), AttrOperationName.String(op)))
}

func (in *instruments) request(ctx context.Context, m *agency.Message, d time.Duration, err error) {
	attrs := []attribute.KeyValue{AttrAgent.String(m.From), AttrDestination.String(m.To), AttrAction.String(m.Action)}
	if err != nil {
		attrs = append(attrs, AttrErrorType.String(errorType(err)))
		if in.errorsC != nil {
			in.errorsC.Add(ctx, 1, metric.WithAttributes(AttrAgent.String(m.From), AttrAction.String(m.Action),
				AttrErrorType.String(errorType(err)), AttrOperationName.String("request")))
		}
	}
	if in.requestH != nil {
		in.requestH.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
	}
}

func (in *instruments) handled(ctx context.Context, agent, action string, d time.Duration, err error) {
	attrs := []attribute.KeyValue{AttrAgent.String(agent), AttrAction.String(action)}
	if err != nil {
		attrs = append(attrs, AttrErrorType.String(errorType(err)))
		if in.errorsC != nil {
			in.errorsC.Add(ctx, 1, metric.WithAttributes(AttrAgent.String(agent), AttrAction.String(action),
				AttrErrorType.String(errorType(err)), AttrOperationName.String("process")))
		}
	}
	if in.handledC != nil {
		in.handledC.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
	if in.handleH != nil {
		in.handleH.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
	}
}

func (in *instruments) depth(ctx context.Context, agent, action string, n int) {
	if in.depthH != nil {
		in.depthH.Record(ctx, int64(n), metric.WithAttributes(AttrAgent.String(agent)))
	}
}
