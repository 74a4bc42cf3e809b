package amqpspace_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

// manyAgents is the number of agents one process holds in the scale tests:
// ten consuming connections of 1,000, on 100 channels.
const manyAgents = 10_000

// addEchoes adds n echo agents named prefix-00000 … to sp, with par Adds
// at once, and returns their ids. Most of an Add's time is the broker's
// (declaring two queues, binding them, consuming them): it serves Adds on
// different channels at once, so a program with many agents adds them from
// several goroutines.
func addEchoes(t testing.TB, sp *amqpspace.Space, prefix string, n, par int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	work := make(chan string)
	errs := make(chan error, par)
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				a := agency.MustNewAgent(id)
				agency.Handle(a, "echo", func(_ context.Context, args echoArgs) (string, error) {
					return args.Text, nil
				})
				if err := sp.Add(ctx, a); err != nil {
					errs <- fmt.Errorf("Add(%s): %w", id, err)
					cancel()
					return
				}
			}
		}()
	}
	for _, id := range ids {
		select {
		case work <- id:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return ids
}

// newBigSpace is newSpace for a space with thousands of agents: closing it
// removes each, which takes the broker a while.
func newBigSpace(t testing.TB, cfg amqpspace.Config) *amqpspace.Space {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = brokerURL(t)
	}
	if cfg.Exchange == "" {
		cfg.Exchange = testExchange(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sp, err := amqpspace.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := sp.Close(ctx); err != nil {
			t.Errorf("closing the space: %v", err)
		}
	})
	return sp
}

// askAll has caller request every agent in ids, 32 at a time, and returns
// the first error and how many failed.
func askAll(caller *agency.Agent, ids []string) (int, error) {
	var mu sync.Mutex
	var first error
	failed := 0
	work := make(chan string)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				got, err := agency.Call[string](ctx, caller, id, "echo", echoArgs{Text: id})
				cancel()
				if err == nil && got != id {
					err = fmt.Errorf("%s answered %q", id, got)
				}
				if err != nil {
					mu.Lock()
					failed++
					if first == nil {
						first = fmt.Errorf("%s: %w", id, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	return failed, first
}

// One process holds 10,000 agents on one space, and each answers. Under
// the race detector, whose bookkeeping for 40,000 goroutines takes
// gigabytes, it holds 2,500: still more than one connection carries. (CI
// runs this test once more without the race detector.)
func TestTenThousandAgents(t *testing.T) {
	testenv.Long(t) // adds 10,000 agents
	n := manyAgents
	if testenv.RaceEnabled() {
		n = 2500
	}
	sp := newBigSpace(t, amqpspace.Config{})
	start := time.Now()
	ids := addEchoes(t, sp, randomName("Many"), n, 16)
	t.Logf("added %d agents in %v", n, time.Since(start).Round(time.Millisecond))
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, sp, caller)
	start = time.Now()
	if failed, err := askAll(caller, ids); err != nil {
		t.Fatalf("%d of %d agents did not answer; the first: %v", failed, len(ids), err)
	}
	t.Logf("every agent answered, in %v", time.Since(start).Round(time.Millisecond))
}

// While a space with thousands of agents subscribes them again after a
// lost connection, Add and Send do not wait for it: an agent added during
// the re-subscription is in before it ends, and answers.
func TestAddWhileResubscribing(t *testing.T) {
	testenv.Long(t) // adds 3,000 agents and cuts their connection
	const n = 3000
	proxy := newProxy(t, nil)
	logs := newLogRecorder()
	ex := testExchange(t)
	sp := newBigSpace(t, amqpspace.Config{URL: "amqp://guest:guest@" + proxy.addr + "/", Exchange: ex, Logger: slog.New(logs)})
	addEchoes(t, sp, randomName("Many"), n, 16)
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, newSpace(t, amqpspace.Config{Exchange: ex}), caller)

	proxy.cut()
	logs.expect(t, "lost the broker")
	late := newEcho()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := sp.Add(ctx, late)
		if err == nil {
			break
		}
		if !errors.Is(err, amqpspace.ErrDisconnected) {
			t.Fatalf("Add during the reconnect: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the new connection is not up yet
	}
	// The space logs "reconnected" once every agent is subscribed again.
	var seen []string
	for {
		select {
		case m := <-logs.msgs:
			seen = append(seen, m)
			continue
		default:
		}
		break
	}
	for _, m := range seen {
		if strings.Contains(m, "reconnected") {
			t.Fatalf("Add returned only after the re-subscription of %d agents had ended (%q)", n, seen)
		}
	}
	if got, err := agency.Call[string](ctx, caller, late.ID(), "echo", echoArgs{Text: "in"}); err != nil || got != "in" {
		t.Errorf("the agent added during the re-subscription: %q, %v", got, err)
	}
	// Re-subscribing thousands of agents takes the broker seconds, and
	// more on a loaded machine with the race detector.
	logs.expectWithin(t, "reconnected", 2*time.Minute)
}

// BenchmarkAMQPAddAgents measures adding 10,000 agents to one space, one
// Add at a time and 16 at once, and reports the time per agent and for all
// of them. Run it once per round:
//
//	go test -run='^$' -bench='AMQPAddAgents|AMQPRecovery' -benchtime=1x ./amqpspace/
func BenchmarkAMQPAddAgents(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("at-once=%d", par), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				sp, err := amqpspace.New(ctx, amqpspace.Config{URL: brokerURL(b), Exchange: testExchange(b)})
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				addEchoes(b, sp, randomName("Bench"), manyAgents, par)
				total += time.Since(start)
				ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
				if err := sp.Close(ctx); err != nil {
					b.Errorf("closing: %v", err)
				}
				cancel()
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(total.Seconds()/float64(b.N), "s/10k-agents")
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N*manyAgents), "ms/agent")
		})
	}
}

