// Package local runs the workloads of package bench on space.Local, with
// the same benchmark names as the peers' packages beside it.
package local

import (
	"context"
	"strconv"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/bench"
	"github.com/seed72275b23/agency-go/space"
)

// newLocal returns a space.Local closed when the benchmark ends.
func newLocal(b *testing.B) *space.Local {
	sp := space.NewLocal()
	b.Cleanup(func() {
		if err := sp.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return sp
}

func add(b *testing.B, sp space.Space, a *agency.Agent) {
	if err := sp.Add(context.Background(), a); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkOneWay: an agent Sends ticks to another agent's tick action.
// The sender has no response hooks, so no response comes back.
func BenchmarkOneWay(b *testing.B) {
	bench.OneWay(b, func(b *testing.B, cd *bench.Countdown) func(int) {
		sp := newLocal(b)
		recv := agency.MustNewAgent("Receiver")
		agency.Handle(recv, "tick", func(context.Context, bench.Tick) (struct{}, error) {
			cd.Handled()
			return struct{}{}, nil
		})
		send := agency.MustNewAgent("Sender")
		add(b, sp, recv)
		add(b, sp, send)
		ctx := context.Background()
		return func(i int) {
			if _, err := send.Send(ctx, "Receiver", "tick", bench.Tick{N: i}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRequest: agency.Call from an agent to another agent's ping
// action, with a context.WithTimeout made for each call.
func BenchmarkRequest(b *testing.B) {
	sp := newLocal(b)
	echo := agency.MustNewAgent("Echo")
	agency.Handle(echo, "ping", func(_ context.Context, p bench.Ping) (int, error) {
		return p.N, nil
	})
	caller := agency.MustNewAgent("Caller")
	add(b, sp, echo)
	add(b, sp, caller)
	bench.Request(b, func(i int) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), bench.RequestTimeout)
		defer cancel()
		return agency.Call[int](ctx, caller, "Echo", "ping", bench.Ping{N: i})
	})
}

// BenchmarkBroadcast10k: one Send to agency.Broadcast from an agent that
// does not receive its own broadcasts; each of the other agents' tick
// action handles it.
func BenchmarkBroadcast10k(b *testing.B) {
	bench.Broadcast(b, func(b *testing.B, cd *bench.Countdown) bench.Fanout {
		sp := newLocal(b)
		handler := func(context.Context, bench.Tick) (struct{}, error) {
			cd.Handled()
			return struct{}{}, nil
		}
		for i := range bench.BroadcastAgents {
			a := agency.MustNewAgent("agent-" + strconv.Itoa(i))
			agency.Handle(a, "tick", handler)
			add(b, sp, a)
		}
		sender := agency.MustNewAgent("Sender", agency.OwnBroadcasts(false))
		add(b, sp, sender)
		ctx := context.Background()
		return bench.Fanout{
			Send: func() {
				if _, err := sender.Send(ctx, agency.Broadcast, "tick", bench.Tick{N: 1}); err != nil {
					b.Fatal(err)
				}
			},
			Stop: func() error { return sp.Close(ctx) },
		}
	})
}

// population adds n agents with a tick action each.
func population(b *testing.B, n int) func() {
	sp := newLocal(b)
	handler := func(context.Context, bench.Tick) (struct{}, error) { return struct{}{}, nil }
	for i := range n {
		a := agency.MustNewAgent("agent-" + strconv.Itoa(i))
		agency.Handle(a, "tick", handler)
		add(b, sp, a)
	}
	return func() {
		if err := sp.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdleAgent: what an idle agent with one action holds.
func BenchmarkIdleAgent(b *testing.B) { bench.IdleAgent(b, population) }

// BenchmarkMillionAgents: a million agents with one action each.
func BenchmarkMillionAgents(b *testing.B) { bench.Million(b, population) }
