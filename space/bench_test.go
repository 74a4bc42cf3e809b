package space_test

import (
	"context"
	"encoding/json"
	"slices"
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
	benchRequest(b, nil)
}

// BenchmarkLocalRequestDeadline is BenchmarkLocalRequest with a deadline
// made for each call, as a real caller makes one (context.WithTimeout and
// its cancel are part of what is measured): the deadline travels with the
// message and the handler's context gets a timer of its own.
func BenchmarkLocalRequestDeadline(b *testing.B) {
	benchRequest(b, func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	})
}

// benchRequest measures sequential calls, each with the context newCtx
// returns (or none, with a nil newCtx).
func benchRequest(b *testing.B, newCtx func() (context.Context, context.CancelFunc)) {
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
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if newCtx != nil {
			ctx, cancel = newCtx()
		}
		n, err := agency.Call[int](ctx, caller, "Echo", "ping", pingArgs{N: i})
		cancel()
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

// addArgs are the arguments of the add message of the codec benchmarks.
type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// BenchmarkJSONRoundTrip is a reference point: encoding and decoding one
// small message in the wire format with the library's codec, the cost a
// space that serialises every message pays on each hop. The arguments are
// a typed struct on the way out and stay raw JSON on the way in: the
// action decodes them strictly into its own type when it runs (the gap
// between BenchmarkLocalSendOneWayJSON and BenchmarkLocalSendOneWay).
func BenchmarkJSONRoundTrip(b *testing.B) {
	m := &agency.Message{To: "Calculator", From: "User", ID: agency.NewID(), Action: "add", Args: addArgs{A: 1, B: 2}}
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

// BenchmarkPlainJSONRoundTrip is the reference point for
// BenchmarkJSONRoundTrip: the same message, the same bytes, through
// encoding/json alone into a struct that knows its shape (arguments
// included), with no checks.
func BenchmarkPlainJSONRoundTrip(b *testing.B) {
	type plain struct {
		To     string `json:"to"`
		From   string `json:"from"`
		Action struct {
			Meta struct {
				ID string `json:"id"`
			} `json:"__meta__"`
			Add addArgs `json:"add"`
		} `json:"action"`
	}
	var m plain
	m.To, m.From = "Calculator", "User"
	m.Action.Meta.ID = agency.NewID()
	m.Action.Add = addArgs{A: 1, B: 2}
	b.ReportAllocs()
	for range b.N {
		data, err := json.Marshal(&m)
		if err != nil {
			b.Fatal(err)
		}
		var out plain
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}
