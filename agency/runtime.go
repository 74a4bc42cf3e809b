package agency

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Router carries an agent's outgoing messages. A space gives one to each
// agent it adds, through [Connect].
//
// Route must be safe for concurrent use. It returns ErrNoRecipient for a
// point-to-point message when it can tell that no agent has the recipient id,
// and an error when the message may not have been delivered; it should return
// once the message is on its way, never wait for the recipient to act on it.
type Router interface {
	Route(ctx context.Context, m *Message) error
}

// RouterFunc adapts a function to a Router.
type RouterFunc func(ctx context.Context, m *Message) error

// Route calls f.
func (f RouterFunc) Route(ctx context.Context, m *Message) error { return f(ctx, m) }

// Conn is an agent's attachment to a space: the space delivers incoming
// messages to it and closes it when the agent leaves. Only space
// implementations use it.
type Conn struct {
	agent  *Agent
	router Router

	// What an idle agent holds is kept small (the fields are in an order
	// that leaves no padding): no goroutine (one is started when a message
	// arrives to an empty queue, and returns once the queue is empty
	// again), and the channels, the handlers' context and what only
	// Concurrency(n) needs are made when first needed.
	base     atomic.Pointer[baseCtx] // what cancels the handlers' context, made when one waits on it
	mu       sync.Mutex              // guards the fields below, up to mb
	gone     chan struct{}           // closed once the agent has left for good
	pending  *pendingSet             // the Requests waiting for their response
	surveys  map[string]*collector   // survey id → its collector, while Survey runs
	spare    chan answer             // a Request's channel, kept for the next one
	waiting  atomic.Int32            // Requests and Surveys under way
	left     atomic.Bool             // what closing gone says, read without mu
	stopped  bool                    // the handlers' context is cancelled, or will be made so
	finished bool                    // done's state
	taken    atomic.Bool             // on an agent's own Conn (Agent.first): a Connect has taken it

	mb        mailbox
	deliverFn func()      // c.deliver, made once: a method value allocates
	conc      *concurrent // with Concurrency(n), n > 1; made by the delivery goroutine

	closing atomic.Pointer[closing] // made when the agent starts to leave
}

// closing is what taking an agent out needs, made when that starts, so
// that an agent that stays holds none of it.
type closing struct {
	leaveOnce sync.Once
	closeMu   sync.Mutex    // held by the Close under way; later ones wait
	closed    bool          // a Close has run; guarded by closeMu
	err       error         // its error; guarded by closeMu
	done      chan struct{} // closed once the agent has left and may join a space again; guarded by Conn.mu
}

// closer returns the agent's closing, made on first use.
func (c *Conn) closer() *closing {
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

// Connect attaches a to a space whose outgoing side is r. The space calls
// [Conn.Added] once the agent can be reached, which runs its AfterAdd hook
// and then starts its delivery loop (messages that arrive before queue up),
// and [Conn.Close] to take it out again. An agent is in at most one space at
// a time: a second Connect fails with ErrAlreadyAdded.
func Connect(a *Agent, r Router) (*Conn, error) {
	var c *Conn
	if a.first.taken.CompareAndSwap(false, true) {
		// The first Connect has the agent's own Conn, which nobody else
		// can have seen yet.
		c = &a.first
	} else {
		c = new(Conn)
	}
	c.agent, c.router = a, r
	if !a.conn.CompareAndSwap(nil, c) {
		return nil, fmt.Errorf("%w: %q", ErrAlreadyAdded, a.id)
	}
	return c, nil
}

// start lets arrivals start the delivery goroutine, and starts it for the
// messages already queued.
func (c *Conn) start() {
	if c.mb.start() {
		c.spawn()
	}
}

// spawn starts the delivery goroutine. The mailbox lets one caller at a
// time do so (put, start and close hand the turn over under its lock).
func (c *Conn) spawn() {
	if c.deliverFn == nil {
		c.deliverFn = c.deliver
	}
	go c.deliverFn()
}

// concurrent returns what Concurrency(n) needs, made on first use.
func (c *Conn) concurrent() *concurrent {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conc == nil {
		c.conc = &concurrent{sem: make(chan struct{}, c.agent.concurrency)}
	}
	return c.conc
}

// concurrentIfAny returns what Concurrency(n) needs, or nil before it was
// first needed.
func (c *Conn) concurrentIfAny() *concurrent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conc
}

