package amqpspace_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// The benchmarks come in pairs: BenchmarkAMQPX does its work through an
// amqpspace.Space, BenchmarkRawAMQPX the same work with the bare amqp091-go
// client of bare_test.go, on the same broker, so that their ratio is the
// cost of amqpspace over what one would write by hand with the same
// guarantees. Run the pairs interleaved, as bench/cmd/compare
// does, or by hand:
//
//	go test -run='^$' -bench='AMQP' -benchtime=3s -count=6 ./amqpspace/
//
// Without a broker they are skipped (see package amqptest).

// oneWayInFlight is how many one-way messages are on their way at once:
// that many goroutines Send through the space, each waiting for its
// confirmation; the bare publisher keeps as many unconfirmed.
const oneWayInFlight = 128

// concurrentRequesters is how many requests are under way at once in the
// concurrent request benchmarks; the responder has as many handlers.
const concurrentRequesters = 16

// benchTimeout is the deadline of each request, and bounds each wait of
// the benchmarks for the broker.
const benchTimeout = 10 * time.Second

// benchTick is the one-way message's arguments: a number and a string
// that makes the arguments' JSON a given size.
type benchTick struct {
	N    int    `json:"n"`
	Data string `json:"data"`
}

type benchPing struct {
	N int `json:"n"`
}

// payloadSizes are the sizes of the one-way arguments' JSON.
var payloadSizes = []struct {
	name  string
	bytes int
}{{"200B", 200}, {"4KiB", 4096}}

// newTick returns arguments whose JSON is size bytes long.
func newTick(size int) benchTick {
	t := benchTick{N: 1}
	empty, _ := json.Marshal(t)
	t.Data = strings.Repeat("x", max(size-len(empty), 0))
	return t
}

// bySize runs f as one sub-benchmark per payload size.
func bySize(b *testing.B, f func(b *testing.B, args benchTick)) {
	for _, s := range payloadSizes {
		b.Run(s.name, func(b *testing.B) { f(b, newTick(s.bytes)) })
	}
}

// BenchmarkAMQPSendOneWay measures one-way action messages through an
// amqpspace.Space: oneWayInFlight goroutines Send b.N tick messages, each
// waiting for the broker's confirmation, until the receiver's action has
// handled every one. The sender has no ValueHandler, so its messages
// carry __meta__.no_reply and the receiver sends nothing back: the same
// messages cross the broker as in BenchmarkRawAMQPOneWay.
func BenchmarkAMQPSendOneWay(b *testing.B) { benchSendOneWay(b, amqpspace.Config{}) }

// BenchmarkAMQPSendOneWayDurable is BenchmarkAMQPSendOneWay with
// Config.Durable: the broker writes each message to disk before it
// confirms it. Run side by side with the transient one for the cost:
//
//	go test -run='^$' -bench='AMQPSendOneWay' -benchtime=3s -count=1 ./amqpspace/
func BenchmarkAMQPSendOneWayDurable(b *testing.B) {
	benchSendOneWay(b, amqpspace.Config{Durable: true})
}

