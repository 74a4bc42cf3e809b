//go:build !race

// The race detector allocates on its own account: these budgets hold
// without it (.ci/run runs them so).

package space_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Allocation budgets per message of space.Local's hot paths, one message
// at a time (each handled before the next is sent), counted over every
// goroutine of the process: sender, recipient and the space. The
// arguments are boxed once for all the messages; BenchmarkLocalSendOneWay,
// which boxes new ones for each, counts one more. A change that needs
// more allocations breaks these tests; one that needs fewer should lower
// the budget with it.
const (
	budgetOneWay          = 1 // Send of typed arguments, handled: the message, with its id and its handler's context
	budgetOneWayJSON      = 3 // Send of arguments as a JSON object, decoded strictly and handled
	budgetRequestDeadline = 8 // Call with a context.WithTimeout made for it, answered

	// Per recipient of a broadcast (the message itself is shared).
	// The first message an agent gets: its delivery goroutine's function,
	// its queue, the handler's context, and, when the runtime has no
	// finished goroutine's descriptor to reuse, a new one (measured 3.1 to
	// 4.0 a recipient, by how many the runtime had free).
	budgetBroadcastFirst = 4
	budgetBroadcastLater = 1 // the handler's context
)

func TestAllocsPerMessage(t *testing.T) {
	ctx := context.Background()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(ctx) })

	handled := make(chan struct{}, 1)
	recv := agency.MustNewAgent("Receiver")
	agency.Handle(recv, "tick", func(context.Context, tickArgs) (struct{}, error) {
		handled <- struct{}{}
		return struct{}{}, nil
	})
	agency.Handle(recv, "ping", func(_ context.Context, args pingArgs) (int, error) {
		return args.N, nil
	})
	send := agency.MustNewAgent("Sender")
	for _, a := range []*agency.Agent{recv, send} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	var giveUp <-chan time.Time // a test that hangs fails here
	oneWay := func(args any) func() {
		return func() {
			if _, err := send.Send(ctx, "Receiver", "tick", args); err != nil {
				t.Fatal(err)
			}
			select {
			case <-handled:
			case <-giveUp:
				t.Fatal("tick not handled")
			}
		}
	}
	cases := []struct {
		name   string
		budget float64
		run    func()
	}{
		{"one-way", budgetOneWay, oneWay(tickArgs{N: 300})},
		{"one-way JSON", budgetOneWayJSON, oneWay(json.RawMessage(`{"n": 300}`))},
		{"request with deadline", budgetRequestDeadline, func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if n, err := agency.Call[int](ctx, send, "Receiver", "ping", pingArgs{N: 300}); err != nil || n != 300 {
				t.Fatalf("ping: %d, %v", n, err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// One safety net for all the runs: a timer per message would
			// count its own allocations.
			giveUp = time.After(time.Minute)
			got := testing.AllocsPerRun(1000, c.run)
			t.Logf("%.0f allocations per message (budget %.0f)", got, c.budget)
			if got > c.budget {
				t.Errorf("%.0f allocations per message, over the budget of %.0f", got, c.budget)
			}
		})
	}
}

// TestAllocsPerBroadcastRecipient holds a broadcast's allocations per
// recipient to a budget: the first broadcast after the agents were added,
// and a later one.
func TestAllocsPerBroadcastRecipient(t *testing.T) {
	const agents = 2000
	ctx := context.Background()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(ctx) })
	var handled sync.WaitGroup
	handler := func(context.Context, tickArgs) (struct{}, error) {
		handled.Done()
		return struct{}{}, nil
	}
	for i := range agents {
		a := agency.MustNewAgent("agent-" + strconv.Itoa(i))
		agency.Handle(a, "tick", handler)
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	sender := agency.MustNewAgent("Sender", agency.OwnBroadcasts(false))
	if err := sp.Add(ctx, sender); err != nil {
		t.Fatal(err)
	}
	args := any(tickArgs{N: 1}) // boxed once, as the one-way budgets' are
	perRecipient := func() float64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		handled.Add(agents)
		if _, err := sender.Send(ctx, agency.Broadcast, "tick", args); err != nil {
			t.Fatal(err)
		}
		handled.Wait()
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / agents
	}
	for _, c := range []struct {
		name   string
		budget float64
	}{{"first", budgetBroadcastFirst}, {"later", budgetBroadcastLater}} {
		if c.name == "later" {
			// The second message still makes the queue's second buffer,
			// which the queue then keeps: a later one is the third.
			perRecipient()
		}
		got := perRecipient()
		t.Logf("%s broadcast: %.2f allocations per recipient (budget %.0f)", c.name, got, c.budget)
		// The message, the sender's own and the runtime's count a few
		// for the whole broadcast: well under one per recipient.
		if got >= c.budget+1 {
			t.Errorf("%s broadcast: %.2f allocations per recipient, over the budget of %.0f", c.name, got, c.budget)
		}
	}
}
