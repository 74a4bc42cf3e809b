package agency

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/seed72275b23/agency-go/agency/internal/driverlink"
)

// conn is an agent's attachment to a space: the space delivers incoming
// messages to it and closes it when the agent leaves. Spaces reach it
// through package driver (driver.Conn wraps it), which is why its methods
// that a space calls are exported: the type itself is not, so only driver
// can hand one out.
type conn struct {
	agent  *Agent
	router router

	// What an idle agent holds is kept small (72 bytes, in an order
	// that leaves no padding): no goroutine (one is started when a
	// message arrives to an empty queue, and returns once the queue is
	// empty again), and the queue, the channels, the handlers' context,
	// the Requests and what only Concurrency(n) needs are made when first
	// needed. The conn's flags are in its mailbox (see is).
	extra   atomic.Pointer[extra]   // made under mu when first needed, then kept; read without mu for base and waiting
	closing atomic.Pointer[closing] // made when the agent starts to leave
	mu      sync.Mutex              // guards extra's fields (but base and waiting), and stopped and finished
	mb      mailbox
}

// The conn's flags, in mailbox.connFlags. taken and left are read
// without mu; stopped and finished are written and read under mu.
const (
	stateTaken    = 1 << iota // on an agent's own conn (Agent.first): a connect has taken it
	stateLeft                 // what closing gone says
	stateStopped              // the handlers' context is cancelled, or will be made so
	stateFinished             // done's state
)

// is reports whether the flag f is set.
func (c *conn) is(f uint32) bool { return c.mb.connFlags.Load()&f != 0 }

// set sets the flag f.
func (c *conn) set(f uint32) { c.mb.connFlags.Or(f) }

// hasLeft reports whether the agent has left for good (see finish).
func (c *conn) hasLeft() bool { return c.is(stateLeft) }

// extra is what only some agents need: those that make Requests or
// Surveys, serve streams, run several actions at once or whose handlers
// wait on their context. Guarded by conn.mu, but for base and waiting.
type extra struct {
	base    atomic.Pointer[baseCtx] // what cancels the handlers' context, made when one waits on it
	waiting atomic.Int32            // Requests and Surveys under way
	gone    chan struct{}           // closed once the agent has left for good
	pending pendingSet              // the Requests waiting for their response
	surveys map[string]*collector   // survey id → its collector, while Survey runs
	spare   chan answer             // a Request's channel, kept for the next one
	conc    *concurrent             // with Concurrency(n), n > 1; made by the delivery goroutine
}

// extraLocked returns the agent's extra, made on first use; c.mu is held.
func (c *conn) extraLocked() *extra {
	x := c.extra.Load()
	if x == nil {
		x = new(extra)
		c.extra.Store(x)
	}
	return x
}

// pendingLocked returns the Requests waiting for their response, or nil
// (an empty set) before the first; c.mu is held.
func (c *conn) pendingLocked() *pendingSet {
	if x := c.extra.Load(); x != nil {
		return &x.pending
	}
	return nil
}

// closing is what taking an agent out needs, made when that starts, so
// that an agent that stays holds none of it.
type closing struct {
	leaveOnce sync.Once
	closeMu   sync.Mutex    // held by the Close under way; later ones wait
	closed    bool          // a Close has run; guarded by closeMu
	err       error         // its error; guarded by closeMu
	done      chan struct{} // closed once the agent has left and may join a space again; guarded by conn.mu
}

// closer returns the agent's closing, made on first use.
func (c *conn) closer() *closing {
	if cl := c.closing.Load(); cl != nil {
		return cl
	}
	c.closing.CompareAndSwap(nil, new(closing))
	return c.closing.Load()
}

// concurrent is what an agent that runs several actions at once needs.
type concurrent struct {
	seq     sequencer      // messages behind an earlier one of their Sequence
	sem     chan struct{}  // a slot per running action
	workers sync.WaitGroup // actions running beside the delivery goroutine
}

