package space

import (
	"hash/maphash"

	"github.com/seed72275b23/agency-go/agency"
)

// agentTable is space.Local's agents by id, laid out for the collector.
// A map[string]*agency.Conn holds two pointers per agent (the id's bytes
// and the Conn), in the map's random order: marking a million agents
// chases two million pointers to random places, a cache miss each. Here
// the index from id to place holds no pointer (a hash of the id, and the
// place), and the Conns are in a list, in the order they were added,
// which the collector reads in order, as it reads the agents they point
// to, made in that order too. Its zero value is not ready: see
// newAgentTable. Guarded by Local.mu, but for seed and mask, which never
// change: hash is called without it.
type agentTable struct {
	seed maphash.Seed
	// mask is and-ed with each hash: all ones, but for the tests that
	// make ids collide.
	mask uint64
	// index maps the hash of an id to the id's place in conns; an id
	// whose hash another id already has goes in others instead.
	index  map[uint64]int32
	others map[string]int32
	conns  []*agency.Conn // the agents' Conns; nil where an agent was removed
	free   []int32        // the places in conns that are nil
}

func newAgentTable() agentTable {
	return agentTable{seed: maphash.MakeSeed(), mask: ^uint64(0), index: make(map[uint64]int32)}
}

// reset removes every agent.
func (t *agentTable) reset() {
	t.index, t.others, t.conns, t.free = make(map[uint64]int32), nil, nil, nil
}

// hash returns the hash of id that find, get, insert and remove take.
func (t *agentTable) hash(id string) uint64 {
	return maphash.String(t.seed, id) & t.mask
}

// len returns the number of agents.
func (t *agentTable) len() int { return len(t.conns) - len(t.free) }

// find returns the place of the agent with the given id and hash h.
func (t *agentTable) find(h uint64, id string) (int32, bool) {
	if i, ok := t.index[h]; ok && t.conns[i].Agent().ID() == id {
		return i, true
	}
	if len(t.others) > 0 {
		i, ok := t.others[id]
		return i, ok
	}
	return 0, false
}

// get returns the Conn of the agent with the given id and hash h.
func (t *agentTable) get(h uint64, id string) (*agency.Conn, bool) {
	i, ok := t.find(h, id)
	if !ok {
		return nil, false
	}
	return t.conns[i], true
}

// insert adds c, whose agent's id has hash h and is not in the table.
func (t *agentTable) insert(h uint64, c *agency.Conn) {
	var i int32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
		t.conns[i] = c
	} else {
		i = int32(len(t.conns))
		t.conns = append(t.conns, c)
	}
	if _, taken := t.index[h]; !taken {
		t.index[h] = i
		return
	}
	if t.others == nil {
		t.others = make(map[string]int32)
	}
	t.others[c.Agent().ID()] = i
}

// remove takes c out, if it is there; h is the hash of its agent's id.
func (t *agentTable) remove(h uint64, c *agency.Conn) {
	id := c.Agent().ID()
	i, ok := t.find(h, id)
	if !ok || t.conns[i] != c {
		return
	}
	if j, ok := t.index[h]; ok && j == i {
		delete(t.index, h)
	} else {
		delete(t.others, id)
	}
	t.conns[i] = nil
	if t.len() == 1 {
		// The last one: start again from the front.
		t.conns, t.free = t.conns[:0], t.free[:0]
		return
	}
	t.free = append(t.free, i)
}
