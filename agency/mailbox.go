package agency

import (
	"sync"
	"sync/atomic"
)

// mailbox is an agent's unbounded queue of incoming messages: a space never
// blocks on a slow agent, and the agent takes what has arrived in one batch.
//
// The queue is a slice, kept for reuse, that grows up to segLen items; a
// longer burst goes on in further segments of segLen, shared through a
// pool by every mailbox, instead of copying what is queued at each
// doubling (while its sender waits on mu).
//
// The slices are in queues, made by the first message: an agent that
// never gets one holds only the lock, the pointer and the flags (24
// bytes).
type mailbox struct {
	mu      sync.Mutex
	q       atomic.Pointer[queues] // made by the first put, under mu, and never unmade; read without mu for held
	closed  bool
	started bool // arrivals start the delivery goroutine
	running bool // the delivery goroutine is under way
	// connFlags are the flags of the conn whose mailbox this is (see
	// conn.is), kept here, in the room the mailbox's own leave, so that
	// an idle agent stays in its size class. The mailbox's own are plain,
	// guarded by mu: delivery sets and clears running without an atomic
	// instruction.
	connFlags atomic.Uint32
}

// queues is what a mailbox holds of its messages, once one has come.
type queues struct {
	queue    []item
	spare    []item
	inflight []item    // the batch the agent is working through (its last segment)
	more     *overflow // segments of a long burst; nil for most agents
	// first is the room of the first queue, made with the rest: the
	// first message costs one allocation, as when the queue was in the
	// mailbox itself.
	first [1]item
	// deliverFn is conn.deliver, made once (a method value allocates)
	// by the first caller given the delivery turn, which put has made
	// the queues for; written by whoever has the turn.
	deliverFn func()
	held      atomic.Int64 // items queued or in flight whose taker has not fired
}

// queues returns the mailbox's queues, made on first use; mu is held.
func (mb *mailbox) queues() *queues {
	q := mb.q.Load()
	if q == nil {
		q = new(queues)
		q.queue = q.first[:0]
		mb.q.Store(q)
	}
	return q
}

// queued returns the number of items queued and not yet taken but those
// in full segments; mu is held.
func (mb *mailbox) queued() int {
	if q := mb.q.Load(); q != nil {
		return len(q.queue)
	}
	return 0
}

// item is a queued message and, from a space that paces delivery, what to
// tell it when the agent takes the message.
type item struct {
	m     *Message
	taken *taker
}

// overflow is what a mailbox holds of a burst longer than segLen.
type overflow struct {
	queued   [][]item // full segments, oldest first, ahead of the queue
	inflight [][]item // those of the batch the agent is working through
}

// batch is what the delivery goroutine takes in one go: the full segments,
// oldest first, then last.
type batch struct {
	full [][]item
	last []item
}

// segLen is the length of a queue segment: 4 KiB of items.
const segLen = 256

var segPool = sync.Pool{New: func() any { return new([segLen]item) }}

// put queues it; false once the mailbox is closed. run reports that the
// caller must start the delivery goroutine.
func (mb *mailbox) put(it item) (ok, run bool) {
	mb.mu.Lock()
	if mb.closed {
		mb.mu.Unlock()
		return false, false
	}
	q := mb.queues()
	if it.taken != nil {
		q.held.Add(1)
		f := it.taken.f
		it.taken.f = func() { q.held.Add(-1); f() }
	}
	if len(q.queue) >= segLen {
		if q.more == nil {
			q.more = new(overflow)
		}
		q.more.queued = append(q.more.queued, q.queue)
		q.queue = segPool.Get().(*[segLen]item)[:0]
	}
	q.queue = append(q.queue, it)
	run = mb.started && !mb.running
	mb.running = mb.running || run
	mb.mu.Unlock()
	return true, run
}

// start lets arrivals start the delivery goroutine; true when the caller
// must start it now, for what has come already.
func (mb *mailbox) start() bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.started {
		return false
	}
	mb.started = true
	if !mb.running && (mb.queued() > 0 || mb.closed) {
		mb.running = true
		return true
	}
	return false
}