// connect attaches a to a space whose outgoing side is r: driver.Connect.
// An agent is in at most one space at a time: a second connect fails with
// ErrAlreadyAdded.
func connect(a *Agent, r router) (*conn, error) {
	var c *conn
	if a.first.take() {
		// The first connect has the agent's own conn, which nobody else
		// can have seen yet.
		c = &a.first
	} else {
		c = new(conn)
	}
	c.agent, c.router = a, r
	if !a.conn.CompareAndSwap(nil, c) {
		return nil, fmt.Errorf("%w: %q", ErrAlreadyAdded, a.id)
	}
	return c, nil
}

// take takes an agent's own conn for its first connect: false when one
// has taken it already.
func (c *conn) take() bool {
	for {
		old := c.mb.connFlags.Load()
		if old&stateTaken != 0 {
			return false
		}
		if c.mb.connFlags.CompareAndSwap(old, old|stateTaken) {
			return true
		}
	}
}

// start lets arrivals start the delivery goroutine, and starts it for the
// messages already queued.
func (c *conn) start() {
	if c.mb.start() {
		c.spawn()
	}
}

// spawn starts the delivery goroutine. The mailbox lets one caller at a
// time do so (put, start and close hand the turn over under its lock).
func (c *conn) spawn() {
	// The queues are there: a caller is given the turn for a message
	// queued (which made them, under the lock that gave the turn), or for
	// actions run beside (for messages that came).
	q := c.mb.q.Load()
	if q == nil {
		go c.deliver() // not reached, by the above; were it, a goroutine costs an allocation more
		return
	}
	if q.deliverFn == nil {
		q.deliverFn = c.deliver
	}
	go q.deliverFn()
}

// concurrent returns what Concurrency(n) needs, made on first use.
func (c *conn) concurrent() *concurrent {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.extraLocked()
	if x.conc == nil {
		x.conc = &concurrent{sem: make(chan struct{}, c.agent.concurrency)}
	}
	return x.conc
}

