package amqpspace

import (
	"fmt"
	"testing"
)

// A round hands out every node once; after a lost session the node it was
// on comes last in the next round, never first.
func TestRotation(t *testing.T) {
	var nodes []node
	for i := range 3 {
		nodes = append(nodes, node{url: fmt.Sprintf("amqp://n%d/", i)})
	}
	r := newRotation(nodes)
	for range 200 {
		seen := map[string]bool{}
		for range len(nodes) {
			seen[r.next().url] = true
		}
		if len(seen) != len(nodes) {
			t.Fatalf("a round handed out %v, want every node once", seen)
		}
		lostOn := r.next().url // a session on it, then lost
		r.lost()
		if got := r.next().url; got == lostOn {
			t.Fatalf("after losing %s, it is tried first again", lostOn)
		}
		r.lost()
	}
	one := newRotation(nodes[:1])
	one.lost()
	if got := one.next().url; got != nodes[0].url {
		t.Errorf("one node: got %s", got)
	}
}
