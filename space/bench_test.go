package space_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

type tickArgs struct {
	N int `json:"n"`
}

type pingArgs struct {
	N int `json:"n"`
}

func addBenchAgent(b *testing.B, sp space.Space, a *agency.Agent) {
	b.Helper()
	if err := sp.Add(context.Background(), a); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLocalSendOneWay measures one-way action messages: a sender Sends
// b.N messages and the receiver's action handles every one.
func BenchmarkLocalSendOneWay(b *testing.B) {
	benchOneWay(b, func(i int) any { return tickArgs{N: i} })
}

// BenchmarkLocalSendOneWayJSON is BenchmarkLocalSendOneWay with arguments
// as they arrive from the wire (a JSON object), so that each message is
// decoded strictly and checked for required fields: the cost a message from
// another process pays on top of the in-process path.
func BenchmarkLocalSendOneWayJSON(b *testing.B) {
	args := json.RawMessage(`{"n": 7}`)
	benchOneWay(b, func(int) any { return args })
}

// benchOneWay sends b.N tick messages with the arguments args(i) and waits
// until the receiver has handled them all.
func benchOneWay(b *testing.B, args func(i int) any) {
	ctx := context.Background()
	sp := space.NewLocal()
	defer sp.Close(ctx)

	done := make(chan struct{})
	handled := 0
	recv := agency.MustNewAgent("Receiver")
	agency.Handle(recv, "tick", func(ctx context.Context, args tickArgs) (struct{}, error) {
		handled++
		if handled == b.N {
			close(done)
		}
		return struct{}{}, nil
	})
	send := agency.MustNewAgent("Sender")
	addBenchAgent(b, sp, recv)
	addBenchAgent(b, sp, send)

	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := send.Send(ctx, "Receiver", "tick", args(i)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("handled %d of %d", handled, b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkLocalRequest measures sequential request round trips and reports
// their median.
func BenchmarkLocalRequest(b *testing.B) {
	benchRequest(b, context.Background())
}

// BenchmarkLocalRequestDeadline is BenchmarkLocalRequest with a deadline on
// the context, as every real Request should have: the deadline travels with
// the message and the handler's context gets a timer of its own.
func BenchmarkLocalRequestDeadline(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	benchRequest(b, ctx)
}

func benchRequest(b *testing.B, ctx context.Context) {
	sp := space.NewLocal()
	defer sp.Close(context.Background())

	echo := agency.MustNewAgent("Echo")
	agency.Handle(echo, "ping", func(ctx context.Context, args pingArgs) (int, error) {
		return args.N, nil
	})
	caller := agency.MustNewAgent("Caller")
	addBenchAgent(b, sp, echo)
	addBenchAgent(b, sp, caller)

	times := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		n, err := agency.Call[int](ctx, caller, "Echo", "ping", pingArgs{N: i})
		times[i] = time.Since(start)
		if err != nil || n != i {
			b.Fatalf("ping %d: %d, %v", i, n, err)
		}
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e3, "µs-median")
	b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1e3, "µs-p99")
}

// BenchmarkLocalIdleAgents adds 100,000 agents with one action each and
// reports the memory each one holds while idle: heap and goroutine stacks,
// measured after a collection.
func BenchmarkLocalIdleAgents(b *testing.B) {
	const agents = 100_000
	ctx := context.Background()
	type noArgs struct{}
	handler := func(ctx context.Context, _ noArgs) (int, error) { return 1, nil }
	var perAgent float64
	for range b.N {
		before := inUse()
		sp := space.NewLocal()
		for i := range agents {
			a := agency.MustNewAgent("agent-" + strconv.Itoa(i))
			agency.Handle(a, "noop", handler)
			if err := sp.Add(ctx, a); err != nil {
				b.Fatal(err)
			}
		}
		after := inUse()
		perAgent = float64(after-before) / agents
		b.StopTimer()
		if err := sp.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(perAgent, "bytes/agent")
}

// inUse returns the bytes of live heap objects plus goroutine stacks.
func inUse() uint64 {
	var ms runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// BenchmarkChannelRoundTrip is a reference point: a request and its answer
// over two bare Go channels between two goroutines, the floor under any
// in-process round trip.
func BenchmarkChannelRoundTrip(b *testing.B) {
	req, resp := make(chan int), make(chan int)
	go func() {
		for n := range req {
			resp <- n
		}
	}()
	defer close(req)
	for i := range b.N {
		req <- i
		<-resp
	}
}

// BenchmarkJSONRoundTrip is a reference point: encoding and decoding one
// small message in the wire format, the cost a space that serialises every
// message would pay on each hop.
func BenchmarkJSONRoundTrip(b *testing.B) {
	m := &agency.Message{To: "Calculator", From: "User", ID: agency.NewID(), Action: "add", Args: map[string]any{"a": 1, "b": 2}}
	b.ReportAllocs()
	for range b.N {
		data, err := m.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := agency.DecodeMessage(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainJSONRoundTrip is the reference point DESIGN.md quotes: the
// same small message through encoding/json alone, with no checks, into a
// plain struct.
func BenchmarkPlainJSONRoundTrip(b *testing.B) {
	type plain struct {
		To     string                    `json:"to"`
		From   string                    `json:"from"`
		Action map[string]map[string]any `json:"action"`
	}
	m := plain{To: "Calculator", From: "User", Action: map[string]map[string]any{
		"__meta__": {"id": agency.NewID()},
		"add":      {"a": 1, "b": 2},
	}}
	b.ReportAllocs()
	for range b.N {
		data, err := json.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		var out plain
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}
