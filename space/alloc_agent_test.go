//go:build !race

package space_test

import (
	"context"
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
