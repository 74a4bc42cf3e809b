package amqpspace

import (
	"math/rand/v2"
	"sync"
)

// rotation hands out the broker's addresses for connecting: each in turn
// in a shuffled order, shuffled again once all have had their turn, so
// that the processes of a space spread over a cluster's nodes and a node
// that is down costs one failed attempt in a round. The node a session was
// lost on comes last in the next round, not first.
type rotation struct {
	mu    sync.Mutex
	nodes []node
	order []int // indexes into nodes for this round
	last  int   // index of the node handed out last; -1 before
}

// perm shuffles; tests that place processes on chosen nodes replace it
// (export_test.go).
var perm = rand.Perm

func newRotation(nodes []node) *rotation {
	return &rotation{nodes: nodes, last: -1}
}

// next returns the address to try next.
func (r *rotation) next() node {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) == 0 {
		r.order = perm(len(r.nodes))
		if len(r.order) > 1 && r.order[0] == r.last {
			r.order[0], r.order[len(r.order)-1] = r.order[len(r.order)-1], r.order[0]
		}
	}
	r.last, r.order = r.order[0], r.order[1:]
	return r.nodes[r.last]
}

// lost starts a new round after the node that was handed out last failed
// a session: every other node is tried before it again.
func (r *rotation) lost() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = nil
}

// size is the number of addresses.
func (r *rotation) size() int { return len(r.nodes) }
