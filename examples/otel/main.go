// Command otel traces and measures agents with OpenTelemetry, exporting
// to stdout.
//
// Three agents share a space: a User asks a Front agent to sum two
// numbers, Front asks a Calculator, and the User then calls an action
// that fails. Each agent has an otelagency.Instrumentation among its
// hooks; no handler has a line of tracing code. The program prints every
// span as JSON (go.opentelemetry.io/otel/exporters/stdout/stdouttrace):
// the User's root span, the request and handling of each hop in its
// trace, the failed call with status Error and error.type action_failed;
// then the metrics it recorded.
//
//	go run ./examples/otel
//
// With -amqp the agents share an amqpspace.Space on the broker that
// amqpspace.ConfigFromEnv names (AMQP_URL, or RabbitMQ on localhost with
// guest/guest), so each hop crosses the broker.
//
//	go run ./examples/otel -amqp
//
// To send to a collector instead, build the tracer provider with an OTLP
// exporter (go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc)
// in place of stdouttrace: nothing else changes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/otelagency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
)

// SumArgs are the arguments of sum and add.
type SumArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func main() {
	useAMQP := flag.Bool("amqp", false, "run the agents on RabbitMQ (amqpspace) instead of in process")
	exchange := flag.String("exchange", "", "with -amqp, the exchange (default: amqpspace's)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, *useAMQP, *exchange); err != nil {
		log.Fatal(err)
	}
}

// theSpace is a space.Local, or an amqpspace.Space.
type theSpace interface {
	Add(ctx context.Context, a *agency.Agent) error
	Close(ctx context.Context) error
}

func run(ctx context.Context, out io.Writer, useAMQP bool, exchange string) error {
	exp, err := stdouttrace.New(stdouttrace.WithWriter(out), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "agency-example"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()

	// One instrumentation serves every agent.
	hooks := agency.Hooks(otelagency.New(otelagency.WithTracerProvider(tp), otelagency.WithMeterProvider(mp)))

	calc := agency.MustNewAgent("Calculator", hooks)
	agency.Handle(calc, "add", func(_ context.Context, a SumArgs) (int, error) { return a.A + a.B, nil })
	agency.Handle(calc, "divide", func(context.Context, SumArgs) (int, error) {
		return 0, errors.New("division is not implemented")
	})
	front := agency.MustNewAgent("Front", hooks)
	agency.Handle(front, "sum", func(ctx context.Context, a SumArgs) (int, error) {
		return agency.Call[int](ctx, agency.AgentFrom(ctx), "Calculator", "add", a)
	})
	user := agency.MustNewAgent("User", hooks)

	var sp theSpace = space.NewLocal()
	if useAMQP {
		cfg, err := amqpspace.ConfigFromEnv()
		if err != nil {
			return err
		}
		if exchange != "" {
			cfg.Exchange = exchange
		}
		if sp, err = amqpspace.New(ctx, cfg); err != nil {
			return err
		}
	}
	defer func() { _ = sp.Close(context.Background()) }()
	for _, a := range []*agency.Agent{calc, front, user} {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}

	tracer := tp.Tracer("examples/otel")
	ctx, root := tracer.Start(ctx, "User asks")
	sum, err := agency.Call[int](ctx, user, "Front", "sum", SumArgs{A: 1, B: 2})
	if err != nil {
		return err
	}
	_, divErr := agency.Call[int](ctx, user, "Calculator", "divide", SumArgs{A: 1, B: 0})
	root.End()
	// A handling's span ends just after its answer is sent: closing the
	// space waits for the handlers, so every span has ended after it.
	if err := sp.Close(ctx); err != nil {
		return err
	}

	fmt.Fprintf(out, "sum: %d\ndivide: %v\n", sum, divErr)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		return err
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			fmt.Fprintf(out, "metric %s (%s)\n", m.Name, m.Unit)
		}
	}
	return nil
}