// BenchmarkAMQPRecovery measures a space with 10,000 agents losing its
// connections (cut at a proxy in front of the broker): the time until every
// agent is subscribed again and answers, and how long an Add and a Send
// made meanwhile, every 50 ms, took to return (one that fails at once with
// ErrDisconnected, before a connection is up again, counts too): the
// median and the longest.
func BenchmarkAMQPRecovery(b *testing.B) {
	proxy := newProxy(b, nil)
	logs := newLogRecorder()
	ex := testExchange(b)
	sp := newBigSpace(b, amqpspace.Config{URL: "amqp://guest:guest@" + proxy.addr + "/", Exchange: ex, Logger: slog.New(logs)})
	ids := addEchoes(b, sp, randomName("Bench"), manyAgents, 16)
	sender := agency.MustNewAgent(randomName("Sender"))
	addAll(b, sp, sender)
	caller := agency.MustNewAgent(randomName("Caller"))
	target := newEcho()
	addAll(b, newSpace(b, amqpspace.Config{Exchange: ex}), caller, target)

	// The same broker calls as an Add, made by a bare client on a
	// connection of its own straight to the broker, at the same moments:
	// what the broker makes anyone wait meanwhile.
	bare, err := amqp.Dial(brokerURL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()

	var recovery time.Duration
	var adds, sends, bares []time.Duration
	bareSteps := make([]time.Duration, len(bareAddSteps))
	// The waits over half a second, and when they began.
	type wait struct {
		at time.Time
		d  time.Duration
	}
	var longAdds, longBares []wait
	b.ResetTimer()
	for i := range b.N {
		for len(logs.msgs) > 0 {
			<-logs.msgs
		}
		stop := make(chan struct{})
		probed := make(chan struct{})
		go func() { // Add and Send while the space recovers
			defer close(probed)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				start := time.Now()
				_ = sp.Add(ctx, agency.MustNewAgent(fmt.Sprintf("%s-late-%d-%d", ids[0], i, n)))
				adds = append(adds, time.Since(start))
				if d := time.Since(start); d > 500*time.Millisecond {
					longAdds = append(longAdds, wait{start, d})
				}
				start = time.Now()
				_, _ = sender.Send(ctx, target.ID(), "echo", echoArgs{Text: "during"})
				sends = append(sends, time.Since(start))
				cancel()
			}
		}()
		bareDone := make(chan struct{})
		go func() {
			defer close(bareDone)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				at := time.Now()
				times, err := bareAdd(bare, ex, fmt.Sprintf("%s-bare-%d-%d", ids[0], i, n))
				if err != nil {
					b.Errorf("bare client: %v", err)
					return
				}
				bares = append(bares, time.Since(at))
				if d := time.Since(at); d > 500*time.Millisecond {
					longBares = append(longBares, wait{at, d})
				}
				for j, d := range times {
					bareSteps[j] = max(bareSteps[j], d)
				}
			}
		}()
		cut := time.Now()
		proxy.cut()
		logs.expectWithin(b, "reconnected", 5*time.Minute)
		if failed, err := askAll(caller, ids); err != nil {
			b.Fatalf("after the reconnect %d agents did not answer; the first: %v", failed, err)
		}
		recovery += time.Since(cut)
		close(stop)
		<-probed
		<-bareDone
		show := func(ws []wait) string {
			var out []string
			for _, w := range ws {
				out = append(out, fmt.Sprintf("%.1fs: %v", w.at.Sub(cut).Seconds(), w.d.Round(time.Millisecond)))
			}
			return strings.Join(out, ", ")
		}
		b.Logf("round %d, the longest Adds (over 0.5 s; seconds after the cut: how long): %s", i, show(longAdds))
		b.Logf("round %d, the longest waits of the bare client: %s", i, show(longBares))
		longAdds, longBares = nil, nil
	}
	b.StopTimer()
	slices.Sort(adds)
	slices.Sort(sends)
	slices.Sort(bares)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(recovery.Seconds()/float64(b.N), "s-to-all-answering")
	b.ReportMetric(float64(adds[len(adds)/2].Milliseconds()), "median-Add-ms")
	b.ReportMetric(float64(adds[len(adds)-1].Milliseconds()), "max-Add-ms")
	b.ReportMetric(float64(sends[len(sends)/2].Milliseconds()), "median-Send-ms")
	b.ReportMetric(float64(sends[len(sends)-1].Milliseconds()), "max-Send-ms")
	b.ReportMetric(float64(bares[len(bares)/2].Milliseconds()), "median-bare-ms")
	b.ReportMetric(float64(bares[len(bares)-1].Milliseconds()), "max-bare-ms")
	b.Logf("the bare client's longest wait for each call: %v", bareSteps)
}

