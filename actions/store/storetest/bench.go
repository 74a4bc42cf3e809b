package storetest

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// Benchmark measures a store's writes the way the plan engine and handoffs
// make them, each as sub-benchmarks that report applies or messages per
// second:
//
//   - ApplyOne: one Apply that replaces a document (at the version read)
//     and queues one message, one after the other.
//   - ApplyOneParallel: the same from 8 goroutines, each on its own
//     document.
//   - ApplyTen: one Apply that creates 10 documents and queues 10 messages.
//   - Drain: a relay's cycle without the sending: Claim 100, Sent 100.
//
// newStore returns an empty store; the benchmark closes it.
func Benchmark(b *testing.B, newStore func(b testing.TB) store.Store) {
	b.Run("ApplyOne", func(b *testing.B) {
		st := benchStore(b, newStore)
		ctx := context.Background()
		msg := benchMessage(b)
		d := store.Doc{Kind: "step", ID: "s1", Parent: "p1", User: "u1", Body: []byte(`{"status":"planned","n":0}`)}
		if err := st.Apply(ctx, store.Changes{Put: []store.Doc{d}}); err != nil {
			b.Fatal(err)
		}
		d.Version = 1
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			d.Body = []byte(`{"status":"approved","n":` + strconv.Itoa(i) + `}`)
			if err := st.Apply(ctx, store.Changes{Put: []store.Doc{d}, Send: []store.Outgoing{msg}}); err != nil {
				b.Fatal(err)
			}
			d.Version++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
	})
	b.Run("ApplyOneParallel", func(b *testing.B) {
		st := benchStore(b, newStore)
		ctx := context.Background()
		msg := benchMessage(b)
		var next atomic.Int64
		b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 goroutines
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			d := store.Doc{Kind: "step", ID: fmt.Sprintf("s%d", next.Add(1)), Body: []byte(`{}`)}
			for pb.Next() {
				if err := st.Apply(ctx, store.Changes{Put: []store.Doc{d}, Send: []store.Outgoing{msg}}); err != nil {
					b.Error(err)
					return
				}
				d.Version++
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
	})
	b.Run("ApplyTen", func(b *testing.B) {
		st := benchStore(b, newStore)
		ctx := context.Background()
		msg := benchMessage(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var c store.Changes
			for j := range 10 {
				c.Put = append(c.Put, store.Doc{Kind: "step", ID: fmt.Sprintf("s%d-%d", i, j), Parent: fmt.Sprintf("p%d", i), Body: []byte(`{"status":"planned"}`)})
				c.Send = append(c.Send, msg)
			}
			if err := st.Apply(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
	})
	b.Run("Drain", func(b *testing.B) {
		st := benchStore(b, newStore)
		ctx := context.Background()
		msg := benchMessage(b)
		c := store.Changes{Send: make([]store.Outgoing, 100)}
		for i := range c.Send {
			c.Send[i] = msg
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if err := st.Apply(ctx, c); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			out, err := st.Claim(ctx, "Coordinator", 100, time.Minute)
			if err != nil || len(out) != 100 {
				b.Fatalf("Claim: %d entries, %v", len(out), err)
			}
			ids := make([]int64, len(out))
			for j, o := range out {
				ids[j] = o.ID
			}
			if err := st.Sent(ctx, ids...); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

func benchStore(b *testing.B, newStore func(b testing.TB) store.Store) store.Store {
	st := newStore(b)
	b.Cleanup(func() { st.Close() })
	return st
}

// benchMessage is a dispatch of a plan step, about 250 bytes on the wire.
func benchMessage(b *testing.B) store.Outgoing {
	o, err := store.NewOutgoing("Coordinator", &agency.Message{To: "HrAgent", Action: "create_employee_record",
		Meta: map[string]any{"idempotency_key": "step-0123456789abcdef", "conversation": "plan-0123456789abcdef"},
		Args: map[string]string{"name": "Jessica Smith", "department": "Engineering"}})
	if err != nil {
		b.Fatal(err)
	}
	return o
}