func benchSendOneWay(b *testing.B, cfg amqpspace.Config) {
	bySize(b, func(b *testing.B, args benchTick) {
		sp := newSpace(b, cfg)
		ctx := context.Background()
		var handled atomic.Int64
		done := make(chan struct{})
		recv := agency.MustNewAgent(randomName("bench-receiver"))
		agency.Handle(recv, "tick", func(_ context.Context, _ benchTick) (struct{}, error) {
			if handled.Add(1) == int64(b.N) {
				close(done)
			}
			return struct{}{}, nil
		})
		send := agency.MustNewAgent(randomName("bench-sender"))
		addBenchAgents(b, sp, recv, send)
		to := recv.ID()

		b.ReportAllocs()
		b.ResetTimer()
		cpu := cpuPerOp(b)
		inParallel(b, oneWayInFlight, func(int) error {
			_, err := send.Send(ctx, to, "tick", args)
			return err
		})
		waitHandled(b, done, &handled)
		b.StopTimer()
		cpu()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkRawAMQPOneWay is BenchmarkAMQPSendOneWay's work with the bare
// client: one goroutine encodes and publishes b.N tick messages, keeping
// oneWayInFlight unconfirmed, while a listener reads the confirmations; a
// consumer decodes each delivery and acknowledges in batches.
func BenchmarkRawAMQPOneWay(b *testing.B) {
	bySize(b, func(b *testing.B, args benchTick) {
		r := newRawBroker(b)
		queue := r.queue(b, randomName("bench-raw-receiver"))
		var consumed atomic.Int64
		done := make(chan struct{})
		r.consume(b, queue, func(d *amqp.Delivery) {
			var m bareTick
			if err := json.Unmarshal(d.Body, &m); err != nil || m.Action.Tick.N != 1 {
				b.Errorf("tick: %+v, %v", m.Action.Tick.N, err)
			}
			if consumed.Add(1) == int64(b.N) {
				close(done)
			}
		})
		window := make(chan struct{}, oneWayInFlight)
		var confirmed atomic.Int64
		allConfirmed := make(chan struct{})
		pub := r.newConfirmer(b, func(amqp.Confirmation) {
			<-window
			if confirmed.Add(1) == int64(b.N) {
				close(allConfirmed)
			}
		}, nil)
		from := randomName("bench-raw-sender")

		b.ReportAllocs()
		b.ResetTimer()
		cpu := cpuPerOp(b)
		for range b.N {
			window <- struct{}{}
			var m bareTick
			m.To, m.From = queue, from
			m.Action.Meta = bareMeta{ID: r.ids.next(), NoReply: true}
			m.Action.Tick = args
			body, err := json.Marshal(&m)
			if err == nil {
				err = pub.publish(queue, m.Action.Meta.ID, body)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		waitHandled(b, allConfirmed, &confirmed)
		waitHandled(b, done, &consumed)
		b.StopTimer()
		cpu()
		pub.check(b)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkRawAMQPConfirmedPublish is a reference point: the bare
// publisher of BenchmarkRawAMQPOneWay alone, into a queue nobody consumes,
// until the broker has confirmed every message. It is what the broker
// confirms per second on this machine when it has nothing else to do.
func BenchmarkRawAMQPConfirmedPublish(b *testing.B) {
	bySize(b, func(b *testing.B, args benchTick) {
		r := newRawBroker(b)
		queue := r.queue(b, randomName("bench-raw-sink"))
		window := make(chan struct{}, oneWayInFlight)
		var confirmed atomic.Int64
		allConfirmed := make(chan struct{})
		pub := r.newConfirmer(b, func(amqp.Confirmation) {
			<-window
			if confirmed.Add(1) == int64(b.N) {
				close(allConfirmed)
			}
		}, nil)
		b.ReportAllocs()
		b.ResetTimer()
		cpu := cpuPerOp(b)
		for range b.N {
			window <- struct{}{}
			var m bareTick
			m.To, m.From = queue, "bench-raw-sender"
			m.Action.Meta = bareMeta{ID: r.ids.next(), NoReply: true}
			m.Action.Tick = args
			body, err := json.Marshal(&m)
			if err == nil {
				err = pub.publish(queue, m.Action.Meta.ID, body)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		waitHandled(b, allConfirmed, &confirmed)
		b.StopTimer()
		cpu()
		pub.check(b)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkAMQPRequest measures sequential request round trips through an
// amqpspace.Space, to an echo action of another agent in the same space,
// each with a deadline made for the call, and reports their median and
// 99th percentile.
func BenchmarkAMQPRequest(b *testing.B) {
	caller, to := echoPair(b, 1)
	times := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuPerOp(b)
	for i := range b.N {
		start := time.Now()
		n, err := callEcho(caller, to, i)
		times[i] = time.Since(start)
		if err != nil || n != i {
			b.Fatalf("ping %d: %d, %v", i, n, err)
		}
	}
	b.StopTimer()
	cpu()
	reportLatency(b, times)
}

// BenchmarkRawAMQPRequest is BenchmarkAMQPRequest's work with the bare
// client: the requester publishes a ping with its deadline in __meta__ and
// waits for the response (or a refusal, a return or the deadline); the
// responder, on channels of its own, checks the deadline and publishes the
// response without waiting for its confirmation.
func BenchmarkRawAMQPRequest(b *testing.B) {
	q := rawEchoPair(b, 1)
	times := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuPerOp(b)
	for i := range b.N {
		start := time.Now()
		n, err := q.call(i, benchTimeout)
		times[i] = time.Since(start)
		if err != nil || n != i {
			b.Fatalf("ping %d: %d, %v", i, n, err)
		}
	}
	b.StopTimer()
	cpu()
	q.pub.check(b)
	reportLatency(b, times)
}

// BenchmarkAMQPRequestConcurrent is BenchmarkAMQPRequest with
// concurrentRequesters requests under way at once, from one agent, to an
// echo agent that handles as many at once; it reports requests per second.
func BenchmarkAMQPRequestConcurrent(b *testing.B) {
	caller, to := echoPair(b, concurrentRequesters)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuPerOp(b)
	inParallel(b, concurrentRequesters, func(i int) error {
		n, err := callEcho(caller, to, i)
		if err == nil && n != i {
			b.Errorf("ping %d: %d", i, n)
		}
		return err
	})
	b.StopTimer()
	cpu()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkRawAMQPRequestConcurrent is BenchmarkAMQPRequestConcurrent's
// work with the bare client of BenchmarkRawAMQPRequest, whose responder
// has concurrentRequesters handlers.
func BenchmarkRawAMQPRequestConcurrent(b *testing.B) {
	q := rawEchoPair(b, concurrentRequesters)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuPerOp(b)
	inParallel(b, concurrentRequesters, func(i int) error {
		n, err := q.call(i, benchTimeout)
		if err == nil && n != i {
			b.Errorf("ping %d: %d", i, n)
		}
		return err
	})
	b.StopTimer()
	cpu()
	q.pub.check(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// echoPair adds an echo agent that runs up to handlers actions at once and
// a caller to a new space, and returns the caller and the echo's id.
func echoPair(b *testing.B, handlers int) (*agency.Agent, string) {
	sp := newSpace(b, amqpspace.Config{})
	echo := agency.MustNewAgent(randomName("bench-echo"), agency.Concurrency(handlers))
	agency.Handle(echo, "ping", func(_ context.Context, args benchPing) (int, error) {
		return args.N, nil
	})
	caller := agency.MustNewAgent(randomName("bench-caller"))
	addBenchAgents(b, sp, echo, caller)
	return caller, echo.ID()
}

// callEcho calls the echo's ping with a deadline made for the call.
func callEcho(caller *agency.Agent, to string, n int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	return agency.Call[int](ctx, caller, to, "ping", benchPing{N: n})
}

// rawEchoPair starts a bare responder with handlers handlers and returns a
// bare requester that calls it.
func rawEchoPair(b *testing.B, handlers int) *bareRequester {
	r := newRawBroker(b)
	respQ := r.queue(b, randomName("bench-raw-echo"))
	reqQ := r.queue(b, randomName("bench-raw-caller"))
	resp := r.bareResponder(b, respQ, handlers)
	b.Cleanup(func() { resp.check(b) })
	return r.newBareRequester(b, reqQ, respQ)
}

// inParallel calls f(i) for i from 0 to b.N-1 on n goroutines, and fails
// b at the first error.
func inParallel(b *testing.B, n int, f func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N || b.Failed() {
					return
				}
				if err := f(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

func addBenchAgents(b *testing.B, sp *amqpspace.Space, agents ...*agency.Agent) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	for _, a := range agents {
		if err := sp.Add(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
}

// waitHandled waits until done closes, failing the benchmark if the
// messages stop coming.
func waitHandled(b *testing.B, done <-chan struct{}, count *atomic.Int64) {
	b.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("handled %d of %d", count.Load(), b.N)
	}
}

// reportLatency reports the median and 99th percentile of times.
func reportLatency(b *testing.B, times []time.Duration) {
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e3, "µs-median")
	b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1e3, "µs-p99")
}

// cpuPerOp starts counting the CPU time of the process (this client's,
// not the broker's); the function it returns reports it per operation, as
// cpu-µs/op. On two cores the client's CPU per request is what bounds
// the concurrent benchmarks, so the pairs are compared on it too.
func cpuPerOp(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		if end, ok2 := processCPU(); ok && ok2 {
			b.ReportMetric(float64(end-start)/1e3/float64(b.N), "cpu-µs/op")
		}
	}
}
