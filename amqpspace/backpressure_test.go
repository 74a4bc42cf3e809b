package amqpspace_test

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// ready returns how many messages wait in queue q on the broker.
func ready(t *testing.T, ch *amqp.Channel, q string) int {
	t.Helper()
	info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

// A slow agent's backlog stays in the broker: Prefetch bounds what the
// process holds for it, and everything arrives, in order, once the agent
// gets on.
func TestBackpressure(t *testing.T) {
	const prefetch, total = 4, 40
	sp := newSpace(t, amqpspace.Config{Prefetch: prefetch})
	slow := agency.MustNewAgent(randomName("Slow"))
	started := make(chan int, total)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the space closes
	agency.Handle(slow, "work", func(_ context.Context, a struct {
		N int `json:"n"`
	}) (bool, error) {
		started <- a.N
		<-release
		return true, nil
	})
	sender := agency.MustNewAgent(randomName("Sender"))
	addAll(t, sp, slow, sender)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for n := range total {
		if _, err := sender.Send(ctx, slow.ID(), "work", map[string]int{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	if n := <-started; n != 0 {
		t.Fatalf("the first action got %d", n)
	}
	// The agent has taken the first message (its handler runs) and holds
	// at most Prefetch more in its queue: the broker keeps the rest.
	deadline := time.Now().Add(wait)
	ch := bareChannel(t)
	for {
		r := ready(t, ch, slow.ID())
		if r >= total-1-prefetch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker holds %d messages, want at least %d", r, total-1-prefetch)
		}
		time.Sleep(20 * time.Millisecond) // the broker counts asynchronously
	}
	once.Do(func() { close(release) })
	for want := 1; want < total; want++ {
		select {
		case n := <-started:
			if n != want {
				t.Fatalf("action %d ran, want %d", n, want)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d actions ran", want, total)
		}
	}
}

// An agent whose window is full of messages it has not taken still gets
// the response to a request it makes: waiting for it takes the window.
func TestBackpressureRequestInAction(t *testing.T) {
	sp := newSpace(t, amqpspace.Config{Prefetch: 1})
	helper := newEcho()
	asker := agency.MustNewAgent(randomName("Asker"))
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	answers := make(chan string, 10)
	agency.Handle(asker, "ask", func(ctx context.Context, _ struct{}) (bool, error) {
		started <- struct{}{}
		<-release
		got, err := agency.Call[string](ctx, agency.AgentFrom(ctx), helper.ID(), "echo", echoArgs{Text: "hi"})
		if err != nil {
			got = err.Error()
		}
		answers <- got
		return true, nil
	})
	sender := agency.MustNewAgent(randomName("Sender"))
	addAll(t, sp, helper, asker, sender)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for range 3 {
		if _, err := sender.Send(ctx, asker.ID(), "ask", nil); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	close(release)
	for i := range 3 {
		select {
		case got := <-answers:
			if got != "hi" {
				t.Fatalf("request %d from inside the action: %s", i, got)
			}
		case <-ctx.Done():
			t.Fatalf("request %d from inside the action never returned", i)
		}
	}
}

// An agent that removes itself while its window is full leaves at once:
// the removal stops holding messages back.
func TestBackpressureRemoveSelf(t *testing.T) {
	sp := newSpace(t, amqpspace.Config{Prefetch: 1})
	leaver := agency.MustNewAgent(randomName("Leaver"))
	removed := make(chan error, 1)
	handled := make(chan string, 10)
	sentAll := make(chan struct{})
	agency.Handle(leaver, "note", func(ctx context.Context, a echoArgs) (bool, error) {
		handled <- a.Text
		if a.Text == "leave" {
			<-sentAll // the rest waits in the broker, behind a full window
			removed <- sp.Remove(ctx, agency.AgentFrom(ctx).ID())
		}
		return true, nil
	})
	sender := agency.MustNewAgent(randomName("Sender"))
	addAll(t, sp, leaver, sender)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	want := []string{"leave", "after 1", "after 2", "after 3"}
	for _, text := range want {
		if _, err := sender.Send(ctx, leaver.ID(), "note", echoArgs{Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	close(sentAll)
	select {
	case err := <-removed:
		if err != nil {
			t.Fatalf("Remove from inside the action: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Remove from inside the action did not return")
	}
	// What was sent before the removal began is handled before the agent
	// is gone.
	for _, w := range want {
		select {
		case got := <-handled:
			if got != w {
				t.Fatalf("handled %q, want %q", got, w)
			}
		case <-ctx.Done():
			t.Fatalf("%q was never handled", w)
		}
	}
}
