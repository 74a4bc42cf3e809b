package otelagency_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/otelagency"
	"github.com/seed72275b23/agency-go/space"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder returns a tracer whose ended spans the returned recorder keeps.
func recorder(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("otelagency_test"), rec
}

type empty struct{}

// One trace across three agents: the caller's span, the span the middle
// agent's handler starts, and the span of the last agent's handler, each
// a child of the one before, though no handler touches a traceparent and
// no context crosses from one agent to the next except in messages.
func TestOneTraceAcrossAgents(t *testing.T) {
	tracer, rec := recorder(t)
	hooks := agency.Hooks(otelagency.Propagator{})

	last := agency.MustNewAgent("Last", hooks)
	agency.Handle(last, "ping", func(ctx context.Context, _ empty) (string, error) {
		_, span := tracer.Start(ctx, "Last.ping")
		defer span.End()
		return "pong", nil
	})
	middle := agency.MustNewAgent("Middle", hooks)
	agency.Handle(middle, "relay", func(ctx context.Context, _ empty) (string, error) {
		ctx, span := tracer.Start(ctx, "Middle.relay")
		defer span.End()
		return agency.Call[string](ctx, agency.AgentFrom(ctx), "Last", "ping", nil)
	})
	caller := agency.MustNewAgent("Caller", hooks)
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	for _, a := range []*agency.Agent{last, middle, caller} {
		if err := sp.Add(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, root := tracer.Start(ctx, "Caller asks")
	v, err := agency.Call[string](ctx, caller, "Middle", "relay", nil)
	root.End()
	if err != nil || v != "pong" {
		t.Fatalf("relay: %q, %v", v, err)
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	if len(spans) != 3 {
		t.Fatalf("recorded %d spans, want 3: %v", len(spans), spans)
	}
	rootSC := spans["Caller asks"].SpanContext()
	for _, link := range []struct{ child, parent string }{
		{"Middle.relay", "Caller asks"},
		{"Last.ping", "Middle.relay"},
	} {
		child, parent := spans[link.child], spans[link.parent]
		if child == nil || parent == nil {
			t.Fatalf("no span %q or %q", link.child, link.parent)
		}
		if got := child.SpanContext().TraceID(); got != rootSC.TraceID() {
			t.Errorf("%s is in trace %s, want %s", link.child, got, rootSC.TraceID())
		}
		if got := child.Parent(); got.SpanID() != parent.SpanContext().SpanID() || !got.IsRemote() {
			t.Errorf("%s's parent is %s (remote %v), want %s's span %s, remote", link.child, got.SpanID(), got.IsRemote(), link.parent, parent.SpanContext().SpanID())
		}
	}
}

// The propagator writes and reads what OpenTelemetry's own W3C propagator
// does, and nothing for a context in no trace.
func TestPropagatorRoundTrip(t *testing.T) {
	tracer, _ := recorder(t)
	ctx, span := tracer.Start(context.Background(), "op")
	defer span.End()
	var p otelagency.Propagator

	tp := p.InjectTrace(ctx)
	want := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, want)
	if tp == "" || tp != want.Get("traceparent") {
		t.Errorf("InjectTrace = %q, want %q", tp, want.Get("traceparent"))
	}
	got := trace.SpanContextFromContext(p.ExtractTrace(context.Background(), tp))
	if !got.Equal(span.SpanContext().WithRemote(true)) {
		t.Errorf("ExtractTrace gave %v, want %v", got, span.SpanContext())
	}
	if tp := p.InjectTrace(context.Background()); tp != "" {
		t.Errorf("InjectTrace without a span = %q", tp)
	}
}

// A vendor entry in the root span's tracestate is in the span context of
// the handler two agents on.
func TestTracestateAcrossAgents(t *testing.T) {
	tracer, _ := recorder(t)
	hooks := agency.Hooks(otelagency.Propagator{})
	last := agency.MustNewAgent("Last", hooks)
	agency.Handle(last, "state", func(ctx context.Context, _ empty) (string, error) {
		return trace.SpanContextFromContext(ctx).TraceState().Get("vendor"), nil
	})
	middle := agency.MustNewAgent("Middle", hooks)
	agency.Handle(middle, "relay", func(ctx context.Context, _ empty) (string, error) {
		return agency.Call[string](ctx, agency.AgentFrom(ctx), "Last", "state", nil)
	})
	caller := agency.MustNewAgent("Caller", hooks)
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	for _, a := range []*agency.Agent{last, middle, caller} {
		if err := sp.Add(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	state, err := trace.ParseTraceState("vendor=opaque")
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := tracer.Start(context.Background(), "root")
	defer root.End()
	sc := trace.SpanContextFromContext(ctx).WithTraceState(state)
	ctx = trace.ContextWithSpanContext(ctx, sc)
	v, err := agency.Call[string](ctx, caller, "Middle", "relay", nil)
	if err != nil || v != "opaque" {
		t.Fatalf("the last handler's tracestate vendor entry: %q, %v; want %q", v, err, "opaque")
	}
}
