//go:build !race

package space_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Allocation budgets of an agent's life in space.Local, as
// bench's population makes one: MustNewAgent and one Handle,
// Add, and the Remove of the idle agent. The ids are made beforehand, and
// the space's table has room for the agents (its growth, shared by all the
// agents, is not counted). A change that needs more allocations breaks
// this test; one that needs fewer should lower the budget with it.
const (
	budgetNewAgent   = 1 // MustNewAgent and one Handle, without options: the agent holds its first action and Conn
	budgetAdd        = 1 // Add of an agent with one action: its router
	budgetRemoveIdle = 1 // Remove of an idle agent: no goroutine is started
)

func TestAllocsPerAgent(t *testing.T) {
	const runs = 1000 // AllocsPerRun calls each function once more
	ctx := context.Background()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(ctx) })
	handler := func(context.Context, tickArgs) (struct{}, error) { return struct{}{}, nil }

	ids := make([]string, runs+1)
	agents := make([]*agency.Agent, runs+1)
	for i := range ids {
		ids[i] = "agent-" + strconv.Itoa(i)
	}
	// Room in the table for all of them.
	for _, id := range ids {
		if err := sp.Add(ctx, agency.MustNewAgent(id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if err := sp.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	var i int
	cases := []struct {
		name   string
		budget float64
		run    func()
	}{
		{"new agent", budgetNewAgent, func() {
			agents[i] = agency.MustNewAgent(ids[i])
			agency.Handle(agents[i], "tick", handler)
			i++
		}},
		{"add", budgetAdd, func() {
			if err := sp.Add(ctx, agents[i]); err != nil {
				t.Fatal(err)
			}
			i++
		}},
		{"remove idle", budgetRemoveIdle, func() {
			if err := sp.Remove(ctx, ids[i]); err != nil {
				t.Fatal(err)
			}
			i++
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			i = 0
			got := testing.AllocsPerRun(runs, c.run)
			t.Logf("%.0f allocations (budget %.0f)", got, c.budget)
			if got > c.budget {
				t.Errorf("%.0f allocations, over the budget of %.0f", got, c.budget)
			}
		})
	}
}

// budgetIdleBytes is what an idle agent with one action holds in
// space.Local, its id aside: the agent with its action and connection in
// place (160 bytes), its router (32) and its place in the space's table
// (about 15 bytes at the number of agents measured here). With an id of
// 16 bytes, bench's IdleAgent (100,000 agents) comes to about 228 bytes,
// under the 256 wanted; a million agents to under 256 MiB resident.
const budgetIdleBytes = 216

// TestBytesPerIdleAgent holds the live heap of agents added to
// space.Local and never sent a message to its budget, measured over many
// agents so that the space's table counts what it costs an agent.
func TestBytesPerIdleAgent(t *testing.T) {
	const n = 20000
	ctx := context.Background()
	handler := func(context.Context, tickArgs) (struct{}, error) { return struct{}{}, nil }
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "agent-" + strconv.Itoa(i)
	}
	live := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := live()
	sp := space.NewLocal()
	for _, id := range ids {
		a := agency.MustNewAgent(id)
		agency.Handle(a, "tick", handler)
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// HeapAlloc counts what other goroutines of the test binary hold too:
	// over this many agents, a few KiB of theirs is a fraction of a byte.
	perAgent := float64(int64(live())-int64(before)) / n
	runtime.KeepAlive(ids)
	t.Logf("%.1f bytes an idle agent (budget %d)", perAgent, budgetIdleBytes)
	if perAgent > budgetIdleBytes {
		t.Errorf("%.1f bytes an idle agent, over the budget of %d", perAgent, budgetIdleBytes)
	}
	if err := sp.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
