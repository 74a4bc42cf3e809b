package space

import (
	"hash/maphash"
	"iter"

	"github.com/seed72275b23/agency-go/agency/driver"
)

// agentTable is space.Local's agents by id, laid out for the collector
// and kept small: 16 to 20 bytes an agent, by how full its index is.
//
// A map[string]*driver.Conn holds two pointers per agent (the id's bytes
// and the Conn), in the map's random order: marking a million agents
// chases two million pointers to random places, a cache miss each. Here
// the Conns are in a list, in the order they were added, which the
// collector reads in order, as it reads the agents they point to, made in
// that order too; the list grows by chunks, so that a growing space never
// copies it. The index from id to place holds no pointer: it is an
// open-addressed table (linear probing) of 32-bit slots, each the place
// plus one in its low bits (0: empty) and, above them, some bits of the
// id's hash as a tag, so that a lookup reads an agent's id (through the
// list) only where the tag matches. Ids whose hashes collide, even all of
// them, are told apart by their ids. Its zero value is not ready: see
// newAgentTable. Guarded by Local.mu, but for seed and mask, which never
// change: hash is called without it.
type agentTable struct {
	seed maphash.Seed
	// mask is and-ed with each hash: all ones, but for the tests that
	// make ids collide.
	mask uint64
	// index has a power of two slots, at most three quarters of them
	// taken; a slot's low bits (as many as index's length has, less
	// one) hold a place plus one, which n keeps under that bound.
	index []uint32
	// chunks is the list of the agents' Conns, nil where an agent was
	// removed; every chunk but the last is full, chunkLen long.
	chunks [][]*driver.Conn
	free   []int32 // the places in the list that are nil
	n      int32   // the places in the list
}

// chunkLen is the length of a full chunk of the list: 8 KiB of pointers.
const chunkLen = 1024

// minIndex is the number of slots of an empty space's index.
const minIndex = 8

func newAgentTable() agentTable {
	return agentTable{seed: maphash.MakeSeed(), mask: ^uint64(0), index: make([]uint32, minIndex)}
}

// reset removes every agent.
func (t *agentTable) reset() {
	t.index, t.chunks, t.free, t.n = make([]uint32, minIndex), nil, nil, 0
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

// low returns the mask of a slot's place bits, which is also that of a
// hash's home slot.
func (t *agentTable) low() uint32 { return uint32(len(t.index) - 1) }

// tag returns the tag that h's slots have above their place bits: bits
// of h's upper half, the home slot being taken from its lower half.
func (t *agentTable) tag(h uint64) uint32 { return uint32(h>>32) &^ t.low() }

// lookup returns the slot of the agent with the given id and hash h, or
// the empty slot where its probe ended.
func (t *agentTable) lookup(h uint64, id string) (slot uint32, found bool) {
	low, tag := t.low(), t.tag(h)
	for j := uint32(h) & low; ; j = (j + 1) & low {
		e := t.index[j]
		if e == 0 {
			return j, false
		}
		if e&^low == tag && (*t.at(int32(e&low) - 1)).Agent().ID() == id {
			return j, true
		}
	}
}

// find returns the place of the agent with the given id and hash h.
func (t *agentTable) find(h uint64, id string) (int32, bool) {
	j, ok := t.lookup(h, id)
	if !ok {
		return 0, false
	}
	return int32(t.index[j]&t.low()) - 1, true
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
		if int(t.n+1)*4 > len(t.index)*3 {
			t.grow()
		}
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
	t.place(h, i)
}

// place puts the place i, of an agent whose id has hash h, in the index.
func (t *agentTable) place(h uint64, i int32) {
	low := t.low()
	j := uint32(h) & low
	for t.index[j] != 0 {
		j = (j + 1) & low
	}
	t.index[j] = t.tag(h) | uint32(i+1)
}

// grow doubles the index, reading each agent's id through the list, in
// the list's order, to hash it again.
func (t *agentTable) grow() {
	t.index = make([]uint32, 2*len(t.index))
	for i := range t.n {
		if c := *t.at(i); c != nil {
			t.place(t.hash(c.Agent().ID()), i)
		}
	}
}

// remove takes c out, if it is there; h is the hash of its agent's id.
func (t *agentTable) remove(h uint64, c *driver.Conn) {
	j, ok := t.lookup(h, c.Agent().ID())
	low := t.low()
	if !ok {
		return
	}
	i := int32(t.index[j]&low) - 1
	if *t.at(i) != c {
		return
	}
	// Empty j, and move back into the gap each later slot of the run
	// that its probe passes through j to reach (its home is not in
	// (j, k], cyclically), so that no probe stops short of its slot.
	t.index[j] = 0
	for k := (j + 1) & low; t.index[k] != 0; k = (k + 1) & low {
		e := t.index[k]
		home := uint32(t.hash((*t.at(int32(e&low) - 1)).Agent().ID())) & low
		if (k-home)&low >= (k-j)&low {
			t.index[j], t.index[k] = e, 0
			j = k
		}
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
