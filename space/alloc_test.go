//go:build !race

// The race detector allocates on its own account: these budgets hold
// without it (.ci/run runs them so).

package space_test

import (
	"context"
	"encoding/json"
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
	budgetOneWay          = 2  // Send of typed arguments, handled
	budgetOneWayJSON      = 4  // Send of arguments as a JSON object, decoded strictly and handled
	budgetRequestDeadline = 12 // Call with a context.WithTimeout made for it, answered
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
