package amqpspace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// The stream benchmarks: a caller asks for a stream of parts, the
// responder emits each (waiting for the broker's confirmation, as Emit
// does) and then answers. BenchmarkAMQPStream goes through amqpspace,
// BenchmarkRawAMQPStream does the same work with the bare client of
// bare_test.go publishing the same parts to the caller's queue. Each
// reports the median time from the start of a stream to its first part
// (µs-first) and between one part and the next (µs-part).
//
//	go test -run='^$' -bench='AMQPStream' -benchtime=200x -count=6 ./amqpspace/

// streamParts is the number of parts of each stream of BenchmarkAMQPStream.
const streamParts = 10

// streamer adds an agent whose action "stream" emits N parts, the numbers
// 1 to N, and answers N.
func streamer(b *testing.B, sp *amqpspace.Space) string {
	s := agency.MustNewAgent(randomName("bench-streamer"))
	agency.Handle(s, "stream", func(ctx context.Context, args benchPing) (int, error) {
		for i := 1; i <= args.N; i++ {
			if err := agency.Emit(ctx, i); err != nil {
				return 0, err
			}
		}
		return args.N, nil
	})
	addBenchAgents(b, sp, s)
	return s.ID()
}

func BenchmarkAMQPStream(b *testing.B) {
	sp := newSpace(b, amqpspace.Config{})
	to := streamer(b, sp)
	caller := agency.MustNewAgent(randomName("bench-reader"))
	addBenchAgents(b, sp, caller)
	first := make([]time.Duration, 0, b.N)
	gaps := make([]time.Duration, 0, b.N*(streamParts-1))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
		start := time.Now()
		last, parts := start, 0
		for m, err := range caller.Stream(ctx, to, "stream", benchPing{N: streamParts}) {
			if err != nil {
				b.Fatal(err)
			}
			if m.Action != agency.PartAction {
				break
			}
			now := time.Now()
			if parts++; parts == 1 {
				first = append(first, now.Sub(start))
			} else {
				gaps = append(gaps, now.Sub(last))
			}
			last = now
		}
		cancel()
		if parts != streamParts {
			b.Fatalf("%d parts, want %d", parts, streamParts)
		}
	}
	b.StopTimer()
	reportStream(b, first, gaps)
}

// reportStream reports the median time to the first part and between
// parts.
func reportStream(b *testing.B, first, gaps []time.Duration) {
	b.ReportMetric(median(first), "µs-first")
	b.ReportMetric(median(gaps), "µs-part")
}

func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	for i := 1; i < len(s); i++ { // insertion sort: no import for a few thousand
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return float64(s[len(s)/2].Nanoseconds()) / 1e3
}

// barePart is a part, or the answer, of a stream as amqpspace puts it on
// the wire.
type barePart struct {
	To     string `json:"to"`
	From   string `json:"from"`
	Action struct {
		Meta struct {
			ID       string `json:"id"`
			ParentID string `json:"parent_id"`
			Seq      int    `json:"seq"`
		} `json:"__meta__"`
		Part     *struct{ Value int } `json:"[part],omitempty"`
		Response *struct{ Value int } `json:"[response],omitempty"`
	} `json:"action"`
}

// bareStreamRequest is a stream's request as amqpspace puts it on the
// wire.
type bareStreamRequest struct {
	To     string `json:"to"`
	From   string `json:"from"`
	Action struct {
		Meta struct {
			ID       string `json:"id"`
			Deadline string `json:"deadline"`
			Stream   bool   `json:"stream"`
		} `json:"__meta__"`
		Stream benchPing `json:"stream"`
	} `json:"action"`
}

