package amqpspace_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
)

// A refused Add leaves no trace: while another process tries, again and
// again, to add an id that this one serves, the live agent's messages, both
// ways, all get through.
func TestRefusedAddDropsNothing(t *testing.T) {
	ex := testExchange(t)
	holder := newSpace(t, amqpspace.Config{Exchange: ex})
	otherLogs := newLogRecorder()
	other := newSpace(t, amqpspace.Config{Exchange: ex, Logger: slog.New(otherLogs)})
	var liveCalls, otherCalls counter
	live := newAdder("Live", &liveCalls)
	there := newAdder("There", &otherCalls)
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, holder, live)
	addAll(t, other, there, caller)

	const rounds = 300
	stop := make(chan struct{})
	refused := make(chan error, 1)
	go func() {
		twin := agency.MustNewAgent(live.ID())
		for {
			select {
			case <-stop:
				refused <- nil
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			err := other.Add(ctx, twin)
			cancel()
			if !errors.Is(err, space.ErrAgentExists) {
				refused <- fmt.Errorf("Add of the live id in the other process: %v, want ErrAgentExists", err)
				return
			}
		}
	}()
	// Requests from the live agent to the other process, and from the
	// other process to it: its requests, and its answers, arrive there.
	var failed atomic.Int32
	var wg sync.WaitGroup
	stream := func(from *agency.Agent, to string) {
		defer wg.Done()
		for i := range rounds {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			sum, err := agency.Call[int](ctx, from, to, "add", addArgs{A: i, B: 1})
			cancel()
			if err != nil || sum != i+1 {
				if failed.Add(1) > 3 {
					return // enough said; each costs its timeout
				}
				t.Errorf("%s → %s, request %d: %d, %v", from.ID(), to, i, sum, err)
			}
		}
	}
	wg.Add(2)
	go stream(live, there.ID())
	go stream(caller, live.ID())
	wg.Wait()
	close(stop)
	if err := <-refused; err != nil {
		t.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("requests around the refused Adds failed (%d at least)", n)
	}
	for {
		select {
		case m := <-otherLogs.msgs:
			if strings.Contains(m, "claims to come from an agent of this one") {
				t.Fatalf("the other process dropped a genuine message: %s", m)
			}
			continue
		default:
		}
		break
	}
}

// wideArgs returns arguments with n unknown keys besides a and b.
func wideArgs(n int) string {
	var b strings.Builder
	b.WriteString(`{"a":1,"b":2`)
	for i := range n {
		fmt.Fprintf(&b, `,"k%06d":0`, i)
	}
	b.WriteString("}")
	return b.String()
}

