package otelagency_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/otelagency"
	"github.com/seed72275b23/agency-go/space"
)

// Each agent gets the Propagator with its hooks; handlers start spans as
// they would anywhere. The spans of the caller, the middle agent and the
// last agent form one trace.
func ExamplePropagator() {
	rec := tracetest.NewSpanRecorder() // a real program exports instead
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer provider.Shutdown(context.Background())
	tracer := provider.Tracer("example")

	hooks := agency.Hooks(otelagency.Propagator{})
	last := agency.MustNewAgent("Last", hooks)
	agency.Handle(last, "ping", func(ctx context.Context, _ struct{}) (string, error) {
		_, span := tracer.Start(ctx, "Last.ping")
		defer span.End()
		return "pong", nil
	})
	middle := agency.MustNewAgent("Middle", hooks)
	agency.Handle(middle, "relay", func(ctx context.Context, _ struct{}) (string, error) {
		ctx, span := tracer.Start(ctx, "Middle.relay")
		defer span.End()
		return agency.Call[string](ctx, agency.AgentFrom(ctx), "Last", "ping", nil)
	})
	caller := agency.MustNewAgent("Caller", hooks)
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	for _, a := range []*agency.Agent{last, middle, caller} {
		if err := sp.Add(context.Background(), a); err != nil {
			log.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, root := tracer.Start(ctx, "Caller asks")
	if _, err := agency.Call[string](ctx, caller, "Middle", "relay", nil); err != nil {
		log.Fatal(err)
	}
	root.End()

	names := map[string]string{} // span id → name
	for _, s := range rec.Ended() {
		names[s.SpanContext().SpanID().String()] = s.Name()
	}
	for _, s := range rec.Ended() {
		parent := names[s.Parent().SpanID().String()]
		if parent == "" {
			parent = "none"
		}
		same := s.SpanContext().TraceID() == root.SpanContext().TraceID()
		fmt.Printf("%s: parent %s, in the caller's trace: %v\n", s.Name(), parent, same)
	}
	// Output:
	// Last.ping: parent Middle.relay, in the caller's trace: true
	// Middle.relay: parent Caller asks, in the caller's trace: true
	// Caller asks: parent none, in the caller's trace: true
}