// bareAddSteps names the broker calls of an Add, as bareAdd makes them.
var bareAddSteps = []string{"channel", "qos", "declare", "consume", "declare", "consume", "bind", "bind"}

// bareAdd does with a bare amqp091-go client on conn what Add asks of the
// broker for an agent named id (a channel, its prefetch, two queues
// declared, consumed and bound), times each call, and deletes the queues.
func bareAdd(conn *amqp.Connection, exchange, id string) ([]time.Duration, error) {
	times := make([]time.Duration, 0, len(bareAddSteps))
	start := time.Now()
	step := func(err error) error {
		times = append(times, time.Since(start))
		start = time.Now()
		return err
	}
	ch, err := conn.Channel()
	if err := step(err); err != nil {
		return times, err
	}
	defer ch.Close()
	if err := step(ch.Qos(amqpspace.DefaultPrefetch, 0, false)); err != nil {
		return times, err
	}
	args := amqp.Table{"x-expires": amqpspace.DefaultQueueExpiry.Milliseconds()}
	qs := []string{id, id + "-broadcast"}
	defer func() {
		for _, q := range qs {
			_, _ = ch.QueueDelete(q, false, false, false)
		}
	}()
	for _, q := range qs {
		_, err := ch.QueueDeclare(q, true, false, false, false, args)
		if err := step(err); err != nil {
			return times, err
		}
		_, err = ch.Consume(q, q, false, true, false, false, nil)
		if err := step(err); err != nil {
			return times, err
		}
	}
	for i, key := range []string{id, "__broadcast__"} {
		if err := step(ch.QueueBind(qs[i], key, exchange, false, nil)); err != nil {
			return times, err
		}
	}
	return times, nil
}