// BenchmarkRawAMQPStream is BenchmarkAMQPStream's work with the bare
// client: the responder publishes each part mandatory and waits for its
// confirmation before the next, as Emit does, then the answer; the caller
// reads its queue and matches parts to its stream by parent id, and
// times each part where it has it (after the hand-over from its consumer
// goroutine, as Stream's caller has it after the space's).
func BenchmarkRawAMQPStream(b *testing.B) {
	r := newRawBroker(b)
	respQ := r.queue(b, randomName("bench-raw-streamer"))
	reqQ := r.queue(b, randomName("bench-raw-reader"))
	// The responder.
	pub := r.newConfirmer(b, nil, nil)
	work := make(chan []byte, 1)
	stop := r.consume(b, respQ, func(d *amqp.Delivery) { work <- d.Body })
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for body := range work {
			var req bareStreamRequest
			if err := json.Unmarshal(body, &req); err != nil || !req.Action.Meta.Stream {
				b.Errorf("request %s: %v", body, err)
				continue
			}
			for i := 1; i <= req.Action.Stream.N+1; i++ {
				var p barePart
				p.To, p.From = req.From, req.To
				p.Action.Meta.ID, p.Action.Meta.ParentID = r.ids.next(), req.Action.Meta.ID
				if i <= req.Action.Stream.N {
					p.Action.Meta.Seq = i
					p.Action.Part = &struct{ Value int }{i}
				} else {
					p.Action.Meta.Seq = req.Action.Stream.N
					p.Action.Response = &struct{ Value int }{req.Action.Stream.N}
				}
				out, err := json.Marshal(&p)
				if err != nil {
					b.Error(err)
					break
				}
				dc, err := pub.ch.PublishWithDeferredConfirm(pub.exchange, p.To, true, false, amqp.Publishing{
					ContentType: "text/plain", ContentEncoding: "utf-8", MessageId: p.Action.Meta.ID, Body: out,
				})
				if err == nil && !dc.Wait() {
					err = fmt.Errorf("part %d refused", i)
				}
				if err != nil {
					b.Error(err)
					break
				}
			}
		}
	}()
	b.Cleanup(func() {
		stop()
		close(work)
	})
	// The caller.
	type got struct {
		parent string
		part   bool
	}
	arrivals := make(chan got, 2*streamParts)
	r.consume(b, reqQ, func(d *amqp.Delivery) {
		var p barePart
		if err := json.Unmarshal(d.Body, &p); err != nil {
			b.Error(err)
			return
		}
		arrivals <- got{parent: p.Action.Meta.ParentID, part: p.Action.Part != nil}
	})
	reqPub := r.newConfirmer(b, nil, nil)
	first := make([]time.Duration, 0, b.N)
	gaps := make([]time.Duration, 0, b.N*(streamParts-1))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var req bareStreamRequest
		req.To, req.From = respQ, reqQ
		req.Action.Meta.ID = r.ids.next()
		req.Action.Meta.Deadline = start.Add(benchTimeout).UTC().Format(time.RFC3339Nano)
		req.Action.Meta.Stream = true
		req.Action.Stream.N = streamParts
		body, err := json.Marshal(&req)
		if err != nil {
			b.Fatal(err)
		}
		if err := reqPub.publish(respQ, req.Action.Meta.ID, body); err != nil {
			b.Fatal(err)
		}
		last, parts := start, 0
		for done := false; !done; {
			select {
			case g := <-arrivals:
				if g.parent != req.Action.Meta.ID {
					b.Fatalf("an arrival for %s during %s", g.parent, req.Action.Meta.ID)
				}
				if !g.part {
					done = true
					break
				}
				// Timed where the caller has it, as BenchmarkAMQPStream is.
				now := time.Now()
				if parts++; parts == 1 {
					first = append(first, now.Sub(start))
				} else {
					gaps = append(gaps, now.Sub(last))
				}
				last = now
			case <-time.After(benchTimeout):
				b.Fatal("the stream stalled")
			}
		}
		if parts != streamParts {
			b.Fatalf("%d parts, want %d", parts, streamParts)
		}
	}
	b.StopTimer()
	reqPub.check(b)
	pub.check(b)
	reportStream(b, first, gaps)
}

// BenchmarkAMQPStream1000 measures a stream of 1,000 parts through
// amqpspace: parts per second, end to end.
func BenchmarkAMQPStream1000(b *testing.B) {
	sp := newSpace(b, amqpspace.Config{})
	to := streamer(b, sp)
	caller := agency.MustNewAgent(randomName("bench-reader"))
	addBenchAgents(b, sp, caller)
	benchStream1000(b, caller, to)
}

// benchStream1000 reads b.N streams of 1,000 parts from to's stream action
// and reports parts per second.
func benchStream1000(b *testing.B, caller *agency.Agent, to string) {
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		parts := 0
		for m, err := range caller.Stream(ctx, to, "stream", benchPing{N: 1000}) {
			if err != nil {
				b.Fatal(err)
			}
			if m.Action == agency.PartAction {
				parts++
			}
		}
		cancel()
		if parts != 1000 {
			b.Fatalf("%d parts", parts)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "parts/s")
}
