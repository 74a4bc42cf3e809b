// Package protoactor runs the workloads of package bench on
// github.com/asynkron/protoactor-go, with the same benchmark names as
// package local beside it.
package protoactor

import (
	"log/slog"
	"os"
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/seed72275b23/agency-go/bench"
)

// newSystem returns an actor system that logs only errors (its default
// logs every actor's stop), shut down when the benchmark ends.
func newSystem(b *testing.B) *actor.ActorSystem {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	b.Cleanup(sys.Shutdown)
	return sys
}

func spawn(b *testing.B, sys *actor.ActorSystem, props *actor.Props, name string) *actor.PID {
	pid, err := sys.Root.SpawnNamed(props, name)
	if err != nil {
		b.Fatal(err)
	}
	return pid
}

// BenchmarkOneWay: RootContext.Send of ticks to an actor.
func BenchmarkOneWay(b *testing.B) {
	bench.OneWay(b, func(b *testing.B, cd *bench.Countdown) func(int) {
		sys := newSystem(b)
		pid := spawn(b, sys, actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(bench.Tick); ok {
				cd.Handled()
			}
		}), "receiver")
		b.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
		return func(i int) { sys.Root.Send(pid, bench.Tick{N: i}) }
	})
}

// BenchmarkRequest: RootContext.RequestFuture with a timeout, then
// Future.Result; the actor answers with Context.Respond.
func BenchmarkRequest(b *testing.B) {
	sys := newSystem(b)
	pid := spawn(b, sys, actor.PropsFromFunc(func(c actor.Context) {
		if p, ok := c.Message().(bench.Ping); ok {
			c.Respond(p.N)
		}
	}), "echo")
	b.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	bench.Request(b, func(i int) (int, error) {
		v, err := sys.Root.RequestFuture(pid, bench.Ping{N: i}, bench.RequestTimeout).Result()
		n, _ := v.(int)
		return n, err
	})
}

// BenchmarkBroadcast10k: a loop of RootContext.Send over the actors' PIDs
// (protoactor's broadcast groups route through a router actor of their
// own; a loop is what reaches every actor directly).
func BenchmarkBroadcast10k(b *testing.B) {
	bench.Broadcast(b, func(b *testing.B, cd *bench.Countdown) bench.Fanout {
		sys := newSystem(b)
		props := actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(bench.Tick); ok {
				cd.Handled()
			}
		})
		pids := make([]*actor.PID, bench.BroadcastAgents)
		for i := range pids {
			pids[i] = spawn(b, sys, props, "agent-"+strconv.Itoa(i))
		}
		return bench.Fanout{
			Send: func() {
				for _, pid := range pids {
					sys.Root.Send(pid, bench.Tick{N: 1})
				}
			},
			Stop: func() error {
				for _, pid := range pids {
					if err := sys.Root.StopFuture(pid).Wait(); err != nil {
						return err
					}
				}
				return nil
			},
		}
	})
}

// population spawns n actors.
func population(b *testing.B, n int) func() {
	sys := newSystem(b)
	props := actor.PropsFromFunc(func(actor.Context) {})
	pids := make([]*actor.PID, n)
	for i := range pids {
		pids[i] = spawn(b, sys, props, "agent-"+strconv.Itoa(i))
	}
	return func() {
		for _, pid := range pids {
			sys.Root.Stop(pid)
		}
	}
}

// BenchmarkIdleAgent: what an idle actor holds.
func BenchmarkIdleAgent(b *testing.B) { bench.IdleAgent(b, population) }

// BenchmarkMillionAgents: a million actors.
func BenchmarkMillionAgents(b *testing.B) { bench.Million(b, population) }
