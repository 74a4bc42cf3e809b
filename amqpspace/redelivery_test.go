package amqpspace

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
)

// nopAcker acknowledges nothing: the acknowledgement is lost, as with a
// connection that dies after the message was handed over.
type nopAcker struct{}

func (nopAcker) Ack(uint64, bool) error        { return amqp.ErrClosed }
func (nopAcker) Nack(uint64, bool, bool) error { return amqp.ErrClosed }
func (nopAcker) Reject(uint64, bool) error     { return amqp.ErrClosed }

// A message the broker redelivers because its acknowledgement was lost is
// not handed to the agent a second time; a redelivered message the agent
// never got is.
func TestRedeliverySkipped(t *testing.T) {
	a, err := agency.NewAgent("Receiver")
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	done := make(chan struct{}, 10)
	agency.Handle(a, "take", func(context.Context, struct{}) (bool, error) {
		handled.Add(1)
		done <- struct{}{}
		return true, nil
	})
	conn, err := agency.Connect(a, agency.RouterFunc(func(context.Context, *agency.Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	conn.Added(context.Background())
	defer conn.Close(context.Background())
	s := &Space{cfg: settings{Config: Config{Prefetch: 4, MaxMessageSize: 1 << 20}}, log: slog.New(slog.DiscardHandler)}
	mem := &member{s: s, id: "Receiver", conn: conn}
	sub := &subscription{acker: nopAcker{}}
	tag := uint64(0)

	delivery := func(id string, redelivered bool) amqp.Delivery {
		body := `{"to":"Receiver","from":"Sender","action":{"__meta__":{"id":"` + id + `"},"take":{}}}`
		tag++
		return amqp.Delivery{Acknowledger: nopAcker{}, DeliveryTag: tag, Body: []byte(body), Redelivered: redelivered}
	}
	wait := func() {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the action did not run")
		}
	}
	d := delivery("m-1", false)
	mem.take(sub, d, false)
	wait()
	d = delivery("m-1", true) // its acknowledgement was lost
	mem.take(sub, d, false)
	d = delivery("m-2", true) // delivered before, but never handed over
	mem.take(sub, d, false)
	wait()
	d = delivery("m-3", false) // a marker: all before it has been handled
	mem.take(sub, d, false)
	wait()
	if n := handled.Load(); n != 3 {
		t.Errorf("the action ran %d times, want 3 (m-1 once, m-2, m-3)", n)
	}

	// The memory is bounded: far older messages are forgotten.
	for i := range 2*4 + 64 {
		mem.recent.add(string(rune('a'+i%26)) + "-filler")
	}
	if mem.recent.has(handedKey(&agency.Message{From: "Sender", ID: "m-1"})) {
		t.Error("m-1 is still remembered after a window's worth of newer messages")
	}
}
