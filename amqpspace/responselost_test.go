package amqpspace_test

import (
	"errors"
	"log/slog"

	"context"
	amqp "github.com/rabbitmq/amqp091-go"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// A responder whose connection is lost between taking a request and
// answering it still answers: the response, which could not be sent (or
// not confirmed), goes again once the space has reconnected, while the
// caller still waits. The request itself is not handled twice: the broker
// delivers it again (its acknowledgement may have been lost), and the
// space knows the agent has it. This is what a cluster node's death does
// to the processes connected to it while the callers, on other nodes,
// keep their connections (TestClusterNodeLoss).
func TestResponseAfterReconnect(t *testing.T) {
	for _, c := range []struct {
		name string
		// cut loses the responder's connection from inside the action:
		// the response cannot be sent (at once), or is sent but its
		// confirmation cannot come (answers), and reaches the caller.
		cut func(p *proxy, answered <-chan struct{})
	}{
		{"lost before sending", func(p *proxy, _ <-chan struct{}) { p.cut() }},
		{"lost before the confirmation", func(p *proxy, answered <-chan struct{}) {
			p.pauseAnswers()
			go func() {
				<-answered
				p.cut()
				p.resume()
			}()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := testExchange(t)
			proxy := newProxy(t, nil)
			callerSp := newSpace(t, amqpspace.Config{Exchange: ex})
			responderSp := newSpace(t, amqpspace.Config{URL: "amqp://guest:guest@" + proxy.addr + "/", Exchange: ex})

			var calls atomic.Int32
			answered := make(chan struct{})
			responder := agency.MustNewAgent(randomName("Responder"))
			agency.Handle(responder, "echo", func(_ context.Context, args echoArgs) (string, error) {
				if calls.Add(1) == 1 && args.Text == "first" {
					c.cut(proxy, answered)
				}
				return args.Text, nil
			})
			late := &lateResponses{}
			caller := agency.MustNewAgent(randomName("Caller"), agency.Hooks(late))
			addAll(t, responderSp, responder)
			addAll(t, callerSp, caller)

			ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
			defer cancel()
			start := time.Now()
			got, err := agency.Call[string](ctx, caller, responder.ID(), "echo", echoArgs{Text: "first"})
			close(answered)
			if err != nil || got != "first" {
				t.Fatalf("the request whose responder lost its connection: %q, %v after %v; want its answer", got, err, time.Since(start).Round(time.Millisecond))
			}
			// A second request is handled once the first's response has
			// gone (one action at a time), on the new connection: a copy
			// of the first response sent again comes to the caller before
			// its answer.
			if got, err := agency.Call[string](ctx, caller, responder.ID(), "echo", echoArgs{Text: "second"}); err != nil || got != "second" {
				t.Fatalf("a request after the reconnect: %q, %v", got, err)
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("the responder's action ran %d times for two requests", n)
			}
			if n := late.count(); n != 0 {
				t.Errorf("the caller got %d responses to no waiting request (a response sent again was not recognised)", n)
			}
			if responderSp.Reconnects() == 0 {
				t.Error("the responder's space did not reconnect: the test did not cut its connection")
			}
		})
	}
}

// lateResponses counts the responses that reach an agent's hooks: those
// that answer no waiting request.
type lateResponses struct {
	mu sync.Mutex
	n  int
}

func (l *lateResponses) HandleActionValue(context.Context, *agency.Message) {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
}

func (l *lateResponses) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// A response the broker refuses goes again, on a channel of its own,
// until it is taken: a quorum queue refuses what a channel sends it while
// it elects a leader (a cluster node died), and RabbitMQ 3.10 was seen
// refusing everything that channel sent it afterwards. Here the refusal
// is a queue that takes nothing (x-max-length 0, reject-publish), the only
// one bound for the caller's id until the caller's own queue is bound
// again.
func TestRefusedResponseSentAgain(t *testing.T) {
	ex := testExchange(t)
	logs := newLogRecorder()
	callerSp := newSpace(t, amqpspace.Config{Exchange: ex})
	responderSp := newSpace(t, amqpspace.Config{Exchange: ex, Logger: slog.New(logs)})
	responder := newEcho()
	late := &lateResponses{}
	caller := agency.MustNewAgent(randomName("Caller"), agency.Hooks(late))
	addAll(t, responderSp, responder)
	addAll(t, callerSp, caller)

	ch := bareChannel(t)
	refuser := randomName("refuser")
	if _, err := ch.QueueDeclare(refuser, false, true, false, false, amqp.Table{"x-max-length": 0, "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(refuser, caller.ID(), ex, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueUnbind(caller.ID(), caller.ID(), ex, nil); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		got, err := agency.Call[string](ctx, caller, responder.ID(), "echo", echoArgs{Text: "refused first"})
		done <- result{got, err}
	}()
	logs.expect(t, "the broker refused a response")
	// The caller's queue first: in between, the response goes to both
	// queues and is refused again.
	if err := ch.QueueBind(caller.ID(), caller.ID(), ex, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(refuser, false, false, false); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.text != "refused first" {
		t.Fatalf("a request whose response was refused once: %q, %v; want its answer", r.text, r.err)
	}
	if n := late.count(); n != 0 {
		t.Errorf("the caller got %d responses to no waiting request", n)
	}
}

// Without Durable, an agent's queue is transient and goes with the
// cluster node it lived on; after a reconnect it is declared again, and
// until then a Request of that agent fails at once (ErrDisconnected): its
// answer would find no queue, and the caller would wait out its deadline.
// Here the queue is deleted from outside, which makes the broker cancel
// its consumer and the space reconnect, and the reconnect is held between
// storing its session and subscribing the agent again.
func TestRequestBeforeResubscribed(t *testing.T) {
	ex := testExchange(t)
	stored := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	amqpspace.HoldResubscribe(func() {
		once.Do(func() {
			stored <- struct{}{}
			<-release
		})
	})
	t.Cleanup(func() { amqpspace.HoldResubscribe(nil) })
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)

	responderSp := newSpace(t, amqpspace.Config{Exchange: ex})
	callerSp := newSpace(t, amqpspace.Config{Exchange: ex})
	responder := newEcho()
	caller := agency.MustNewAgent(randomName("Caller"), agency.Hooks(&lateResponses{}))
	addAll(t, responderSp, responder)
	addAll(t, callerSp, caller)

	if _, err := bareChannel(t).QueueDelete(caller.ID(), false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stored:
	case <-time.After(wait):
		t.Fatal("the caller's space did not reconnect after its agent's queue was deleted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	start := time.Now()
	_, err := caller.Request(ctx, responder.ID(), "echo", echoArgs{Text: "too soon"})
	if !errors.Is(err, amqpspace.ErrDisconnected) {
		t.Errorf("a Request before its agent is subscribed again: %v after %v; want ErrDisconnected at once", err, time.Since(start).Round(time.Millisecond))
	}
	releaseOnce()
	for {
		got, err := agency.Call[string](ctx, caller, responder.ID(), "echo", echoArgs{Text: "after"})
		if err == nil {
			if got != "after" {
				t.Fatalf("echo answered %q", got)
			}
			break
		}
		if !errors.Is(err, amqpspace.ErrDisconnected) || ctx.Err() != nil {
			t.Fatalf("a Request once the agent is back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// When the broker refuses a message to an agent, the Requests of the
// process that wait for that agent's answer fail at once with
// ErrUnconfirmed: the way to its queue is broken (RabbitMQ 3.10.8 was seen
// confirming, without queueing it, the first message a channel sent a
// quorum queue during its leader's election, and refusing the rest), and
// the answer may never come. Here the refusal is a second queue bound for
// the agent's id that takes nothing.
func TestRefusalFailsWaitingRequests(t *testing.T) {
	ex := testExchange(t)
	callerSp := newSpace(t, amqpspace.Config{Exchange: ex})
	responderSp := newSpace(t, amqpspace.Config{Exchange: ex})
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	started := make(chan struct{}, 1)
	slow := agency.MustNewAgent(randomName("Slow"))
	agency.Handle(slow, "wait", func(context.Context, struct{}) (bool, error) {
		started <- struct{}{}
		<-release
		return true, nil
	})
	caller := agency.MustNewAgent(randomName("Caller"), agency.Hooks(&lateResponses{}))
	addAll(t, responderSp, slow)
	addAll(t, callerSp, caller)

	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		_, err := caller.Request(ctx, slow.ID(), "wait", nil)
		errs <- err
	}()
	<-started // queued, delivered, and waiting for its answer

	ch := bareChannel(t)
	refuser := randomName("refuser")
	if _, err := ch.QueueDeclare(refuser, false, true, false, false, amqp.Table{"x-max-length": 0, "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(refuser, slow.ID(), ex, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := caller.Send(ctx, slow.ID(), "wait", nil); !errors.Is(err, amqpspace.ErrRejected) {
		t.Fatalf("a Send the broker refuses: %v, want ErrRejected", err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, amqpspace.ErrUnconfirmed) {
			t.Errorf("the waiting Request: %v, want ErrUnconfirmed", err)
		}
	case <-time.After(wait):
		t.Error("the waiting Request still waits after the broker refused a message to its recipient")
	}
	releaseOnce()
}

// A new channel sends again what the broker had confirmed to a queue when
// the broker then refuses a message to that queue: RabbitMQ 3.10.8 was
// seen to confirm, without queueing it, the first message a new channel
// sent a quorum queue during its leader's election, and to refuse the
// rest. Here the first message goes to a queue that drops it (x-max-length
// 0, drop-head: confirmed, not kept), the second to one that refuses it;
// once the agent's own queue is bound again, the first arrives.
func TestRefusalSendsConfirmedAgain(t *testing.T) {
	amqpspace.KeepFirst(true)
	t.Cleanup(func() { amqpspace.KeepFirst(false) })
	ex := testExchange(t)
	logs := newLogRecorder()
	senderSp := newSpace(t, amqpspace.Config{Exchange: ex, Logger: slog.New(logs)})
	receiverSp := newSpace(t, amqpspace.Config{Exchange: ex})
	var mu sync.Mutex
	got := map[string]int{}
	receiver := agency.MustNewAgent(randomName("Receiver"))
	agency.Handle(receiver, "note", func(_ context.Context, args echoArgs) (bool, error) {
		mu.Lock()
		got[args.Text]++
		mu.Unlock()
		return true, nil
	})
	sender := agency.MustNewAgent(randomName("Sender"))
	addAll(t, receiverSp, receiver)
	addAll(t, senderSp, sender)

	ch := bareChannel(t)
	declare := func(overflow string) string {
		q := randomName(overflow)
		if _, err := ch.QueueDeclare(q, false, true, false, false, amqp.Table{"x-max-length": 0, "x-overflow": overflow}); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, receiver.ID(), ex, false, nil); err != nil {
			t.Fatal(err)
		}
		return q
	}
	if err := ch.QueueUnbind(receiver.ID(), receiver.ID(), ex, nil); err != nil {
		t.Fatal(err)
	}
	dropper := declare("drop-head")
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	if _, err := sender.Send(ctx, receiver.ID(), "note", echoArgs{Text: "first"}); err != nil {
		t.Fatalf("the first message, which the broker confirms and drops: %v", err)
	}
	if _, err := ch.QueueDelete(dropper, false, false, false); err != nil {
		t.Fatal(err)
	}
	refuser := declare("reject-publish")
	if _, err := sender.Send(ctx, receiver.ID(), "note", echoArgs{Text: "second"}); !errors.Is(err, amqpspace.ErrRejected) {
		t.Fatalf("the second message: %v, want ErrRejected", err)
	}
	logs.expect(t, "sending again what that channel had sent the same queue")
	// The agent's queue first: in between, the copy goes to both and is
	// refused again.
	if err := ch.QueueBind(receiver.ID(), receiver.ID(), ex, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(refuser, false, false, false); err != nil {
		t.Fatal(err)
	}
	for {
		mu.Lock()
		first := got["first"]
		mu.Unlock()
		if first > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the message the broker confirmed and dropped never arrived")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// After the broker refuses a message to an agent, the space's messages to
// that agent go on a side channel, opened for them and replaced while it
// refuses: RabbitMQ 3.10.8 was seen to make a new channel whose first
// message to a quorum queue came during its election refuse all it sent
// that queue afterwards. Here the refusals stop when the queue that takes
// nothing goes, and the messages flow again, to that agent and to others.
func TestRefusedKeyGoesOnASideChannel(t *testing.T) {
	ex := testExchange(t)
	senderSp := newSpace(t, amqpspace.Config{Exchange: ex})
	receiverSp := newSpace(t, amqpspace.Config{Exchange: ex})
	receiver, other := newEcho(), newEcho()
	sender := agency.MustNewAgent(randomName("Sender"), agency.Hooks(&lateResponses{}))
	addAll(t, receiverSp, receiver, other)
	addAll(t, senderSp, sender)

	ch := bareChannel(t)
	refuser := randomName("refuser")
	if _, err := ch.QueueDeclare(refuser, false, true, false, false, amqp.Table{"x-max-length": 0, "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(refuser, receiver.ID(), ex, false, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	for i := range 3 { // the session's channel, then side channels
		if _, err := sender.Request(ctx, receiver.ID(), "echo", echoArgs{Text: "refused"}); !errors.Is(err, amqpspace.ErrRejected) {
			t.Fatalf("request %d to a queue that refuses: %v, want ErrRejected", i, err)
		}
	}
	if _, err := ch.QueueDelete(refuser, false, false, false); err != nil {
		t.Fatal(err)
	}
	for _, to := range []*agency.Agent{receiver, other, receiver} {
		if got, err := agency.Call[string](ctx, sender, to.ID(), "echo", echoArgs{Text: "again"}); err != nil || got != "again" {
			t.Fatalf("a request to %s once the refusals stop: %q, %v", to.ID(), got, err)
		}
	}
}