// take returns all that is queued, after giving back the storage of done,
// the batch the caller has handled (its messages let go already; paced
// says that some of its items hold takers too): one turn of the lock for
// both. When nothing is queued, it returns an empty batch; with last, the
// delivery goroutine that called it must then return (the next arrival
// starts another, unless closed, when none will); without, it stays the
// delivery goroutine and may take again.
func (mb *mailbox) take(last bool, done batch, paced bool) (b batch, closed bool) {
	mb.mu.Lock()
	if done.last != nil {
		mb.recycleLocked(done, paced)
	}
	if mb.queued() == 0 { // full segments come with a queue behind them
		if !mb.closed && last {
			mb.running = false
		}
		closed = mb.closed
	} else {
		q := mb.q.Load()
		b = batch{last: q.queue}
		if q.more != nil {
			b.full = q.more.queued
			q.more.queued, q.more.inflight = nil, b.full
		}
		q.queue, q.spare = q.spare, nil
		q.inflight = b.last
	}
	mb.mu.Unlock()
	if done.full != nil {
		recycleSegments(done.full, paced)
	}
	return b, closed
}

// recycleLocked takes back a handled batch's last segment for reuse, and
// lets the takers of its items go; mu is held.
func (mb *mailbox) recycleLocked(b batch, paced bool) {
	q := mb.q.Load() // there since the batch was taken
	q.inflight = nil
	if q.more != nil {
		q.more.inflight = nil
		if q.more.queued == nil {
			q.more = nil // the burst is over
		}
	}
	// Let the takers go (release reads the batch under mu), and a burst's
	// large buffer too.
	if paced {
		clear(b.last)
	}
	if q.spare == nil && cap(b.last) <= 1024 {
		q.spare = b.last[:0]
	}
}

// recycleSegments gives a handled batch's full segments back to the pool.
func recycleSegments(full [][]item, paced bool) {
	for _, seg := range full {
		if paced {
			clear(seg)
		}
		if cap(seg) == segLen {
			segPool.Put((*[segLen]item)(seg[:segLen]))
		}
	}
}

// releaseHeld fires the takers of every message the agent holds but has
// not started: queued, in the batch under way, or waiting behind an
// earlier message of its Sequence.
func (c *conn) releaseHeld() {
	if !c.mb.holds() {
		return
	}
	c.mb.release()
	if cc := c.concurrentIfAny(); cc != nil {
		cc.seq.release()
	}
}

// holds reports whether some item queued or in flight has a taker that
// has not fired.
func (mb *mailbox) holds() bool {
	q := mb.q.Load()
	return q != nil && q.held.Load() != 0
}

// release fires the taker of every message queued or in flight.
func (mb *mailbox) release() {
	if !mb.holds() {
		return // a space that does not pace delivery never pays for this
	}
	mb.mu.Lock()
	q := mb.q.Load() // made by the put that counted the first held item
	var fire []*taker
	each := func(list []item) {
		for i := range list {
			// Only the taker: the loop clears the message meanwhile.
			if t := list[i].taken; t != nil && !t.done.Load() {
				fire = append(fire, t)
			}
		}
	}
	if q.more != nil {
		for _, seg := range q.more.inflight {
			each(seg)
		}
	}
	each(q.inflight)
	if q.more != nil {
		for _, seg := range q.more.queued {
			each(seg)
		}
	}
	each(q.queue)
	mb.mu.Unlock()
	for _, t := range fire {
		t.fire()
	}
}

// close stops intake; the delivery goroutine handles what is queued, then
// lets the agent go. true when the caller must start that goroutine.
func (mb *mailbox) close() bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.closed = true
	mb.started = true // a conn closed before it was added still lets go
	if mb.running {
		return false
	}
	mb.running = true
	return true
}

// closeIdle closes the mailbox, and gives the caller the delivery turn,
// when nothing is queued and no delivery goroutine runs; otherwise it does
// nothing and returns false.
func (mb *mailbox) closeIdle() bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.closed || mb.running || mb.queued() > 0 {
		return false
	}
	mb.closed, mb.started, mb.running = true, true, true
	return true
}

// discard drops whatever is queued; a pacing space learns that it was
// taken, to go no further.
func (mb *mailbox) discard() {
	mb.mu.Lock()
	var dropped batch
	if q := mb.q.Load(); q != nil {
		dropped.last = q.queue
		if q.more != nil {
			dropped.full, q.more.queued = q.more.queued, nil
		}
		q.queue = nil
	}
	mb.mu.Unlock()
	for _, seg := range dropped.full {
		for _, it := range seg {
			it.taken.fire()
		}
	}
	for _, it := range dropped.last {
		it.taken.fire()
	}
}

// depth returns the number of messages queued and not yet taken.
func (mb *mailbox) depth() int {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	n := mb.queued()
	if q := mb.q.Load(); q != nil && q.more != nil {
		for _, seg := range q.more.queued {
			n += len(seg)
		}
	}
	return n
}
