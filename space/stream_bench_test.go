package space_test

import (
	"context"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// BenchmarkLocalStream1000 reads streams of 1,000 parts from an action
// that emits them (agency.Emit) through space.Local, and reports parts per
// second, end to end.
func BenchmarkLocalStream1000(b *testing.B) {
	ctx := context.Background()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	w := agency.MustNewAgent("Writer")
	agency.Handle(w, "stream", func(ctx context.Context, args struct{ N int }) (int, error) {
		for i := 1; i <= args.N; i++ {
			if err := agency.Emit(ctx, i); err != nil {
				return 0, err
			}
		}
		return args.N, nil
	})
	caller := agency.MustNewAgent("Reader")
	if err := sp.Add(ctx, w); err != nil {
		b.Fatal(err)
	}
	if err := sp.Add(ctx, caller); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		parts := 0
		for m, err := range caller.Stream(ctx, "Writer", "stream", struct{ N int }{1000}) {
			if err != nil {
				b.Fatal(err)
			}
			if m.Action == agency.PartAction {
				parts++
			}
		}
		if parts != 1000 {
			b.Fatalf("%d parts", parts)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "parts/s")
}
