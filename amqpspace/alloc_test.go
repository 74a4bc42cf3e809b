//go:build !race

// The race detector allocates on its own account: these budgets hold
// without it (.ci/run runs them so).

package amqpspace_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// Allocation budgets per message through amqpspace, one message at a
// time, counted over every goroutine of the process: sender, recipient,
// the space and the amqp091-go client underneath. (In a burst,
// BenchmarkAMQPSendOneWay needs about 111 per message, the bare client of
// BenchmarkRawAMQPOneWay about 97.) A change that needs more
// allocations breaks these tests; one that needs fewer should lower the
// budget with it. AllocsPerRun rounds the mean down. (The request's
// deadline travels as its AMQP expiration too, which costs the client
// library a few allocations.) Before the codec made a decoded message's
// strings in one allocation and read a response's value without
// encoding/json, and the publisher wrote the numbers of the expiration
// and the correlation id into its own allocation (2026-11-26), the
// budgets were 127 and 282; before the codec's single pass and the
// pooled publish timer, 145 and 304.
const (
	budgetAMQPOneWay  = 122 // Send of a 200-byte tick, confirmed and handled
	budgetAMQPRequest = 260 // Call with a context.WithTimeout made for it, answered
)

func TestAllocsPerMessage(t *testing.T) {
	sp := newSpace(t, amqpspace.Config{})
	ctx := context.Background()

	handled := make(chan struct{}, 1)
	recv := agency.MustNewAgent(randomName("alloc-receiver"))
	agency.Handle(recv, "tick", func(context.Context, benchTick) (struct{}, error) {
		handled <- struct{}{}
		return struct{}{}, nil
	})
	agency.Handle(recv, "ping", func(_ context.Context, args benchPing) (int, error) {
		return args.N, nil
	})
	send := agency.MustNewAgent(randomName("alloc-sender"))
	addAll(t, sp, recv, send)
	tick := newTick(200)

	var giveUp <-chan time.Time // a test that hangs fails here
	cases := []struct {
		name   string
		budget float64
		run    func()
	}{
		{"one-way 200 B", budgetAMQPOneWay, func() {
			if _, err := send.Send(ctx, recv.ID(), "tick", tick); err != nil {
				t.Fatal(err)
			}
			select {
			case <-handled:
			case <-giveUp:
				t.Fatal("tick not handled")
			}
		}},
		{"request with deadline", budgetAMQPRequest, func() {
			ctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			if n, err := agency.Call[int](ctx, send, recv.ID(), "ping", benchPing{N: 300}); err != nil || n != 300 {
				t.Fatalf("ping: %d, %v", n, err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// One safety net for all the runs: a timer per message would
			// count its own allocations.
			giveUp = time.After(time.Minute)
			got := testing.AllocsPerRun(200, c.run)
			t.Logf("%.0f allocations per message (budget %.0f)", got, c.budget)
			if got > c.budget {
				t.Errorf("%.0f allocations per message, over the budget of %.0f", got, c.budget)
			}
		})
	}
}
