package amqpspace_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// declares reports whether the broker accepts declaring queue q with
// these properties: it refuses (PRECONDITION_FAILED) a declaration whose
// durability or x-queue-type differs from the queue's.
func declares(t *testing.T, q string, durable bool, args amqp.Table) bool {
	t.Helper()
	ch := bareChannel(t)
	_, err := ch.QueueDeclare(q, durable, false, false, false, args)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
		return false
	}
	if err != nil {
		t.Fatalf("declaring %s: %v", q, err)
	}
	return true
}

// With Durable an agent's queues are quorum queues; without it, transient
// classic queues (which a cluster node that dies takes with it, so that
// they can be declared again on another).
func TestQueueTypes(t *testing.T) {
	ex := testExchange(t)
	for _, durable := range []bool{true, false} {
		sp := newSpace(t, amqpspace.Config{Exchange: ex, Durable: durable})
		a := newEcho()
		addAll(t, sp, a)
		expiry := amqp.Table{"x-expires": amqpspace.DefaultQueueExpiry.Milliseconds()}
		quorum := amqp.Table{"x-expires": amqpspace.DefaultQueueExpiry.Milliseconds(), "x-queue-type": "quorum"}
		for _, q := range []string{a.ID(), a.ID() + "-broadcast"} {
			if durable {
				if !declares(t, q, true, quorum) {
					t.Errorf("Durable: %s is not a quorum queue", q)
				}
				if declares(t, q, true, amqp.Table{"x-expires": expiry["x-expires"], "x-queue-type": "classic"}) {
					t.Errorf("Durable: %s is also a classic queue?", q)
				}
			} else {
				if !declares(t, q, false, expiry) {
					t.Errorf("not Durable: %s is not a transient classic queue", q)
				}
				if declares(t, q, true, expiry) {
					t.Errorf("not Durable: %s is also durable?", q)
				}
			}
		}
	}
}

// syncBuffer is a log destination safe for several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A queue left with another type (an earlier release's durable classic
// queue, or a process with the other Durable setting) does not keep its
// agent out: empty, it is replaced; holding messages, it is used as it is
// and what it holds is delivered.
func TestQueueOfAnotherType(t *testing.T) {
	ex := testExchange(t)
	var logs syncBuffer
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Durable: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ch := bareChannel(t)
	expiry := amqp.Table{"x-expires": amqpspace.DefaultQueueExpiry.Milliseconds()}

	// Empty: replaced by a quorum queue.
	empty := newEcho()
	for _, q := range []string{empty.ID(), empty.ID() + "-broadcast"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, expiry); err != nil {
			t.Fatal(err)
		}
	}
	addAll(t, sp, empty)
	if !declares(t, empty.ID(), true, amqp.Table{"x-expires": expiry["x-expires"], "x-queue-type": "quorum"}) {
		t.Errorf("the empty classic queue %s was not replaced by a quorum queue", empty.ID())
	}

	// Holding a message: kept, and the message delivered.
	full := agency.MustNewAgent(randomName("Full"))
	got := make(chan string, 1)
	agency.Handle(full, "note", func(_ context.Context, a echoArgs) (bool, error) {
		got <- a.Text
		return true, nil
	})
	if _, err := ch.QueueDeclare(full.ID(), true, false, false, false, expiry); err != nil {
		t.Fatal(err)
	}
	body := `{"to":"` + full.ID() + `","from":"someone","action":{"__meta__":{"id":"m1"},"note":{"text":"kept"}}}`
	if err := ch.QueueBind(full.ID(), full.ID(), ex, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish(ex, full.ID(), true, false, amqp.Publishing{ContentType: "text/plain", ContentEncoding: "utf-8", Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	addAll(t, sp, full)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	select {
	case text := <-got:
		if text != "kept" {
			t.Errorf("got %q, want the message queued before", text)
		}
	case <-ctx.Done():
		t.Fatalf("the message queued in the classic queue never arrived; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "another type holds messages") {
		t.Errorf("no warning about the queue kept as it is; logs:\n%s", logs.String())
	}
	// The agent serves as usual meanwhile.
	if _, err := empty.Request(ctx, full.ID(), "note", echoArgs{Text: "after"}); err != nil {
		t.Errorf("request to the agent on the kept queue: %v", err)
	}
}
