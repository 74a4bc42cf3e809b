//go:build faults

// The fault tests close the space's connections from the broker's side and
// stop the broker application. They disturb every client of the broker, so
// they are behind the faults build tag and run in a step of their own:
//
//	go test -race -count=1 -tags faults -p 1 ./amqpspace/...
//
// They need rabbitmqctl, allowed to control the local node.

package amqpspace_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
)

// recovery is how soon after a fault ends requests must succeed again.
const recovery = 10 * time.Second

func rabbitmqctl(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and no rabbitmqctl on PATH: the fault tests need it to control the broker")
		}
		t.Skip("no rabbitmqctl on PATH: the fault tests control the local broker with it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// closeConnections has the broker close every connection of the spaces on
// exchange, and returns how many it closed.
func closeConnections(t *testing.T, exchange string) int {
	t.Helper()
	pids := connectionsOf(t, exchange)
	closeConnectionPids(t, pids)
	return len(pids)
}

// connectionsOf returns the broker's ids of the connections of the spaces
// on exchange.
func connectionsOf(t *testing.T, exchange string) []string {
	t.Helper()
	out := rabbitmqctl(t, "-q", "--no-table-headers", "list_connections", "pid", "client_properties")
	var pids []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "exchange="+exchange+" ") {
			continue
		}
		pid, _, _ := strings.Cut(line, "\t")
		pids = append(pids, pid)
	}
	return pids
}

// closeConnectionPids closes the connections with the broker's ids pids.
func closeConnectionPids(t *testing.T, pids []string) {
	t.Helper()
	for _, pid := range pids {
		rabbitmqctl(t, "close_connection", pid, "agency-go fault test")
	}
}

// worker is a space with an echo agent and a caller, for the fault tests.
type worker struct {
	sp           *amqpspace.Space
	echo, caller *agency.Agent
	exchange     string
	logs         *logRecorder
}

func newWorker(t *testing.T) *worker {
	t.Helper()
	w := &worker{exchange: testExchange(t), logs: newLogRecorder()}
	w.sp = newSpace(t, amqpspace.Config{Exchange: w.exchange, Logger: slog.New(w.logs)})
	w.echo, w.caller = newEcho(), agency.MustNewAgent(randomName("Caller"))
	addAll(t, w.sp, w.echo, w.caller)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := w.call(ctx, "before"); err != nil {
		t.Fatalf("request before the fault: %v", err)
	}
	return w
}

func (w *worker) call(ctx context.Context, text string) error {
	got, err := agency.Call[string](ctx, w.caller, w.echo.ID(), "echo", map[string]string{"text": text})
	if err == nil && got != text {
		err = fmt.Errorf("echo answered %q to %q", got, text)
	}
	return err
}

