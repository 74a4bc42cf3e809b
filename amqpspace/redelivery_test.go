package amqpspace

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// nopAcker acknowledges nothing: the acknowledgement is lost, as with a
// connection that dies after the message was handed over.
type nopAcker struct{}

func (nopAcker) Ack(uint64, bool) error        { return amqp.ErrClosed }
func (nopAcker) Nack(uint64, bool, bool) error { return amqp.ErrClosed }
func (nopAcker) Reject(uint64, bool) error     { return amqp.ErrClosed }

// newTestMember connects a to a router that drops everything, as a member
// of a space with Prefetch 4, with a subscription whose acknowledgements
// are lost.
func newTestMember(t *testing.T, a *agency.Agent) (*member, *subscription) {
	t.Helper()
	conn, err := driver.Connect(a, driver.RouterFunc(func(context.Context, *agency.Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	conn.Added(context.Background())
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	s := &Space{cfg: settings{Config: Config{Prefetch: 4, MaxMessageSize: 1 << 20}}, log: slog.New(slog.DiscardHandler)}
	mem := &member{s: s, id: a.ID(), conn: conn}
	return mem, &subscription{acks: newChanAcks(nopAcker{}, 0), acked: mem.acked}
}

// A message the broker redelivers because its acknowledgement was lost is
// not handed to the agent a second time; a redelivered message the agent
// never got is.
func TestRedeliverySkipped(t *testing.T) {
	a := agency.MustNewAgent("Receiver")
	var handled atomic.Int32
	done := make(chan struct{}, 10)
	agency.Handle(a, "take", func(context.Context, struct{}) (bool, error) {
		handled.Add(1)
		done <- struct{}{}
		return true, nil
	})
	mem, sub := newTestMember(t, a)
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

// A message the agent holds but has not taken stays recognised as handed
// over however many other messages pass meanwhile: its redelivery after a
// reconnect is skipped, and it runs once.
func TestRedeliveryOfHeldMessage(t *testing.T) {
	a := agency.MustNewAgent("Receiver")
	release := make(chan struct{})
	ran := make(chan string, 10)
	agency.Handle(a, "take", func(ctx context.Context, _ struct{}) (bool, error) {
		id := agency.MessageFrom(ctx).ID
		if id == "blocker" {
			<-release
		}
		ran <- id
		return true, nil
	})
	mem, sub := newTestMember(t, a)
	tag := uint64(0)
	deliver := func(body string, redelivered bool) {
		tag++
		mem.take(sub, amqp.Delivery{Acknowledger: nopAcker{}, DeliveryTag: tag, Body: []byte(body), Redelivered: redelivered}, false)
	}
	call := func(id string) string {
		return `{"to":"Receiver","from":"Sender","action":{"__meta__":{"id":"` + id + `"},"take":{}}}`
	}
	deliver(call("blocker"), false) // the agent is busy with it
	deliver(call("U"), false)       // held: the agent has not taken it
	// Answers no one waits for, dropped and acknowledged at once: more than
	// the window of recent acknowledgements.
	for i := range 2*4 + 64 + 10 {
		deliver(fmt.Sprintf(`{"to":"Receiver","from":"Other","action":{"__meta__":{"id":"r%d","parent_id":"none"},"[response]":{"value":1}}}`, i), false)
	}
	deliver(call("U"), true) // the connection went; the broker delivers U again
	close(release)
	var got []string
	for range 2 {
		select {
		case id := <-ran:
			got = append(got, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("ran %v, want blocker and U", got)
		}
	}
	select {
	case id := <-ran:
		t.Fatalf("ran %s again after %v", id, got)
	case <-time.After(100 * time.Millisecond): // a second U would come right away
	}
}

// ackRecorder records the tags acknowledged.
type ackRecorder struct{ tags []uint64 }

func (r *ackRecorder) Ack(tag uint64, _ bool) error  { r.tags = append(r.tags, tag); return nil }
func (r *ackRecorder) Nack(uint64, bool, bool) error { return nil }
func (r *ackRecorder) Reject(uint64, bool) error     { return nil }

// A delivery held longer than maxHold is acknowledged anyway, before the
// broker's consumer timeout would close the channel; younger ones stay
// held, and none is acknowledged twice.
func TestHoldIsBounded(t *testing.T) {
	rec := &ackRecorder{}
	var acked []string
	sub := testSub(newChanAcks(rec, 0), &acked)
	sub.hold(1, "old", "", 0)
	sub.held[1] = heldDelivery{key: "old", since: time.Now().Add(-2 * maxHold)}
	sub.hold(2, "young", "", 0)
	sub.releaseAll(time.Now().Add(-maxHold))
	if len(rec.tags) != 1 || rec.tags[0] != 1 || len(acked) != 1 || acked[0] != "old" {
		t.Fatalf("acknowledged %v (%v), want only tag 1", rec.tags, acked)
	}
	sub.ack(1) // the agent takes it later: no second acknowledgement
	sub.ack(2)
	if len(rec.tags) != 2 || rec.tags[1] != 2 {
		t.Errorf("acknowledged %v, want [1 2]", rec.tags)
	}
}
