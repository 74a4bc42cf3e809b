package otelagency

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed72275b23/agency-go/agency"
)

var (
	_ agency.OperationObserver = (*Instrumentation)(nil)
	_ agency.EventRecorder     = (*Instrumentation)(nil)
)

// genAIClientOps are the gen_ai.operation.name values of calls to a model
// server: their spans are of kind client, as the GenAI conventions ask.
var genAIClientOps = map[string]bool{"chat": true, "text_completion": true, "embeddings": true, "generate_content": true}

// ObserveOperation records an operation that a package built on agency
// runs in a handler (package actions/openai's model and tool calls, say)
// as a span, a child of the handling's, with the attributes it is given;
// for a model call, the gen_ai.client.token.usage and
// gen_ai.client.operation.duration metrics as well.
func (in *Instrumentation) ObserveOperation(ctx context.Context, name string, attrs []slog.Attr) (context.Context, func([]slog.Attr, error)) {
	kind := trace.SpanKindInternal
	kv := otelAttrs(attrs)
	op := ""
	for _, a := range kv {
		if a.Key == "gen_ai.operation.name" {
			op = a.Value.AsString()
		}
	}
	if genAIClientOps[op] {
		kind = trace.SpanKindClient
	}
	ctx, span := in.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(kv...))
	start := time.Now()
	return ctx, func(end []slog.Attr, err error) {
		ekv := otelAttrs(end)
		span.SetAttributes(ekv...)
		if op != "" {
			in.metrics.genAI(ctx, kv, ekv, time.Since(start), err)
		}
		if err != nil {
			span.SetAttributes(AttrErrorType.String(errorType(err)))
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// RecordEvent adds the event to the span of ctx: the operation or
// handling under way.
func (in *Instrumentation) RecordEvent(ctx context.Context, name string, attrs []slog.Attr) {
	trace.SpanFromContext(ctx).AddEvent(name, trace.WithAttributes(otelAttrs(attrs)...))
}

// otelAttrs converts slog attributes, groups flattened with dotted keys.
func otelAttrs(attrs []slog.Attr) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, len(attrs))
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		k := prefix + a.Key
		v := a.Value.Resolve()
		switch v.Kind() {
		case slog.KindString:
			kv = append(kv, attribute.String(k, v.String()))
		case slog.KindInt64:
			kv = append(kv, attribute.Int64(k, v.Int64()))
		case slog.KindUint64:
			kv = append(kv, attribute.Int64(k, int64(v.Uint64())))
		case slog.KindFloat64:
			kv = append(kv, attribute.Float64(k, v.Float64()))
		case slog.KindBool:
			kv = append(kv, attribute.Bool(k, v.Bool()))
		case slog.KindDuration:
			kv = append(kv, attribute.Float64(k, v.Duration().Seconds()))
		case slog.KindGroup:
			for _, g := range v.Group() {
				add(k+".", g)
			}
		default:
			if ss, ok := v.Any().([]string); ok {
				kv = append(kv, attribute.StringSlice(k, ss))
			} else {
				kv = append(kv, attribute.String(k, v.String()))
			}
		}
	}
	for _, a := range attrs {
		add("", a)
	}
	return kv
}

// genAI records the GenAI client metrics of a model call: its duration,
// and the tokens it used by gen_ai.token.type.
func (in *instruments) genAI(ctx context.Context, start, end []attribute.KeyValue, d time.Duration, err error) {
	var base []attribute.KeyValue
	var input, output int64 = -1, -1
	for _, a := range append(start, end...) {
		switch a.Key {
		case "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.system", "gen_ai.request.model", "gen_ai.response.model", "gen_ai.agent.name":
			base = append(base, a)
		case "gen_ai.usage.input_tokens":
			input = a.Value.AsInt64()
		case "gen_ai.usage.output_tokens":
			output = a.Value.AsInt64()
		}
	}
	dattrs := base
	if err != nil {
		dattrs = append(append([]attribute.KeyValue(nil), base...), AttrErrorType.String(errorType(err)))
	}
	if in.genAIDuration != nil {
		in.genAIDuration.Record(ctx, d.Seconds(), metric.WithAttributes(dattrs...))
	}
	if in.tokens == nil {
		return
	}
	for typ, n := range map[string]int64{"input": input, "output": output} {
		if n >= 0 {
			in.tokens.Record(ctx, n, metric.WithAttributes(append(append([]attribute.KeyValue(nil), base...), attribute.String("gen_ai.token.type", typ))...))
		}
	}
}
