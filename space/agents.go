package space

import (
	"hash/maphash"
	"iter"

	"github.com/seed72275b23/agency-go/agency/driver"
)

// agentTable is space.Local's agents by id, laid out for the collector.
// A map[string]*driver.Conn holds two pointers per agent (the id's bytes
// and the Conn), in the map's random order: marking a million agents
// chases two million pointers to random places, a cache miss each. Here
// the index from id to place holds no pointer (a hash of the id, and the
// place), and the Conns are in a list, in the order they were added,
// which the collector reads in order, as it reads the agents they point
// to, made in that order too. The list grows by chunks, so that a growing
// space never copies it. Its zero value is not ready: see newAgentTable.
// Guarded by Local.mu, but for seed and mask, which never change: hash is
// called without it.
type agentTable struct {
	seed maphash.Seed
	// mask is and-ed with each hash: all ones, but for the tests that
	// make ids collide.
	mask uint64
	// index maps the hash of an id to the id's place in the list; an id
	// whose hash another id already has goes in others instead.
	index  map[uint64]int32
	others map[string]int32
	// chunks is the list of the agents' Conns, nil where an agent was
	// removed; every chunk but the last is full, chunkLen long.
	chunks [][]*driver.Conn
	free   []int32 // the places in the list that are nil
	n      int32   // the places in the list
}

// chunkLen is the length of a full chunk of the list: 8 KiB of pointers.
const chunkLen = 1024

func newAgentTable() agentTable {
	return agentTable{seed: maphash.MakeSeed(), mask: ^uint64(0), index: make(map[uint64]int32)}
}

// reset removes every agent.
func (t *agentTable) reset() {
	t.index, t.others, t.chunks, t.free, t.n = make(map[uint64]int32), nil, nil, nil, 0
}

// hash returns the hash of id that find, get, insert and remove take.
func (t *agentTable) hash(id string) uint64 {
	return maphash.String(t.seed, id) & t.mask
}

// len returns the number of agents.
func (t *agentTable) len() int { return int(t.n) - len(t.free) }

// at returns the place i of the list.
func (t *agentTable) at(i int32) **driver.Conn {
	return &t.chunks[i/chunkLen][i%chunkLen]
}

// all returns the Conns, in the order of their places.
func (t *agentTable) all() iter.Seq[*driver.Conn] {
	return func(yield func(*driver.Conn) bool) {
		for _, chunk := range t.chunks {
			for _, c := range chunk {
				if c != nil && !yield(c) {
					return
				}
			}
		}
	}
}

// find returns the place of the agent with the given id and hash h.
func (t *agentTable) find(h uint64, id string) (int32, bool) {
	if i, ok := t.index[h]; ok && (*t.at(i)).Agent().ID() == id {
		return i, true
	}
	if len(t.others) > 0 {
		i, ok := t.others[id]
		return i, ok
	}
	return 0, false
}

// get returns the Conn of the agent with the given id and hash h.
func (t *agentTable) get(h uint64, id string) (*driver.Conn, bool) {
	i, ok := t.find(h, id)
	if !ok {
		return nil, false
	}
	return *t.at(i), true
}

// insert adds c, whose agent's id has hash h and is not in the table.
func (t *agentTable) insert(h uint64, c *driver.Conn) {
	var i int32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
		*t.at(i) = c
	} else {
		i = t.n
		t.n++
		last := len(t.chunks) - 1
		if last < 0 || len(t.chunks[last]) == chunkLen {
			// The first chunk grows as a slice does, so that a small
			// space stays small; the others are made full size.
			size := 0
			if last >= 0 {
				size = chunkLen
			}
			t.chunks = append(t.chunks, make([]*driver.Conn, 0, size))
			last++
		}
		t.chunks[last] = append(t.chunks[last], c)
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
func (t *agentTable) remove(h uint64, c *driver.Conn) {
	id := c.Agent().ID()
	i, ok := t.find(h, id)
	if !ok || *t.at(i) != c {
		return
	}
	if j, ok := t.index[h]; ok && j == i {
		delete(t.index, h)
	} else {
		delete(t.others, id)
	}
	*t.at(i) = nil
	if t.len() == 1 {
		// The last one: start again from the front, with the first
		// chunk only.
		clear(t.chunks[1:])
		t.chunks = t.chunks[:1]
		t.chunks[0] = t.chunks[0][:0]
		t.free, t.n = t.free[:0], 0
		return
	}
	t.free = append(t.free, i)
}
