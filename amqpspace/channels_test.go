package amqpspace_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
)

// Agents of a space share consuming channels, and their delivery tags.
// An agent that holds deliveries it has not taken keeps them
// unacknowledged, however many messages its neighbours on the channel take
// and acknowledge meanwhile, in batches, with delivery tags interleaved
// with its own and after them: the broker keeps its backlog.
func TestNeighboursAcknowledgeOnlyTheirOwn(t *testing.T) {
	const prefetch, total, neighbours = 4, 40, 3
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
	const burst = 4 * total
	var ticks atomic.Int64
	ticked := make(chan struct{})
	agents := []*agency.Agent{slow}
	for range neighbours {
		busy := agency.MustNewAgent(randomName("Busy"))
		agency.Handle(busy, "tick", func(context.Context, struct{}) (bool, error) {
			if ticks.Add(1) == neighbours*burst {
				close(ticked)
			}
			return true, nil
		})
		agents = append(agents, busy)
	}
	sender := agency.MustNewAgent(randomName("Sender"))
	addAll(t, sp, append(agents, sender)...) // one channel: the first 100 agents share it
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	send := func(to, action string, args any) {
		if _, err := sender.Send(ctx, to, action, args); err != nil {
			t.Error(err)
		}
	}
	send(slow.ID(), "work", map[string]int{"n": 0})
	if n := <-started; n != 0 {
		t.Fatalf("the first action got %d", n)
	}
	// The slow agent's deliveries interleave with its neighbours': the
	// messages go out together.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; n < total; n++ {
			send(slow.ID(), "work", map[string]int{"n": n})
		}
	}()
	for _, busy := range agents[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range burst / 2 {
				send(busy.ID(), "tick", struct{}{})
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ch := bareChannel(t)
	held := func() {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			r := ready(t, ch, slow.ID())
			if r >= total-1-prefetch {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the broker holds %d messages for the slow agent, want at least %d", r, total-1-prefetch)
			}
			time.Sleep(20 * time.Millisecond) // the broker counts asynchronously
		}
	}
	held()
	// Its neighbours take and acknowledge the rest of their bursts, with
	// delivery tags after the slow agent's on the same channel.
	for _, busy := range agents[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range burst - burst/2 {
				send(busy.ID(), "tick", struct{}{})
			}
		}()
	}
	wg.Wait()
	select {
	case <-ticked:
	case <-ctx.Done():
		t.Fatalf("the busy agents handled %d of %d messages", ticks.Load(), neighbours*burst)
	}
	time.Sleep(100 * time.Millisecond) // a wrong acknowledgement would let the broker send more
	held()
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

// An Add refused because another process holds the id is refused before
// it consumes: the refusal does not close the channel the space's other
// agents consume on, and the space carries on without reconnecting.
func TestRefusalSparesNeighbours(t *testing.T) {
	ex := testExchange(t)
	holder := newSpace(t, amqpspace.Config{Exchange: ex})
	logs := newLogRecorder()
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Logger: slog.New(logs)})
	taken := newEcho()
	addAll(t, holder, taken)
	neighbour := newEcho()
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, sp, neighbour, caller)

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	twin := agency.MustNewAgent(taken.ID())
	if err := sp.Add(ctx, twin); !errors.Is(err, space.ErrAgentExists) {
		t.Fatalf("Add of an id live in another process: %v, want ErrAgentExists", err)
	}
	for range 20 {
		if got, err := agency.Call[string](ctx, caller, neighbour.ID(), "echo", echoArgs{Text: "still"}); err != nil || got != "still" {
			t.Fatalf("the neighbour after the refusal: %q, %v", got, err)
		}
	}
	for {
		select {
		case m := <-logs.msgs:
			t.Errorf("the space logged %q", m)
			continue
		default:
		}
		break
	}
}