// baseCtx is the context.WithCancel behind the handlers' base context.
type baseCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// handlersContext is the handlers' base context: the Conn itself, seen as
// a context that is cancelled when the agent is gone (see stop). It costs
// nothing until a handler waits on it (Done) or derives a cancellable
// context from it; then a context.WithCancel, made once per agent, backs
// it. Most handlers do neither, and a broadcast to many agents would
// otherwise make one per agent for nothing.
type handlersContext Conn

// baseContext returns the handlers' base context.
func (c *Conn) baseContext() context.Context { return (*handlersContext)(c) }

// cancelable returns the context.WithCancel behind the handlers' context,
// made on first use.
func (c *Conn) cancelable() context.Context {
	if b := c.base.Load(); b != nil {
		return b.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.base.Load()
	if b == nil {
		b = &baseCtx{}
		b.ctx, b.cancel = context.WithCancel(context.Background())
		if c.stopped {
			b.cancel()
		}
		c.base.Store(b)
	}
	return b.ctx
}

func (h *handlersContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (h *handlersContext) Done() <-chan struct{} { return (*Conn)(h).cancelable().Done() }

func (h *handlersContext) Err() error {
	c := (*Conn)(h)
	if b := c.base.Load(); b != nil {
		return b.ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return context.Canceled
	}
	return nil
}

func (h *handlersContext) Value(key any) any {
	if _, internal := key.(*int); internal {
		// The context package finds the cancelCtx to hang a child context
		// (and context.Cause) on under a key of type *int: it must be the
		// one whose Done this context returns.
		return (*Conn)(h).cancelable().Value(key)
	}
	return nil
}

func (h *handlersContext) String() string { return "agency.handlersContext" }

// stop cancels the handlers' context.
func (c *Conn) stop() {
	c.mu.Lock()
	c.stopped = true
	if b := c.base.Load(); b != nil {
		b.cancel()
	}
	c.mu.Unlock()
}

// closedChan is a channel closed from the start.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// goneChan returns a channel closed once the agent has left for good.
func (c *Conn) goneChan() <-chan struct{} {
	if c.left.Load() {
		return closedChan
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left.Load() {
		return closedChan
	}
	if c.gone == nil {
		c.gone = make(chan struct{})
	}
	return c.gone
}

// doneChan returns a channel closed once the agent has left and may join a
// space again.
func (c *Conn) doneChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
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
func (c *Conn) finish() {
	c.stop()
	c.mu.Lock()
	c.left.Store(true)
	if c.gone != nil {
		close(c.gone)
	}
	// A Request still waiting ends now: its answer can no longer come.
	c.pending.drain(func(p pendingRequest) {
		p.ch <- answer{err: removedWhileWaiting(p.from)} // still pending, so nothing was sent on ch
	})
	c.mu.Unlock()
	c.agent.conn.CompareAndSwap(c, nil)
	c.mu.Lock()
	c.finished = true
	if cl := c.closing.Load(); cl != nil && cl.done != nil {
		close(cl.done)
	}
	c.mu.Unlock()
}

// Leaving reports whether the agent has started to leave: [Conn.BeforeRemove]
// or [Conn.Close] has been called. A space that lets an agent's id go only
// after that may send a response to a Conn it remembers while Leaving is
// false: no later Conn with that id exists yet, so none can be waiting for
// the response. Safe for concurrent use.
func (c *Conn) Leaving() bool { return c.closing.Load() != nil }

// Agent returns the connected agent.
func (c *Conn) Agent() *Agent { return c.agent }

// Added runs the agent's AfterAdd hook and then starts handling messages,
// so that the hook and the actions never run at once. The space calls it
// once the agent is reachable, before its Add returns.
func (c *Conn) Added(ctx context.Context) {
	if h := c.agent.hooks.afterAdd; h != nil {
		c.guard("AfterAdd", func() { h.AfterAdd(&actionContext{Context: ctx, conn: c}) })
	}
	c.start()
}

// Deliver hands an incoming message to the agent. It never blocks on the
// agent: the message is queued, or, if it answers one of the agent's
// requests, handed to the waiting Request at once. It returns ErrNoRecipient
// once the agent has stopped taking messages. Safe for concurrent use.
func (c *Conn) Deliver(m *Message) error { return c.DeliverFunc(m, nil) }

// DeliverFunc is Deliver for a space that paces delivery: taken is called
// once the agent has taken m, so that the space can hold m's
// acknowledgement (and, with it, further messages) until then. That is
// when the agent starts handling m; at once, for a message that answers a
// waiting Request or that the agent drops; and earlier than its turn while
// the agent waits for a response (a Request is under way), so that a
// space that holds messages back never holds back the response behind
// them.
// taken runs on any goroutine and must not block for long. When
// DeliverFunc returns an error it does not call taken.
func (c *Conn) DeliverFunc(m *Message, taken func()) error {
	var t *taker
	if taken != nil {
		t = &taker{f: taken}
	}
	a := c.agent
	if m.To == Broadcast && m.From == a.id && !a.ownBroadcasts {
		t.fire()
		return nil
	}
	if m.IsResponse() {
		if c.answer(m) {
			t.fire()
			return nil
		}
		if c.collect(m) {
			t.fire()
			return nil
		}
		if !a.hooks.wantsResponses() {
			c.dropResponse(m)
			t.fire()
			return nil
		}
	}
	ok, run := c.mb.put(item{m: m, taken: t})
	if !ok {
		return c.leavingError()
	}
	if run {
		c.spawn()
	}
	if t != nil && c.waiting.Load() > 0 {
		// The agent waits for a response: hold nothing back meanwhile.
		// (await counts itself before it releases the queue, so that one
		// of the two always sees the other.)
		t.fire()
	}
	return nil
}

// The cold paths of DeliverFunc (see handle).

//go:noinline
func (c *Conn) dropResponse(m *Message) {
	c.agent.logger.Debug("agency: dropping a response nobody waits for", "agent", c.agent.id, "from", m.From, "parent_id", m.ParentID)
}

//go:noinline
func (c *Conn) leavingError() error {
	return fmt.Errorf("%w: %q is leaving the space", ErrNoRecipient, c.agent.id)
}

// taker calls a space's taken function once.
type taker struct {
	done atomic.Bool
	f    func()
}

// fire calls the function unless it has been called; a nil taker does
// nothing.
func (t *taker) fire() {
	if t != nil && t.done.CompareAndSwap(false, true) {
		t.f()
	}
}

// BeforeRemove runs the agent's BeforeRemove hook, once, while the agent
// still takes messages. A space that must do work between the hook and the
// end of intake (a wire space stops new messages at the broker, then drains
// those already on their way) calls it before [Conn.Close]; otherwise Close
// runs it.
func (c *Conn) BeforeRemove(ctx context.Context) {
	c.closer().leaveOnce.Do(func() {
		if h := c.agent.hooks.beforeRemove; h != nil {
			c.guard("BeforeRemove", func() { h.BeforeRemove(&actionContext{Context: ctx, conn: c}) })
		}
	})
}

// Close takes the agent out: it runs the BeforeRemove hook unless
// [Conn.BeforeRemove] has (the hook may run while an action does), stops
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
func (c *Conn) Close(ctx context.Context) error {
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

// closeIdle does what Close does, at once, for an agent that has nothing
// to wait for: no BeforeRemove hook, nothing queued, no delivery goroutine
// and no action running. done is false, and nothing is done, for any
// other agent (or a Close under way, or ctx ended), which Close must
// take out.
func (c *Conn) closeIdle(ctx context.Context) (done bool, err error) {
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

// CloseAll closes every conn, as [Conn.Close] with ctx does, concurrently,
// and returns their errors joined: what a space's Close does with its
// agents. An idle agent with no BeforeRemove hook leaves at once, on the
// caller's goroutine; each of the others is closed on a goroutine of its
// own, so that closing many idle agents starts no goroutine for each.
func CloseAll(ctx context.Context, conns []*Conn) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for _, c := range conns {
		if done, err := c.closeIdle(ctx); done {
			if err != nil {
				fail(err)
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Close(ctx); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// letGo ends the agent's intake for the caller that closed its queue while
// no delivery goroutine ran (mailbox.close returned true). With nothing
// queued and no action running beside (an idle agent), the agent leaves at
// once, on the caller's goroutine: closing many idle agents starts no
// goroutine for each. Otherwise the delivery goroutine is started to
// handle what is left.
func (c *Conn) letGo() {
	c.mb.mu.Lock()
	empty := len(c.mb.queue) == 0
	c.mb.mu.Unlock()
	if empty && c.concurrentIfAny() == nil {
		// Nothing can be queued any more, and no action runs: deliver
		// finds the queue closed and empty, and lets the agent go.
		c.deliver()
		return
	}
	c.spawn()
}

// pendingRequest is a Request waiting for its first response.
type pendingRequest struct {
	id   string      // the request's message id
	from string      // the recipient: only its response answers the request
	ch   chan answer // buffered for exactly one answer
}

// pendingSet is the Requests of an agent waiting for their first
// response, one per request id: a short list for the few an agent has at a
// time (cheaper than a map's hashing, three times per Request), and a map
// while there are many.
type pendingSet struct {
	list []pendingRequest
	byID map[string]pendingRequest
}

// pendingMapAt is the number of waiting Requests from which they are kept
// in the map.
const pendingMapAt = 16

// put adds p, in place of a request with the same id, if any.
func (s *pendingSet) put(p pendingRequest) {
	if s.byID != nil {
		s.byID[p.id] = p
		return
	}
	for i := range s.list {
		if s.list[i].id == p.id {
			s.list[i] = p
			return
		}
	}
	if len(s.list) < pendingMapAt {
		s.list = append(s.list, p)
		return
	}
	s.byID = make(map[string]pendingRequest, 2*pendingMapAt)
	for _, q := range s.list {
		s.byID[q.id] = q
	}
	clear(s.list)
	s.list = s.list[:0]
	s.byID[p.id] = p
}

// take removes the request with the given id and returns its channel,
// unless it was sent to another agent than from, or waits on another
// channel than ch (an empty from, a nil ch: any); nil when none is taken.
// Its frame, and answer's, are kept small: they are the deepest of a
// delivery goroutine that answers a request in process, which starts on a
// small stack (see handle).
func (s *pendingSet) take(id, from string, ch chan answer) chan answer {
	if s == nil {
		return nil
	}
	if s.byID != nil {
		return s.takeMapped(id, from, ch)
	}
	for i := range s.list {
		p := &s.list[i]
		if p.id != id {
			continue
		}
		if (from != "" && p.from != from) || (ch != nil && p.ch != ch) {
			return nil
		}
		got := p.ch
		last := len(s.list) - 1
		s.list[i] = s.list[last]
		s.list[last] = pendingRequest{}
		s.list = s.list[:last]
		return got
	}
	return nil
}

// takeMapped is take while the requests are in the map.
//
//go:noinline
func (s *pendingSet) takeMapped(id, from string, ch chan answer) chan answer {
	p, ok := s.byID[id]
	if !ok || (from != "" && p.from != from) || (ch != nil && p.ch != ch) {
		return nil
	}
	delete(s.byID, id)
	if len(s.byID) == 0 {
		s.byID = nil // back to the list
	}
	return p.ch
}

// drain removes every request, calling f for each.
func (s *pendingSet) drain(f func(pendingRequest)) {
	if s == nil {
		return
	}
	for _, p := range s.list {
		f(p)
	}
	clear(s.list)
	s.list = s.list[:0]
	for _, p := range s.byID {
		f(p)
	}
	s.byID = nil
}

// answer ends a pending Request: its first response, or the error that
// came instead (see FailRequests).
type answer struct {
	m   *Message
	err error
}

// await registers a request id, sent to the agent with id from, whose first
// response the caller will read from the returned channel; or the error
// that ends the wait instead (see FailRequests, and finish: once the agent
// has left the space, at once).
func (c *Conn) await(id, from string) chan answer {
	c.mu.Lock()
	ch := c.spare
	c.spare = nil
	if ch == nil {
		ch = make(chan answer, 1)
	}
	if c.left.Load() {
		// The agent has left: no answer can come (see finish).
		ch <- answer{err: removedWhileWaiting(from)}
		c.mu.Unlock()
		return ch
	}
	if c.pending == nil {
		c.pending = &pendingSet{}
	}
	c.pending.put(pendingRequest{id: id, from: from, ch: ch})
	c.mu.Unlock()
	// The response may come behind messages a space holds back until the
	// agent takes them: take them all now, and all that come until forget.
	c.waiting.Add(1)
	c.releaseHeld()
	return ch
}

// forget removes the request that await registered with ch, unless a later
// request with the same id has taken its place.
func (c *Conn) forget(id string, ch chan answer) {
	c.waiting.Add(-1)
	c.mu.Lock()
	c.pending.take(id, "", ch)
	// Nothing can reach ch any more (answer and FailRequests send under
	// mu, to pending requests): keep it for the next Request, empty.
	select {
	case <-ch:
	default:
	}
	c.spare = ch
	c.mu.Unlock()
}

// removedWhileWaiting is the error of a Request whose agent left the
// space before the answer from the agent with id to came.
//
//go:noinline
func removedWhileWaiting(to string) error {
	return fmt.Errorf("%w: removed while waiting for %q", ErrNotAdded, to)
}

// FailRequests makes every Request of the agent that is waiting for its
// response return err at once. A space calls it when the way those
// responses come has broken (a wire space's connection was lost), rather
// than let each caller wait out its deadline for an answer that may never
// come. Requests made afterwards are not affected. Safe for concurrent use.
func (c *Conn) FailRequests(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending.drain(func(p pendingRequest) {
		p.ch <- answer{err: err} // still pending, so nothing was sent on ch
	})
}

// answer hands the response m to the Request waiting for it, if any: one
// waiting for a response to m.ParentID from the agent m comes from. A
// response from any other agent answers nothing: no agent can slip its own
// answer into another's Request. It sends under mu, so that once forget
// has removed a request nothing more reaches its channel.
func (c *Conn) answer(m *Message) bool {
	if m.ParentID == "" {
		return false
	}
	c.mu.Lock()
	ch := c.pending.take(m.ParentID, m.From, nil)
	if ch != nil {
		ch <- answer{m: m} // buffered for exactly this one answer
	}
	c.mu.Unlock()
	return ch != nil
}

// deliver handles the queue until it is empty, then returns; the mailbox
// starts it again when a message arrives. Only one runs at a time. Once
// the queue is closed and empty, and the actions running beside it have
// returned, the agent has left, and may join a space again.
func (c *Conn) deliver() {
	// Once the queue is empty, a goroutine that has answered a request,
	// or handled more than one message, yields once before it returns, and
	// stays if a message has come meanwhile: a caller that makes one
	// request after another, or a sender in a burst, is served at once
	// instead of starting a goroutine each time. One that handled a single
	// message that takes no answer (a broadcast's) returns at once:
	// yielding there only doubles the scheduler's work for a broadcast to
	// many agents.
	linger, lingered, handled := false, false, 0
	for {
		b, closed := c.mb.take(lingered || !linger)
		if b.last == nil && !closed && linger && !lingered {
			lingered = true
			runtime.Gosched()
			continue
		}
		linger, lingered = false, false
		if b.last == nil {
			if closed {
				if cc := c.concurrentIfAny(); cc != nil {
					cc.workers.Wait()
				}
				c.finish()
			}
			return
		}
		paced := false
		for k := 0; k <= len(b.full); k++ {
			seg := b.last
			if k < len(b.full) {
				seg = b.full[k]
			}
			for i := range seg {
				it := seg[i]
				// A handled message is let go at once, not with the batch: a
				// space that bounds the bytes it holds (amqpspace) counts
				// them free once taken, and a long batch of large messages
				// would otherwise stay in memory behind the new ones.
				seg[i].m = nil // release reads only taken
				paced = paced || it.taken != nil
				if handled++; handled > 1 || (!it.m.NoReply && !it.m.IsResponse()) {
					linger = true
				}
				if c.agent.concurrency <= 1 {
					it.taken.fire()
					c.handle(it.m)
					continue
				}
				c.dispatch(it)
			}
		}
		c.mb.recycle(b, paced)
	}
}

// dispatch runs it beside the delivery goroutine, for an agent with
// Concurrency(n), n > 1, once a slot is free and its Sequence lets it. It
// is a function of its own so that the delivery goroutine's frame stays
// small for the common case (see handle).
//
//go:noinline
func (c *Conn) dispatch(it item) {
	var key string
	cc := c.concurrent()
	if c.agent.sequence != nil && !it.m.IsResponse() {
		if key = c.agent.sequence(it.m); key != "" && cc.seq.park(key, it) {
			return // its turn comes when the one before it ends
		}
	}
	cc.sem <- struct{}{}
	it.taken.fire()
	cc.workers.Add(1)
	go func() {
		defer func() { <-cc.sem; cc.workers.Done() }()
		c.handle(it.m)
		for key != "" {
			next, ok := cc.seq.next(key)
			if !ok {
				break
			}
			next.taken.fire()
			c.handle(next.m)
		}
	}()
}

// handle runs one incoming message to its end.
func (c *Conn) handle(m *Message) {
	// The common path is kept short, and what only some messages need is
	// in functions of its own: the delivery goroutine starts with a small
	// stack for each burst of messages, and a deep frame here would make
	// it grow, and copy, that stack each time.
	a := c.agent
	base := c.baseContext()
	if a.hooks.trace != nil {
		base = c.extractTrace(base, m)
	}
	if !m.Deadline.IsZero() && !m.IsResponse() && time.Until(m.Deadline) <= 0 {
		c.dropExpired(m)
		return
	}
	var ctx context.Context
	if sc := c.sentContext(base, m); sc != nil {
		ctx = sc
	} else {
		// The caller stops waiting at m's deadline: so does the handler.
		ac := newActionContext(base, c, m)
		if ac.dl != nil {
			defer ac.end()
		}
		ctx = ac
	}
	switch m.Action {
	case ResponseAction, ErrorAction, HelpAction:
		c.handleOwn(ctx, m)
		return
	}
	act := a.actions.get(m.Action)
	if act == nil {
		c.noSuchAction(ctx, m)
		return
	}
	var approved func() (any, error) // the handler's call, with the arguments its approver saw
	if act.approve != nil || act.cfg.policy.fn != nil || act.cfg.policy.decide(m) != Permitted {
		var ok bool
		if approved, ok = c.admit(ctx, act, m); !ok {
			return
		}
	}
	if a.hooks.before != nil {
		c.beforeAction(ctx, m)
	}
	value, err := c.run(ctx, act, m, approved)
	if err != nil || a.hooks.after != nil {
		c.afterAction(ctx, m, value, err)
		return
	}
	if !m.NoReply {
		// respond's work, without its frame: answering a Request in
		// process is the deepest the delivery goroutine goes.
		if err := c.reply(ctx, m, ResponseAction, value); err != nil {
			c.responseLost(m, err)
		}
	}
}

// sentContext returns m itself as its handler's context, when it can be
// (see claimContext): it has no deadline, and base is the handlers' own.
func (c *Conn) sentContext(base context.Context, m *Message) *sentContext {
	if !m.sent || !m.Deadline.IsZero() || c.agent.hooks.trace != nil {
		return nil
	}
	return claimContext(c, m)
}

// dropExpired drops m, whose sender has stopped waiting: running it now
// would act for no one (and, queued behind a backlog, long after the
// fact). Nor is there anyone to answer.
//
//go:noinline
func (c *Conn) dropExpired(m *Message) {
	a := c.agent
	a.logger.Debug("agency: dropping a message whose deadline has passed", "agent", a.id, "from", m.From, "action", m.Action, "deadline", m.Deadline)
}

// handleOwn handles the framework's own actions: responses and help.
//
//go:noinline
func (c *Conn) handleOwn(ctx context.Context, m *Message) {
	a := c.agent
	switch m.Action {
	case ResponseAction:
		if h := a.hooks.value; h != nil {
			c.guard("HandleActionValue", func() { h.HandleActionValue(ctx, m) })
		}
	case ErrorAction:
		if h := a.hooks.err; h != nil {
			ae, _ := m.Err().(*ActionError)
			c.guard("HandleActionError", func() { h.HandleActionError(ctx, m, ae) })
		}
	case HelpAction:
		c.answerHelp(ctx, m)
	}
}

// noSuchAction answers a message for an action the agent does not have.
//
//go:noinline
func (c *Conn) noSuchAction(ctx context.Context, m *Message) {
	if m.To != Broadcast {
		c.fail(ctx, m, newActionError(ErrorNotFound, nil,
			"%q has no action %q; send it \"help\" to list the actions it offers", c.agent.id, m.Action))
	}
}

// admit applies act's access policy to m: false when m may not run (its
// sender has been told); otherwise, for an action given Approve whose
// approver was asked, the handler's call with the arguments it saw.
//
//go:noinline
func (c *Conn) admit(ctx context.Context, act *action, m *Message) (approved func() (any, error), ok bool) {
	if access := c.decide(act, m); access == Requested && act.approve != nil {
		run, ae := act.approve(ctx, m)
		if ae != nil {
			c.fail(ctx, m, ae)
			return nil, false
		}
		return run, true
	} else if !c.permitted(ctx, access, m) {
		c.fail(ctx, m, newActionError(ErrorPermissionDenied, nil, "%q not permitted for %q", c.agent.id+"."+m.Action, m.From))
		return nil, false
	}
	return nil, true
}

// beforeAction runs the BeforeAction hook.
//
//go:noinline
func (c *Conn) beforeAction(ctx context.Context, m *Message) {
	h := c.agent.hooks.before
	c.guard("BeforeAction", func() { h.BeforeAction(ctx, m) })
}

// afterAction ends an action that failed, or whose agent has an
// AfterAction hook: it runs the hook and answers m.
//
//go:noinline
func (c *Conn) afterAction(ctx context.Context, m *Message, value any, err error) {
	var ae *ActionError
	if err != nil {
		// AfterAction sees the error the caller receives; it unwraps to the
		// handler's own error.
		ae = asActionError(err)
		if ae.Type == ErrorActionFailed && errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The handler gave up because the caller's deadline passed:
			// that is a timeout, as the caller sees it.
			ae = &ActionError{Type: ErrorTimeout, Text: ae.Text, cause: err}
		}
		err = ae
	}
	if h := c.agent.hooks.after; h != nil {
		c.guard("AfterAction", func() { h.AfterAction(ctx, m, value, err) })
	}
	if ae != nil {
		c.fail(ctx, m, ae)
		return
	}
	c.respond(ctx, m, value)
}

// respond sends an action's value back to m's sender.
func (c *Conn) respond(ctx context.Context, m *Message, value any) {
	if err := c.reply(ctx, m, ResponseAction, value); err != nil {
		c.responseLost(m, err)
	}
}

//go:noinline
func (c *Conn) responseLost(m *Message, err error) {
	c.agent.logger.Warn("agency: response not delivered", "agent", c.agent.id, "to", m.From, "action", m.Action, "error", err)
}

func (c *Conn) permitted(ctx context.Context, access Access, m *Message) bool {
	switch access {
	case Permitted:
		return true
	case Requested:
		h := c.agent.hooks.permission
		if h == nil {
			return false
		}
		ok := false
		c.guard("RequestPermission", func() { ok = h.RequestPermission(ctx, m) })
		return ok
	}
	return false
}

// decide asks the action's policy about m. An AccessFunc that panics
// denies: a policy's bug must neither open the door nor take the agent down.
func (c *Conn) decide(act *action, m *Message) Access {
	if act.cfg.policy.fn == nil {
		return act.cfg.policy.decide(m)
	}
	access := Denied
	c.guard("AccessFunc", func() { access = act.cfg.policy.decide(m) })
	return access
}

// run calls the action's handler (through approved, when its approver has
// decoded the arguments), turning a panic into action_failed.
func (c *Conn) run(ctx context.Context, act *action, m *Message, approved func() (any, error)) (value any, err error) {
	defer func() {
		if p := recover(); p != nil {
			value, err = nil, c.panicked(m, p)
		}
	}()
	if approved != nil {
		return approved()
	}
	return act.run(ctx, m.Args)
}

// panicked logs an action's panic and returns the error its caller gets.
//
//go:noinline
func (c *Conn) panicked(m *Message, p any) error {
	c.agent.logger.Error("agency: action panicked", "agent", c.agent.id, "action", m.Action, "panic", p, "stack", string(debug.Stack()))
	return newActionError(ErrorActionFailed, nil, "%s.%s panicked: %v", c.agent.id, m.Action, p)
}

// guard runs a hook, logging rather than crashing on a panic: a hook's bug
// must not take the agent, or the space, down with it.
func (c *Conn) guard(hook string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			c.agent.logger.Error("agency: hook panicked", "agent", c.agent.id, "hook", hook, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// fail sends ae back to m's sender. The cause stays here: a caller sees the
// same error whether or not the message crossed a wire.
func (c *Conn) fail(ctx context.Context, m *Message, ae *ActionError) {
	if err := c.reply(ctx, m, ErrorAction, ae); err != nil {
		c.agent.logger.Warn("agency: error response not delivered", "agent", c.agent.id, "to", m.From, "action", m.Action, "error", err)
	}
}

// reply sends a [response] or [error] for m back to its sender, unless
// the sender said it takes none.
func (c *Conn) reply(ctx context.Context, m *Message, action string, args any) error {
	if m.NoReply {
		if action == ErrorAction {
			c.noErrorToSender(m, args)
		}
		return nil
	}
	if c.left.Load() { // a handler's context kept past its agent's removal
		return c.leftError()
	}
	if ae, ok := args.(*ActionError); ok {
		// What the caller reads: no cause, and a text of bounded size
		// whatever the handler or the input made of it.
		args = &ActionError{Type: ae.Type, Text: limitErrorText(ae.Text)}
	}
	r := newSentMessage() // the response and its id in one allocation
	r.To, r.From, r.ParentID, r.Action, r.Args = m.From, c.agent.id, m.ID, action, args
	if err := c.router.Route(ctx, r); err != nil {
		return c.replyFailed(m, err)
	}
	return nil
}

// The cold paths of reply, in functions of their own (see handle).

//go:noinline
func (c *Conn) noErrorToSender(m *Message, args any) {
	c.agent.logger.Debug("agency: not sending an error to a sender that takes no responses", "agent", c.agent.id, "to", m.From, "action", m.Action, "error", args)
}

//go:noinline
func (c *Conn) leftError() error {
	return fmt.Errorf("%w: %q has left the space", ErrNotAdded, c.agent.id)
}

//go:noinline
func (c *Conn) replyFailed(m *Message, err error) error {
	if errors.Is(err, ErrNoRecipient) {
		c.agent.logger.Debug("agency: the sender is gone; response dropped", "agent", c.agent.id, "to", m.From)
		return nil
	}
	return err
}

// mailbox is an agent's unbounded queue of incoming messages: a space never
// blocks on a slow agent, and the agent takes what has arrived in one batch.
//
// The queue is a slice, kept for reuse, that grows up to segLen items; a
// longer burst goes on in further segments of segLen, shared through a
// pool by every mailbox, instead of copying what is queued at each
// doubling (while its sender waits on mu).
type mailbox struct {
	mu       sync.Mutex
	queue    []item
	spare    []item
	inflight []item    // the batch the agent is working through (its last segment)
	more     *overflow // segments of a long burst; nil for most agents
	closed   bool
	started  bool         // arrivals start the delivery goroutine
	running  bool         // the delivery goroutine is under way
	held     atomic.Int64 // items queued or in flight whose taker has not fired
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
	if it.taken != nil {
		mb.held.Add(1)
		f := it.taken.f
		it.taken.f = func() { mb.held.Add(-1); f() }
	}
	if len(mb.queue) >= segLen {
		if mb.more == nil {
			mb.more = new(overflow)
		}
		mb.more.queued = append(mb.more.queued, mb.queue)
		mb.queue = segPool.Get().(*[segLen]item)[:0]
	}
	mb.queue = append(mb.queue, it)
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
	if !mb.running && (len(mb.queue) > 0 || mb.closed) {
		mb.running = true
		return true
	}
	return false
}

// take returns all that is queued. When nothing is, it returns an empty
// batch; with last, the delivery goroutine that called it must then
// return (the next arrival starts another, unless closed, when none
// will); without, it stays the delivery goroutine and may take again.
func (mb *mailbox) take(last bool) (b batch, closed bool) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if len(mb.queue) == 0 { // full segments come with a queue behind them
		if !mb.closed && last {
			mb.running = false
		}
		return batch{}, mb.closed
	}
	b = batch{last: mb.queue}
	if mb.more != nil {
		b.full = mb.more.queued
		mb.more.queued, mb.more.inflight = nil, b.full
	}
	mb.queue, mb.spare = mb.spare, nil
	mb.inflight = b.last
	return b, false
}

// recycle gives a handled batch's storage back for reuse. Its messages
// have been let go already; paced says that some items hold takers too.
func (mb *mailbox) recycle(b batch, paced bool) {
	mb.mu.Lock()
	mb.inflight = nil
	if mb.more != nil {
		mb.more.inflight = nil
		if mb.more.queued == nil {
			mb.more = nil // the burst is over
		}
	}
	// Let the takers go (release reads the batch under mu), and a burst's
	// large buffer too.
	if paced {
		clear(b.last)
	}
	if mb.spare == nil && cap(b.last) <= 1024 {
		mb.spare = b.last[:0]
	}
	mb.mu.Unlock()
	for _, seg := range b.full {
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
func (c *Conn) releaseHeld() {
	if c.mb.held.Load() == 0 {
		return
	}
	c.mb.release()
	if cc := c.concurrentIfAny(); cc != nil {
		cc.seq.release()
	}
}

// release fires the taker of every message queued or in flight.
func (mb *mailbox) release() {
	if mb.held.Load() == 0 {
		return // a space that does not pace delivery never pays for this
	}
	mb.mu.Lock()
	var fire []*taker
	each := func(list []item) {
		for i := range list {
			// Only the taker: the loop clears the message meanwhile.
			if t := list[i].taken; t != nil && !t.done.Load() {
				fire = append(fire, t)
			}
		}
	}
	if mb.more != nil {
		for _, seg := range mb.more.inflight {
			each(seg)
		}
	}
	each(mb.inflight)
	if mb.more != nil {
		for _, seg := range mb.more.queued {
			each(seg)
		}
	}
	each(mb.queue)
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
	mb.started = true // a Conn closed before it was added still lets go
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
	if mb.closed || mb.running || len(mb.queue) > 0 {
		return false
	}
	mb.closed, mb.started, mb.running = true, true, true
	return true
}

// discard drops whatever is queued; a pacing space learns that it was
// taken, to go no further.
func (mb *mailbox) discard() {
	mb.mu.Lock()
	dropped := batch{last: mb.queue}
	if mb.more != nil {
		dropped.full, mb.more.queued = mb.more.queued, nil
	}
	mb.queue = nil
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