// concurrentIfAny returns what Concurrency(n) needs, or nil before it was
// first needed.
func (c *conn) concurrentIfAny() *concurrent {
	if c.extra.Load() == nil {
		return nil // made under mu, but never unmade: no need to wait for it
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.extra.Load().conc
}

// closedChan is a channel closed from the start.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// goneChan returns a channel closed once the agent has left for good.
func (c *conn) goneChan() <-chan struct{} {
	if c.hasLeft() {
		return closedChan
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hasLeft() {
		return closedChan
	}
	x := c.extraLocked()
	if x.gone == nil {
		x.gone = make(chan struct{})
	}
	return x.gone
}

// doneChan returns a channel closed once the agent has left and may join a
// space again.
func (c *conn) doneChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.is(stateFinished) {
		return closedChan
	}
	cl := c.closer()
	if cl.done == nil {
		cl.done = make(chan struct{})
	}
	return cl.done
}

// finish lets the agent go, once its queue is closed and empty and its
// actions have returned.
func (c *conn) finish() {
	c.stop()
	c.mu.Lock()
	c.set(stateLeft)
	if x := c.extra.Load(); x != nil && x.gone != nil {
		close(x.gone)
	}
	// A Request still waiting ends now: its answer can no longer come.
	c.pendingLocked().drain(func(p pendingRequest) {
		p.ch <- answer{err: removedWhileWaiting(p.from)} // still pending, so nothing was sent on ch
	})
	c.mu.Unlock()
	c.agent.conn.CompareAndSwap(c, nil)
	c.mu.Lock()
	c.set(stateFinished)
	if cl := c.closing.Load(); cl != nil && cl.done != nil {
		close(cl.done)
	}
	c.mu.Unlock()
}

// Leaving reports whether the agent has started to leave: conn.BeforeRemove
// or conn.Close has been called. A space that lets an agent's id go only
// after that may send a response to a conn it remembers while Leaving is
// false: no later conn with that id exists yet, so none can be waiting for
// the response. Safe for concurrent use.
func (c *conn) Leaving() bool { return c.closing.Load() != nil }

// Agent returns the connected agent.
func (c *conn) Agent() *Agent { return c.agent }

// Added runs the agent's AfterAdd hook and then starts handling messages,
// so that the hook and the actions never run at once. The space calls it
// once the agent is reachable, before its Add returns.
func (c *conn) Added(ctx context.Context) {
	if h := c.agent.hooks.afterAdd; h != nil {
		c.guard("AfterAdd", func() { h.AfterAdd(&actionContext{Context: ctx, conn: c}) })
	}
	c.start()
}

// BeforeRemove runs the agent's BeforeRemove hook, once, while the agent
// still takes messages. A space that must do work between the hook and the
// end of intake (a wire space stops new messages at the broker, then drains
// those already on their way) calls it before conn.Close; otherwise Close
// runs it.
func (c *conn) BeforeRemove(ctx context.Context) {
	c.closer().leaveOnce.Do(func() {
		if h := c.agent.hooks.beforeRemove; h != nil {
			c.guard("BeforeRemove", func() { h.BeforeRemove(&actionContext{Context: ctx, conn: c}) })
		}
	})
}

// Close takes the agent out: it runs the BeforeRemove hook unless
// conn.BeforeRemove has (the hook may run while an action does), stops
// taking messages, handles those already
// queued, and waits for running actions. When ctx ends first, the actions'
// context is cancelled, the queue is dropped and ctx's error returned; the
// agent stays in use, and cannot join another space, until its running
// action returns.
//
// Called with the context of one of the agent's own actions (an agent
// removing itself), Close cannot wait for that action: it stops intake and
// returns, and the agent leaves once its running actions and queue are done.
// Close is idempotent.
func (c *conn) Close(ctx context.Context) error {
	cl := c.closer()
	cl.closeMu.Lock()
	defer cl.closeMu.Unlock()
	if cl.closed {
		return cl.err
	}
	cl.closed = true
	c.BeforeRemove(ctx)
	if c.mb.close() {
		c.letGo() // an idle agent still has to let go
	}
	if ac := fromContext(ctx); ac.conn == c && ac.msg != nil {
		return nil // from inside an action: waiting would wait for ourselves
	}
	select {
	case <-c.doneChan():
	case <-ctx.Done():
		cl.err = ctx.Err()
		c.stop()
		c.mb.discard()
	}
	return cl.err
}

// CloseIdle does what Close does, at once, for an agent that has nothing
// to wait for: no BeforeRemove hook, nothing queued, no delivery goroutine
// and no action running. done is false, and nothing is done, for any
// other agent (or a Close under way, or ctx ended), which Close must
// take out.
func (c *conn) CloseIdle(ctx context.Context) (done bool, err error) {
	if c.agent.hooks.beforeRemove != nil || ctx.Err() != nil || c.concurrentIfAny() != nil {
		return false, nil
	}
	cl := c.closer()
	if !cl.closeMu.TryLock() {
		return false, nil
	}
	defer cl.closeMu.Unlock()
	if cl.closed {
		return true, cl.err
	}
	if !c.mb.closeIdle() {
		return false, nil
	}
	// The delivery turn is ours, and nothing can be queued any more.
	if c.concurrentIfAny() != nil {
		// A delivery goroutine came and went meanwhile, and its actions
		// may still run: the next one waits for them; Close waits for it.
		c.spawn()
		return false, nil
	}
	cl.closed = true
	c.BeforeRemove(ctx) // no hook to run: only so that none runs later
	c.deliver()         // finds the queue closed and empty, and lets the agent go
	return true, nil
}

// letGo ends the agent's intake for the caller that closed its queue while
// no delivery goroutine ran (mailbox.close returned true). With nothing
// queued and no action running beside (an idle agent), the agent leaves at
// once, on the caller's goroutine: closing many idle agents starts no
// goroutine for each. Otherwise the delivery goroutine is started to
// handle what is left.
func (c *conn) letGo() {
	c.mb.mu.Lock()
	empty := c.mb.queued() == 0
	c.mb.mu.Unlock()
	if empty && c.concurrentIfAny() == nil {
		// Nothing can be queued any more, and no action runs: deliver
		// finds the queue closed and empty, and lets the agent go.
		c.deliver()
		return
	}
	c.spawn()
}

func init() {
	driverlink.Connect = func(a, r any) (any, error) {
		c, err := connect(a.(*Agent), r.(router))
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}