// Messages with 100,000 keys, where the wire format lets a sender put many,
// cost the agent time linear in their size: it answers each with an error
// of at most 4 KiB that names ten problems, and answers the good request
// sent right after it at once.
func TestWideMessages(t *testing.T) {
	const n = 100_000
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex})
	var adds counter
	bob := newAdder("Bob", &adds)
	addAll(t, sp, bob)
	p := newProbe(t, ex)
	good := 0
	var sent time.Time // when the wide message went out
	answersAtOnce := func() {
		t.Helper()
		good++
		id := fmt.Sprintf("good-%d", good)
		p.request(bob.ID(), id, "add", addArgs{A: good, B: 1})
		p.expectSum(id, good+1)
		t.Logf("the wide message answered and the next request too, %v after the wide one was sent", time.Since(sent).Round(time.Millisecond))
	}
	expectBounded := func(parent string, mentions ...string) {
		t.Helper()
		m := p.receive()
		var ae *agency.ActionError
		if m.Action != agency.ErrorAction || !errors.As(m.Err(), &ae) || ae.Type != agency.TypeInvalidArgs || m.ParentID != parent {
			t.Fatalf("received %.300v, want an [error] invalid_args answering %q", m, parent)
		}
		if len(ae.Text) > 4096 {
			t.Errorf("the error's text is %d bytes, want at most 4096", len(ae.Text))
		}
		for _, s := range mentions {
			if !strings.Contains(ae.Text, s) {
				t.Errorf("the error %q does not mention %q", ae.Text, s)
			}
		}
	}
	keys := func(format string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(format, i)
		}
		return strings.Join(parts, ",")
	}
	msg := func(id, action string) []byte {
		return []byte(fmt.Sprintf(`{"to":%q,"from":%q,"action":{"__meta__":{"id":%q},%s}}`, bob.ID(), p.id, id, action))
	}

	t.Run("arguments", func(t *testing.T) {
		sent = time.Now()
		p.publish(bob.ID(), msg("wide-args", `"add":`+wideArgs(n)), amqp.Publishing{})
		expectBounded("wide-args", "k000000: unknown field", fmt.Sprintf("… and %d more", n-10))
		answersAtOnce()
	})
	t.Run("action names", func(t *testing.T) {
		sent = time.Now()
		p.publish(bob.ID(), msg("wide-actions", keys(`"act%06d":{}`)), amqp.Publishing{})
		expectBounded("wide-actions", "could not read your message", fmt.Sprintf("%d actions", n), fmt.Sprintf("… and %d more", n-10))
		answersAtOnce()
	})
	t.Run("top-level keys", func(t *testing.T) {
		body := fmt.Sprintf(`{"to":%q,"from":%q,%s,"action":{"__meta__":{"id":"wide-top"},"add":{"a":1,"b":1}}}`, bob.ID(), p.id, keys(`"k%06d":0`))
		sent = time.Now()
		p.publish(bob.ID(), []byte(body), amqp.Publishing{})
		expectBounded("wide-top", "could not read your message", "unknown key", fmt.Sprintf("… and %d more", n-10))
		answersAtOnce()
	})
	if got := adds.calls(); got != good {
		t.Errorf("add ran %d times, want %d (only the good requests)", got, good)
	}
}

// Every message with a deadline carries it to the broker as its
// expiration, so that it is dropped wherever it waits once its sender has
// stopped waiting.
func TestExpirationFromDeadline(t *testing.T) {
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex})
	sender := agency.MustNewAgent(randomName("Sender"))
	addAll(t, sp, sender)
	p := newProbe(t, ex)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := sender.SendMessage(ctx, &agency.Message{To: p.id, Action: "ping", Deadline: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := sender.Send(ctx, p.id, "ping", nil); err != nil {
		t.Fatal(err)
	}
	for i, want := range []func(string) bool{
		func(e string) bool {
			var ms int
			_, err := fmt.Sscan(e, &ms)
			return err == nil && ms > 50_000 && ms <= 60_000
		},
		func(e string) bool { return e == "" },
	} {
		select {
		case d := <-p.in:
			if !want(d.Expiration) {
				t.Errorf("message %d has expiration %q", i+1, d.Expiration)
			}
		case <-time.After(wait):
			t.Fatal("the probe received nothing")
		}
	}
}

// Requests with a short deadline that wait in the queue of an agent whose
// process was killed are not run when the process comes back: the broker
// drops them once their deadline has passed, and the agent checks again.
func TestStaleRequestsNotRunAfterRestart(t *testing.T) {
	t.Parallel()
	const stale = 20
	ex := testExchange(t)
	bin := buildPeer(t)
	id := randomName("Worker")
	first := startPeer(t, bin, ex, id)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exit // its queues stay, bound, for QueueExpiry

	sp := newSpace(t, amqpspace.Config{Exchange: ex})
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, sp, caller)
	var wg sync.WaitGroup
	for i := range stale {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if _, err := caller.Request(ctx, id, "record", echoArgs{Text: fmt.Sprintf("stale-%d", i)}); !errors.Is(err, agency.ErrTimeout) {
				t.Errorf("request %d to the killed peer: %v, want ErrTimeout", i, err)
			}
		}()
	}
	wg.Wait()

	second := startPeer(t, bin, ex, id)
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	if _, err := caller.Request(ctx, id, "record", echoArgs{Text: "fresh"}); err != nil {
		t.Fatalf("request to the restarted peer: %v", err)
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	lines, err := second.rest()
	if err != nil {
		t.Errorf("the restarted peer exited with %v", err)
	}
	ran := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "record stale-") {
			ran++
		}
	}
	if ran > 0 {
		t.Errorf("the restarted peer ran %d requests whose callers had given up (want 0): %q", ran, lines)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "record fresh") {
		t.Errorf("the restarted peer did not run the fresh request: %q", lines)
	}
}

