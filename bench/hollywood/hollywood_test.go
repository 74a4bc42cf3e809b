// Package hollywood runs the workloads of package bench on
// github.com/anthdm/hollywood, with the same benchmark names as package
// local beside it.
package hollywood

import (
	"strconv"
	"testing"

	"github.com/anthdm/hollywood/actor"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/bench"
)

// newEngine returns an engine with the default configuration.
func newEngine(b *testing.B) *actor.Engine {
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkOneWay: Engine.Send of ticks to an actor.
func BenchmarkOneWay(b *testing.B) {
	bench.OneWay(b, func(b *testing.B, cd *bench.Countdown) func(int) {
		e := newEngine(b)
		pid := e.SpawnFunc(func(c *actor.Context) {
			if _, ok := c.Message().(bench.Tick); ok {
				cd.Handled()
			}
		}, "receiver")
		b.Cleanup(func() { <-e.Poison(pid).Done() })
		return func(i int) { e.Send(pid, bench.Tick{N: i}) }
	})
}

// sizedTick is a tick carried in a heap object of 176 bytes: an
// agency.Message, with room for an id and one more pointer beside it. It
// was the single allocation that agency's Send made for a message; since
// ids moved out of messages, Send allocates 160 bytes for the message and
// writes its id into a 24-byte slot of a shared block (512 bytes for 21
// ids), 184 bytes in all, so 176 stays the fair measure.
type sizedTick struct {
	agency.Message
	id      [24]byte
	handler *actor.PID
}

// BenchmarkOneWayMessageSized: BenchmarkOneWay with each tick sent as a
// fresh *sizedTick, so that hollywood allocates per message what agency
// does. It is not a workload of its own: set beside BenchmarkOneWay it
// tells what the message's bytes cost hollywood, and beside agency's
// figure what agency's work costs beyond them.
func BenchmarkOneWayMessageSized(b *testing.B) {
	bench.OneWay(b, func(b *testing.B, cd *bench.Countdown) func(int) {
		e := newEngine(b)
		pid := e.SpawnFunc(func(c *actor.Context) {
			if m, ok := c.Message().(*sizedTick); ok && m.Action == "tick" {
				cd.Handled()
			}
		}, "receiver")
		b.Cleanup(func() { <-e.Poison(pid).Done() })
		return func(i int) {
			e.Send(pid, &sizedTick{Message: agency.Message{To: "receiver", Action: "tick", Args: bench.Tick{N: i}}})
		}
	})
}

// BenchmarkRequest: Engine.Request with a timeout, then Response.Result;
// the actor answers with Context.Respond.
func BenchmarkRequest(b *testing.B) {
	e := newEngine(b)
	pid := e.SpawnFunc(func(c *actor.Context) {
		if p, ok := c.Message().(bench.Ping); ok {
			c.Respond(p.N)
		}
	}, "echo")
	b.Cleanup(func() { <-e.Poison(pid).Done() })
	bench.Request(b, func(i int) (int, error) {
		v, err := e.Request(pid, bench.Ping{N: i}, bench.RequestTimeout).Result()
		n, _ := v.(int)
		return n, err
	})
}

// BenchmarkBroadcast10k: a loop of Engine.Send over the actors' PIDs
// (hollywood has no broadcast to every actor of an engine).
func BenchmarkBroadcast10k(b *testing.B) {
	bench.Broadcast(b, func(b *testing.B, cd *bench.Countdown) bench.Fanout {
		e := newEngine(b)
		receive := func(c *actor.Context) {
			if _, ok := c.Message().(bench.Tick); ok {
				cd.Handled()
			}
		}
		pids := make([]*actor.PID, bench.BroadcastAgents)
		for i := range pids {
			pids[i] = e.SpawnFunc(receive, "agent", actor.WithID(strconv.Itoa(i)))
		}
		return bench.Fanout{
			Send: func() {
				for _, pid := range pids {
					e.Send(pid, bench.Tick{N: 1})
				}
			},
			Stop: func() error {
				for _, pid := range pids {
					<-e.Poison(pid).Done()
				}
				return nil
			},
		}
	})
}

// idleInbox is the inbox size of the idle actors. Hollywood's default,
// 1,024 slots of 24 bytes allocated up front, would make an idle actor
// 24 KiB and a million of them more than the machine has; an inbox grows
// when full, as agency's does, so a small one changes no behaviour and
// flatters hollywood, not agency.
const idleInbox = 8

// population spawns n actors.
func population(b *testing.B, n int) func() {
	e := newEngine(b)
	receive := func(c *actor.Context) {}
	pids := make([]*actor.PID, n)
	for i := range pids {
		pids[i] = e.SpawnFunc(receive, "agent", actor.WithID(strconv.Itoa(i)), actor.WithInboxSize(idleInbox))
	}
	return func() {
		for _, pid := range pids {
			e.Poison(pid)
		}
	}
}

// BenchmarkIdleAgent: what an idle actor holds.
func BenchmarkIdleAgent(b *testing.B) { bench.IdleAgent(b, population) }

// BenchmarkMillionAgents: a million actors.
func BenchmarkMillionAgents(b *testing.B) { bench.Million(b, population) }
