package space_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
	"github.com/seed72275b23/agency-go/space/spacetest"
)

// The conformance suite holds when the ids' hashes collide: all of them,
// or half of them.
func TestLocalCollidingHashes(t *testing.T) {
	t.Parallel()
	for _, mask := range []uint64{0, 1} {
		t.Run(fmt.Sprintf("mask %d", mask), func(t *testing.T) {
			t.Parallel()
			spacetest.Run(t, func(*testing.T) space.Space { return space.NewLocalColliding(mask) })
		})
	}
}

// Agents added and removed in turns, their places in the table taken
// again, with hashes that collide or not: each id is found while it is in
// the space and only then, Add refuses an id in the space wherever the
// table keeps it, and a broadcast reaches exactly the agents in the space.
func TestLocalTable(t *testing.T) {
	for _, sp := range []struct {
		name string
		new  func() *space.Local
	}{
		{"hashes apart", func() *space.Local { return space.NewLocal() }},
		{"all colliding", func() *space.Local { return space.NewLocalColliding(0) }},
		{"half colliding", func() *space.Local { return space.NewLocalColliding(1) }},
	} {
		t.Run(sp.name, func(t *testing.T) { checkTable(t, sp.new()) })
	}
}

// tableSpace returns sp, closed when the test ends, with an agent named
// sender that does not receive its own broadcasts; add adds an agent and
// records its id in in.
func tableSpace(t *testing.T, sp *space.Local) (sender *agency.Agent, in map[string]bool, add func(id string)) {
	ctx := context.Background()
	t.Cleanup(func() { _ = sp.Close(ctx) })
	sender = agency.MustNewAgent("sender", agency.OwnBroadcasts(false))
	if err := sp.Add(ctx, sender); err != nil {
		t.Fatal(err)
	}
	in = map[string]bool{}
	add = func(id string) {
		t.Helper()
		if err := sp.Add(ctx, agency.MustNewAgent(id)); err != nil {
			t.Fatalf("Add(%s): %v", id, err)
		}
		in[id] = true
	}
	return sender, in, add
}

func checkTable(t *testing.T, sp *space.Local) {
	ctx := context.Background()
	sender, in, add := tableSpace(t, sp)
	remove := func(id string) {
		t.Helper()
		if err := sp.Remove(ctx, id); err != nil {
			t.Fatalf("Remove(%s): %v", id, err)
		}
		delete(in, id)
	}
	check := func(step string) {
		t.Helper()
		for i := range 12 {
			id := fmt.Sprintf("a%d", i)
			_, err := sender.Request(callCtx(t), id, agency.HelpAction, nil)
			switch {
			case in[id] && err != nil:
				t.Fatalf("%s: %s in the space, but a request to it: %v", step, id, err)
			case !in[id] && !errors.Is(err, agency.ErrNoRecipient):
				t.Fatalf("%s: %s not in the space, a request to it: %v, want ErrNoRecipient", step, id, err)
			}
			if in[id] {
				if err := sp.Add(ctx, agency.MustNewAgent(id)); !errors.Is(err, space.ErrAgentExists) {
					t.Fatalf("%s: Add of %s again: %v, want ErrAgentExists", step, id, err)
				}
			} else if err := sp.Remove(ctx, id); !errors.Is(err, space.ErrUnknownAgent) {
				t.Fatalf("%s: Remove of absent %s: %v, want ErrUnknownAgent", step, id, err)
			}
		}
		var want []string
		for id := range in {
			want = append(want, id)
		}
		got := broadcastReach(t, sender)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: a broadcast reached %v, want %v", step, got, want)
		}
	}
	for i := range 8 {
		add(fmt.Sprintf("a%d", i))
	}
	check("added 8")
	for _, i := range []int{0, 3, 7} { // the first, one between, the last
		remove(fmt.Sprintf("a%d", i))
	}
	check("removed 3")
	for _, i := range []int{8, 0, 9, 10} { // the free places taken again, then new ones
		add(fmt.Sprintf("a%d", i))
	}
	check("added 4")
	for id := range in {
		remove(id)
	}
	check("removed all")
	for _, i := range []int{11, 2, 5} {
		add(fmt.Sprintf("a%d", i))
	}
	check("added after all were gone")
}

// broadcastReach returns the sorted ids of the agents a broadcast from
// sender reaches: those that answer its Survey, which in space.Local waits
// for every agent RouteBroadcast says it reached.
func broadcastReach(t *testing.T, sender *agency.Agent) []string {
	t.Helper()
	answers, err := agency.Survey(callCtx(t), sender)
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Collect(maps.Keys(answers))
	slices.Sort(ids)
	return ids
}

// callCtx is a context whose deadline only guards against a hang.
func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A space of more agents than a chunk of the table's list holds, some of
// them removed and their places taken again, then all of them removed and
// a few added: every agent in the space is reached, and only those.
func TestLocalTableChunks(t *testing.T) {
	ctx := context.Background()
	sp := space.NewLocal()
	sender, in, add := tableSpace(t, sp)
	const n = 2500 // two full chunks and part of a third
	check := func(step string) {
		t.Helper()
		for i := range n + 10 {
			id := fmt.Sprintf("b%d", i)
			_, err := sender.Request(callCtx(t), id, agency.HelpAction, nil)
			if in[id] != (err == nil) {
				t.Fatalf("%s: %s in the space: %v, a request to it: %v", step, id, in[id], err)
			}
		}
		if got := broadcastReach(t, sender); len(got) != len(in) {
			t.Fatalf("%s: a broadcast reached %d agents, want %d", step, len(got), len(in))
		}
	}
	for i := range n {
		add(fmt.Sprintf("b%d", i))
	}
	check("added")
	for i := 0; i < n; i += 7 {
		id := fmt.Sprintf("b%d", i)
		if err := sp.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
		delete(in, id)
	}
	check("some removed")
	for i := n; i < n+10; i++ {
		add(fmt.Sprintf("b%d", i))
	}
	check("places taken again")
	for id := range in {
		if err := sp.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
		delete(in, id)
	}
	check("all but the sender removed")
	// The sender too: the table is empty, and starts again from the front.
	if err := sp.Remove(ctx, "sender"); err != nil {
		t.Fatal(err)
	}
	if err := sp.Add(ctx, sender); err != nil {
		t.Fatal(err)
	}
	check("all removed")
	for _, i := range []int{3, 1500, 2400} {
		add(fmt.Sprintf("b%d", i))
	}
	check("added again")
}