// When the connection that carries a pending Request's answer is lost, the
// Request fails at once with ErrDisconnected, not at its deadline; and the
// space serves requests again once it is back.
func TestRequestFailsWhenItsConnectionIsLost(t *testing.T) {
	proxy := newProxy(t, nil)
	logs := newLogRecorder()
	ex := testExchange(t)
	near := newSpace(t, amqpspace.Config{URL: "amqp://guest:guest@" + proxy.addr + "/", Exchange: ex, Logger: slog.New(logs)})
	far := newSpace(t, amqpspace.Config{Exchange: ex})
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	slow := agency.MustNewAgent(randomName("Slow"))
	agency.Handle(slow, "wait", func(ctx context.Context, _ struct{}) (bool, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return true, nil
	})
	addAll(t, far, slow)
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, near, caller)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	result := make(chan error, 1)
	go func() {
		_, err := caller.Request(ctx, slow.ID(), "wait", nil)
		result <- err
	}()
	<-started
	proxy.cut()
	err := <-result
	if !errors.Is(err, amqpspace.ErrDisconnected) {
		t.Fatalf("Request whose connection was lost: %v, want ErrDisconnected", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Request returned at its deadline, not when the connection was lost: %v", err)
	}
	logs.expect(t, "reconnected")
	if n := near.Reconnects(); n < 1 {
		t.Errorf("Reconnects() = %d after a reconnect", n)
	}
	if n := far.Reconnects(); n != 0 {
		t.Errorf("Reconnects() = %d on the space that kept its connection", n)
	}
	echo := newEcho()
	addAll(t, far, echo)
	if got, err := agency.Call[string](ctx, caller, echo.ID(), "echo", echoArgs{Text: "back"}); err != nil || got != "back" {
		t.Errorf("request after the reconnect: %q, %v", got, err)
	}
}

// A Send whose confirmation does not come before its context ends says
// that the message may have been delivered (ErrUnconfirmed), and it was;
// a Send with a context that has ended sends nothing, and says so.
func TestUnconfirmedSend(t *testing.T) {
	t.Parallel()
	proxy := newProxy(t, nil)
	ex := testExchange(t)
	near := newSpace(t, amqpspace.Config{URL: "amqp://guest:guest@" + proxy.addr + "/", Exchange: ex})
	far := newSpace(t, amqpspace.Config{Exchange: ex})
	got := make(chan string, 10)
	rcv := agency.MustNewAgent(randomName("Receiver"))
	agency.Handle(rcv, "note", func(_ context.Context, args echoArgs) (bool, error) {
		got <- args.Text
		return true, nil
	})
	addAll(t, far, rcv)
	sender := agency.MustNewAgent(randomName("Sender"))
	addAll(t, near, sender)

	proxy.pauseAnswers() // the broker gets the message; its confirmation stays away
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := sender.Send(ctx, rcv.ID(), "note", echoArgs{Text: "maybe"})
	cancel()
	if !errors.Is(err, amqpspace.ErrUnconfirmed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send without a confirmation: %v, want ErrUnconfirmed and the context's error", err)
	}
	select {
	case text := <-got:
		if text != "maybe" {
			t.Fatalf("received %q", text)
		}
	case <-time.After(wait):
		t.Fatal("the unconfirmed message was not delivered: the test could not tell")
	}
	proxy.resume()

	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = sender.Send(done, rcv.ID(), "note", echoArgs{Text: "never"})
	if err == nil || errors.Is(err, amqpspace.ErrUnconfirmed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Send with an ended context: %v, want the context's error and not ErrUnconfirmed", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := sender.Send(ctx, rcv.ID(), "note", echoArgs{Text: "after"}); err != nil {
		t.Fatal(err)
	}
	if text := <-got; text != "after" {
		t.Errorf("received %q after the unsent message, want \"after\"", text)
	}
}
