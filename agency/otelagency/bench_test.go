package otelagency_test

import (
	"context"
	"sync/atomic"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/otelagency"
	"github.com/seed72275b23/agency-go/space"
)

// benchHooks are the configurations the benchmarks compare: no hooks, the
// propagator alone, and the full instrumentation recording every span
// (sampled, kept by no processor) and every metric (a manual reader).
func benchHooks(b *testing.B) map[string][]agency.Option {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	in := otelagency.New(otelagency.WithTracerProvider(tp), otelagency.WithMeterProvider(mp))
	return map[string][]agency.Option{
		"off":          nil,
		"propagator":   {agency.Hooks(otelagency.Propagator{})},
		"instrumented": {agency.Hooks(in)},
	}
}

type benchArgs struct {
	N int `json:"n"`
}

func benchPair(b *testing.B, opts []agency.Option, got *atomic.Int64, done chan struct{}, want *atomic.Int64) (*agency.Agent, *agency.Agent) {
	rcv := agency.MustNewAgent("Receiver", opts...)
	agency.Handle(rcv, "note", func(_ context.Context, a benchArgs) (int, error) {
		if got.Add(1) == want.Load() {
			done <- struct{}{}
		}
		return a.N, nil
	})
	snd := agency.MustNewAgent("Sender", opts...)
	sp := space.NewLocal()
	b.Cleanup(func() { _ = sp.Close(context.Background()) })
	for _, a := range []*agency.Agent{rcv, snd} {
		if err := sp.Add(context.Background(), a); err != nil {
			b.Fatal(err)
		}
	}
	return snd, rcv
}

// BenchmarkOneWay is the cost of a Send on space.Local, handled, with
// instrumentation off and on.
//
//	go test -run '^$' -bench . -benchtime 200000x -count 6 ./agency/otelagency/
func BenchmarkOneWay(b *testing.B) {
	for _, name := range []string{"off", "propagator", "instrumented"} {
		b.Run(name, func(b *testing.B) {
			var got, want atomic.Int64
			done := make(chan struct{}, 1)
			snd, _ := benchPair(b, benchHooks(b)[name], &got, done, &want)
			want.Store(int64(b.N))
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := snd.Send(ctx, "Receiver", "note", benchArgs{N: i}); err != nil {
					b.Fatal(err)
				}
			}
			<-done
		})
	}
}

// BenchmarkRequest is the cost of a Request on space.Local, with
// instrumentation off and on.
func BenchmarkRequest(b *testing.B) {
	for _, name := range []string{"off", "propagator", "instrumented"} {
		b.Run(name, func(b *testing.B) {
			var got, want atomic.Int64
			want.Store(-1)
			snd, _ := benchPair(b, benchHooks(b)[name], &got, make(chan struct{}, 1), &want)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := agency.Call[int](ctx, snd, "Receiver", "note", benchArgs{N: i}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
