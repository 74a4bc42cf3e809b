package otelagency

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/seed72275b23/agency-go/agency"
)

// instruments are the metrics an Instrumentation records (see New).
type instruments struct {
	sets                     sync.Map // attrKey → metric.MeasurementOption: an attribute set is made once per combination
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

// attrKey is one combination of a metric's attributes; "" leaves one out.
type attrKey struct {
	agent, dest, action, op, errType string
}

// set returns the attributes of k, made once.
func (in *instruments) set(k attrKey) metric.MeasurementOption {
	if o, ok := in.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	for _, a := range []struct {
		key attribute.Key
		v   string
	}{{AttrAgent, k.agent}, {AttrDestination, k.dest}, {AttrAction, k.action}, {AttrOperationName, k.op}, {AttrErrorType, k.errType}} {
		if a.v != "" {
			attrs = append(attrs, a.key.String(a.v))
		}
	}
	o, _ := in.sets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(attrs...)))
	return o.(metric.MeasurementOption)
}

func (in *instruments) sent(ctx context.Context, m *agency.Message, op string) {
	if in.sentC == nil {
		return
	}
	in.sentC.Add(ctx, 1, in.set(attrKey{agent: m.From, action: m.Action, op: op}))
}

func (in *instruments) request(ctx context.Context, m *agency.Message, d time.Duration, err error) {
	k := attrKey{agent: m.From, dest: m.To, action: m.Action}
	if err != nil {
		k.errType = errorType(err)
		if in.errorsC != nil {
			in.errorsC.Add(ctx, 1, in.set(attrKey{agent: m.From, action: m.Action, op: "request", errType: k.errType}))
		}
	}
	if in.requestH != nil {
		in.requestH.Record(ctx, d.Seconds(), in.set(k))
	}
}

func (in *instruments) handled(ctx context.Context, agent, action string, d time.Duration, err error) {
	k := attrKey{agent: agent, action: action}
	if err != nil {
		k.errType = errorType(err)
		if in.errorsC != nil {
			in.errorsC.Add(ctx, 1, in.set(attrKey{agent: agent, action: action, op: "process", errType: k.errType}))
		}
	}
	if in.handledC != nil {
		in.handledC.Add(ctx, 1, in.set(k))
	}
	if in.handleH != nil {
		in.handleH.Record(ctx, d.Seconds(), in.set(k))
	}
}

func (in *instruments) depth(ctx context.Context, agent, action string, n int) {
	if in.depthH != nil {
		in.depthH.Record(ctx, int64(n), in.set(attrKey{agent: agent}))
	}
}