// recovered waits until a request succeeds, trying every 100 ms; it
// fails the test if that takes longer than recovery after since.
func (w *worker) recovered(t *testing.T, since time.Time) {
	t.Helper()
	var last error
	for time.Since(since) < recovery {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		last = w.call(ctx, "after")
		cancel()
		if last == nil {
			t.Logf("requests succeed again %v after the fault ended", time.Since(since).Round(time.Millisecond))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("requests still fail %v after the fault ended: %v", recovery, last)
}

// stillExclusive shows that the re-declared consumers still hold the ids:
// another space cannot add them.
func (w *worker) stillExclusive(t *testing.T) {
	t.Helper()
	other := newSpace(t, amqpspace.Config{Exchange: w.exchange})
	twin, err := agency.NewAgent(w.echo.ID())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := other.Add(ctx, twin); !errors.Is(err, space.ErrAgentExists) {
		t.Errorf("adding the echo agent's id in another space after recovery: %v, want ErrAgentExists", err)
	}
}

// The broker closes the space's connections: the space reconnects,
// re-declares its queues and consumers, and requests succeed again.
func TestFaultConnectionClosed(t *testing.T) {
	w := newWorker(t)
	if n := closeConnections(t, w.exchange); n != 2 {
		t.Fatalf("closed %d connections of the space, want 2 (publish and consume)", n)
	}
	closed := time.Now()
	w.logs.expect(t, "lost the broker")
	w.recovered(t, closed)
	w.logs.expect(t, "reconnected")
	w.stillExclusive(t)
}

// The broker application stops and starts again. During the outage,
// messaging fails at once with ErrDisconnected instead of waiting out its
// context; afterwards the space recovers by itself.
func TestFaultBrokerRestart(t *testing.T) {
	w := newWorker(t)
	var once sync.Once
	start := func() { once.Do(func() { rabbitmqctl(t, "start_app") }) }
	t.Cleanup(start) // whatever happens, the broker comes back

	rabbitmqctl(t, "stop_app")
	w.logs.expect(t, "lost the broker")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := w.caller.Send(ctx, w.echo.ID(), "echo", map[string]string{"text": "lost"})
	if !errors.Is(err, amqpspace.ErrDisconnected) || ctx.Err() != nil {
		t.Errorf("Send during the outage: %v (context: %v), want ErrDisconnected before the context ends", err, ctx.Err())
	}
	err = w.call(ctx, "lost")
	if !errors.Is(err, amqpspace.ErrDisconnected) || ctx.Err() != nil {
		t.Errorf("Request during the outage: %v (context: %v), want ErrDisconnected before the context ends", err, ctx.Err())
	}
	late, _ := agency.NewAgent(randomName("Late"))
	if err := w.sp.Add(ctx, late); !errors.Is(err, amqpspace.ErrDisconnected) || ctx.Err() != nil {
		t.Errorf("Add during the outage: %v, want ErrDisconnected before the context ends", err)
	}

	start()
	w.recovered(t, time.Now())
	w.stillExclusive(t)
	ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := w.sp.Add(ctx, late); err != nil {
		t.Errorf("Add after the outage: %v", err)
	}
}

// Messages keep flowing while the broker closes the connections of the
// sender's and the receiver's spaces, again and again. Every Send that
// returned no error is handled, and no message is handled twice: a
// message whose acknowledgement was lost is redelivered by the broker and
// recognised.
func TestFaultNothingLost(t *testing.T) {
	ex := testExchange(t)
	senders := newSpace(t, amqpspace.Config{Exchange: ex})
	receivers := newSpace(t, amqpspace.Config{Exchange: ex, Prefetch: 16})
	var mu sync.Mutex
	handled := map[int]int{}
	rcv, _ := agency.NewAgent(randomName("Receiver"))
	agency.Handle(rcv, "take", func(_ context.Context, a struct {
		N int `json:"n"`
	}) (bool, error) {
		mu.Lock()
		handled[a.N]++
		mu.Unlock()
		time.Sleep(50 * time.Microsecond) // a queue builds up, unacknowledged
		return true, nil
	})
	snd, _ := agency.NewAgent(randomName("Sender"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := receivers.Add(ctx, rcv); err != nil {
		t.Fatal(err)
	}
	if err := senders.Add(ctx, snd); err != nil {
		t.Fatal(err)
	}

	const total = 3000
	sent := map[int]bool{}   // n → Send returned nil
	retried := map[int]int{} // n → how many Sends of it failed
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := range total {
			for {
				_, err := snd.Send(ctx, rcv.ID(), "take", map[string]int{"n": n})
				if err == nil {
					sent[n] = true
					break
				}
				// "May or may not have been delivered": the retry is a new
				// message, and both may arrive.
				retried[n]++
				if ctx.Err() != nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // reconnecting; the next try may go through
			}
		}
	}()
	for i := range 3 {
		time.Sleep(300 * time.Millisecond)
		closeConnections(t, ex)
		t.Logf("fault %d: closed the connections", i+1)
	}
	<-done
	if len(sent) != total {
		t.Fatalf("only %d of %d sends went through", len(sent), total)
	}
	// The last message marks the end: everything before it has arrived once
	// it has.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		_, last := handled[total-1]
		mu.Unlock()
		if last || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var missing, twice []int
	for n := range total {
		switch h := handled[n]; {
		case h == 0:
			missing = append(missing, n)
		case h > 1+retried[n]:
			twice = append(twice, n)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d confirmed messages never handled: %v", len(missing), head(missing))
	}
	if len(twice) > 0 {
		t.Errorf("%d messages handled more than once: %v", len(twice), head(twice))
	}
}

func head(ns []int) []int { return ns[:min(len(ns), 20)] }

// A message the broker refuses (a queue at its length limit, set by a
// policy, with overflow reject-publish) is ErrRejected for its sender, not
// a silent loss.
func TestFaultRejected(t *testing.T) {
	sp := newSpace(t, amqpspace.Config{})
	full := agency.MustNewAgent(randomName("Full"))
	agency.Handle(full, "take", func(context.Context, struct{}) (bool, error) { return true, nil })
	sender := agency.MustNewAgent(randomName("Sender"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, a := range []*agency.Agent{full, sender} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	policy := randomName("agency-test-full")
	rabbitmqctl(t, "set_policy", "--apply-to", "queues", policy, "^"+full.ID()+"$", `{"max-length":0,"overflow":"reject-publish"}`)
	t.Cleanup(func() { rabbitmqctl(t, "clear_policy", policy) })

	// The broker applies a policy to its queues a moment after storing it.
	var err error
	for err == nil && ctx.Err() == nil {
		_, err = sender.Send(ctx, full.ID(), "take", nil)
	}
	if !errors.Is(err, amqpspace.ErrRejected) {
		t.Errorf("Send to a full queue: %v, want ErrRejected", err)
	}
	if _, err := sender.Request(ctx, full.ID(), "take", nil); !errors.Is(err, amqpspace.ErrRejected) {
		t.Errorf("Request to a full queue: %v, want ErrRejected", err)
	}
}

// While a space is away, another takes one of its agents' ids: when the
// first comes back it cannot consume that agent's queues, and removes the
// agent, with an error in its log, rather than keep an agent that hears
// nothing.
func TestFaultIDTakenMeanwhile(t *testing.T) {
	w := newWorker(t)
	// Only the first space's connections are cut: the second's stay up,
	// so that an Add of the twin is never caught by an outage of its own.
	cut := connectionsOf(t, w.exchange)
	other := newSpace(t, amqpspace.Config{Exchange: w.exchange})
	twin := agency.MustNewAgent(w.echo.ID())
	agency.Handle(twin, "echo", func(context.Context, echoArgs) (string, error) {
		return "from the twin", nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The twin tries from before the fault on, so that it gets in during
	// the moment the first space is away.
	taken := make(chan error, 1)
	go func() {
		for {
			err := other.Add(ctx, twin)
			if !errors.Is(err, space.ErrAgentExists) || ctx.Err() != nil {
				taken <- err
				return
			}
		}
	}()
	closeConnectionPids(t, cut)
	if err := <-taken; err != nil {
		t.Fatalf("the twin could not take the id: %v", err)
	}
	w.logs.expect(t, "cannot rejoin after reconnecting")
	w.logs.expect(t, "removed an agent whose id another process holds now")
	if err := w.sp.Remove(ctx, w.echo.ID()); !errors.Is(err, space.ErrUnknownAgent) {
		t.Fatalf("Remove of the evicted agent: %v, want ErrUnknownAgent", err)
	}
	got, err := agency.Call[string](ctx, w.caller, w.echo.ID(), "echo", map[string]string{"text": "who"})
	if err != nil || got != "from the twin" {
		t.Errorf("echo after the eviction: %q, %v; want the twin's answer", got, err)
	}
}

// With Config.Durable the messages a space publishes survive a restart of
// the broker while they wait in a queue; without it they are lost with it.
// A message's persistence is the sender's setting, its queue's type (a
// quorum queue with Durable, a transient classic queue without) the
// receiver's: the durable sender's receiver is in a Durable space too.
// Each receiver is busy and takes one message at a time (Prefetch 1), so
// that what is sent to it waits in the broker when the broker goes down.
func TestFaultDurableSurvivesRestart(t *testing.T) {
	const n = 20
	ex := testExchange(t)
	receivers := newSpace(t, amqpspace.Config{Exchange: ex, Prefetch: 1})
	durableReceivers := newSpace(t, amqpspace.Config{Exchange: ex, Prefetch: 1, Durable: true})
	durable := newSpace(t, amqpspace.Config{Exchange: ex, Durable: true})
	transient := newSpace(t, amqpspace.Config{Exchange: ex})

	type receiver struct {
		agent   *agency.Agent
		started chan struct{}
		mu      sync.Mutex
		got     map[int]int
		marker  chan struct{}
		marked  sync.Once
	}
	release := make(chan struct{})
	newReceiver := func(name string) *receiver {
		r := &receiver{agent: agency.MustNewAgent(randomName(name)), started: make(chan struct{}, 1), got: map[int]int{}, marker: make(chan struct{})}
		agency.Handle(r.agent, "hold", func(context.Context, struct{}) (bool, error) {
			r.started <- struct{}{}
			<-release
			return true, nil
		})
		agency.Handle(r.agent, "take", func(_ context.Context, a struct {
			N int `json:"n"`
		}) (bool, error) {
			if a.N < 0 {
				r.marked.Do(func() { close(r.marker) })
				return true, nil
			}
			r.mu.Lock()
			r.got[a.N]++
			r.mu.Unlock()
			return true, nil
		})
		return r
	}
	keep, lose := newReceiver("Keep"), newReceiver("Lose")
	addAll(t, durableReceivers, keep.agent)
	addAll(t, receivers, lose.agent)
	fromDurable, fromTransient := agency.MustNewAgent(randomName("Durable")), agency.MustNewAgent(randomName("Transient"))
	addAll(t, durable, fromDurable)
	addAll(t, transient, fromTransient)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	send := func(from *agency.Agent, to *receiver, action string, args any) {
		t.Helper()
		if _, err := from.Send(ctx, to.agent.ID(), action, args); err != nil {
			t.Fatalf("%s → %s %s: %v", from.ID(), to.agent.ID(), action, err)
		}
	}
	for _, c := range []struct {
		from *agency.Agent
		to   *receiver
	}{{fromDurable, keep}, {fromTransient, lose}} {
		send(c.from, c.to, "hold", nil)
		<-c.to.started
		for i := range n {
			send(c.from, c.to, "take", map[string]int{"n": i})
		}
	}

	var once sync.Once
	start := func() { once.Do(func() { rabbitmqctl(t, "start_app") }) }
	t.Cleanup(start)
	rabbitmqctl(t, "stop_app")
	start()
	close(release)

	// Once the senders are back, a marker behind what was sent before. It
	// is sent again until it arrives: a receiver without Durable has a
	// transient queue, which the restart removed, and a marker sent before
	// the receiver declared it again reached no one.
	for _, c := range []struct {
		from *agency.Agent
		to   *receiver
	}{{fromDurable, keep}, {fromTransient, lose}} {
	marking:
		for {
			_, err := c.from.Send(ctx, c.to.agent.ID(), "take", map[string]int{"n": -1})
			if err != nil && ctx.Err() != nil {
				t.Fatalf("no Send got through after the restart: %v", err)
			}
			wait := 100 * time.Millisecond // reconnecting
			if err == nil {
				wait = time.Second
			}
			select {
			case <-c.to.marker:
				break marking
			case <-time.After(wait):
			case <-ctx.Done():
				t.Fatalf("the marker to %s never arrived", c.to.agent.ID())
			}
		}
	}
	keep.mu.Lock()
	defer keep.mu.Unlock()
	for i := range n {
		if keep.got[i] != 1 {
			t.Errorf("durable message %d was handled %d times after the broker's restart, want once", i, keep.got[i])
		}
	}
	lose.mu.Lock()
	defer lose.mu.Unlock()
	t.Logf("of %d transient messages, %d were handled after the broker's restart", n, len(lose.got))
	if len(lose.got) == n {
		t.Errorf("every transient message survived the broker's restart: the test did not restart it with messages queued")
	}
}
