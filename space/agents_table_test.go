package space

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// The table against a map, through random adds and removes that grow its
// index past a few doublings and empty it again, with hashes apart, all
// colliding, and one of two: every id in it is found at its Conn, no
// other is, and its list holds exactly its Conns.
func TestAgentTableAgainstMap(t *testing.T) {
	route := driver.RouterFunc(func(context.Context, *agency.Message) error { return nil })
	for _, mask := range []uint64{^uint64(0), 0, 1} {
		t.Run(fmt.Sprintf("mask %#x", mask), func(t *testing.T) {
			n := 3000
			if mask != ^uint64(0) {
				n = 300 // a probe passes every agent: keep it short
			}
			rng := rand.New(rand.NewPCG(1, mask))
			tab := newAgentTable()
			tab.mask = mask
			want := map[string]*driver.Conn{}
			check := func(step int) {
				t.Helper()
				for i := range n {
					id := fmt.Sprintf("t%d", i)
					c, ok := tab.get(tab.hash(id), id)
					if w := want[id]; ok != (w != nil) || c != w {
						t.Fatalf("step %d: get(%s) = %p, %v; want %p", step, id, c, ok, w)
					}
				}
				seen := 0
				for c := range tab.all() {
					if want[c.Agent().ID()] != c {
						t.Fatalf("step %d: the list holds %s, not in the table", step, c.Agent().ID())
					}
					seen++
				}
				if seen != len(want) || tab.len() != len(want) {
					t.Fatalf("step %d: the list holds %d, len %d; want %d", step, seen, tab.len(), len(want))
				}
			}
			for step := range 4 * n {
				id := fmt.Sprintf("t%d", rng.IntN(n))
				h := tab.hash(id)
				// Grow for the first half, then shrink to nothing.
				if c := want[id]; c != nil {
					if step < 2*n && rng.IntN(3) > 0 {
						continue
					}
					tab.remove(h, c)
					delete(want, id)
				} else if step < 2*n {
					c, err := driver.Connect(agency.MustNewAgent(id), route)
					if err != nil {
						t.Fatal(err)
					}
					tab.insert(h, c)
					want[id] = c
				}
				if step%(n/3) == 0 {
					check(step)
				}
			}
			for id, c := range want {
				tab.remove(tab.hash(id), c)
				delete(want, id)
			}
			check(4 * n)
			if tab.n != 0 {
				t.Fatalf("an empty table has %d places", tab.n)
			}
		})
	}
}
