package agency

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of a stream (see [Agent.Stream] and [Emit]).
var (
	// ErrStreamGap is the error of a stream in which a part is missing: a
	// part came with a number past the next one, or the answer counts more
	// parts than came. The parts before the gap have been yielded; none
	// after it is.
	ErrStreamGap = errors.New("agency: a part of the stream is missing")
	// ErrStreamOverflow is the error of a stream whose caller fell behind:
	// its buffer of parts not yet read was full when another came. The
	// parts in the buffer are yielded first; the handler is told to stop.
	ErrStreamOverflow = errors.New("agency: stream buffer full: the caller fell behind")
	// ErrStreamClosed is returned by Emit once the caller has stopped
	// reading the stream, or the action has answered.
	ErrStreamClosed = errors.New("agency: the stream is closed")
)

// DefaultStreamBuffer is how many parts a stream holds for its caller
// that the caller has not read yet, unless told otherwise with
// [StreamBuffer].
const DefaultStreamBuffer = 1024

// StreamOption configures one [Agent.Stream].
type StreamOption func(*streamConfig)

type streamConfig struct {
	buffer   int
	sent     func(error)
	noCancel bool // StreamCancel(false)
}

// StreamBuffer sets how many parts the stream holds that the caller has not
// read yet (at least 1). When a part comes to a full buffer the stream
// fails with ErrStreamOverflow, once the parts before it are read, and the
// handler is told to stop: a caller that falls behind never makes the
// process hold an unbounded backlog, nor silently loses parts.
func StreamBuffer(n int) StreamOption {
	return func(c *streamConfig) { c.buffer = max(n, 1) }
}

// StreamSent has f called once, when the stream's request has gone to the
// space: with nil once the space has taken it, or with the error it was
// refused with (an error matching ErrNoRecipient for an absent
// recipient), which the loop then yields as well. f runs on the loop's
// goroutine before anything is yielded, and must not block for long. It
// lets code that sends on someone's behalf (an outbox relay) tell that
// the request has left while the loop goes on waiting for the answer.
func StreamSent(f func(err error)) StreamOption {
	return func(c *streamConfig) { c.sent = f }
}

// StreamCancel(false) makes stopping the loop early leave the responder
// alone: no [cancel] is sent, its action runs on, and its answer, which
// nobody waits for then, goes to the caller's ValueHandler or ErrorHandler
// as the answer to a Send does. It is for a caller that listens in on a
// request that must run whatever becomes of the listener (a step an
// outbox relay sends, whose sender may leave and come back). Parts that
// come after the loop has stopped are still answered with a [cancel], as
// for any stream nobody reads. Default true: stopping tells the responder
// to stop.
func StreamCancel(on bool) StreamOption {
	return func(c *streamConfig) { c.noCancel = !on }
}

// Emit sends part, a value that encodes to JSON, to the caller of the action
// ctx is handling, as a [part] of its answer, before the answer. Only a
// caller that asked for parts ([Agent.Stream]) gets any: for any other,
// Emit sends nothing and returns nil, so an action may emit whoever calls it,
// and a caller that asked for none (Request, Call, Send, an agent of another
// library) sees no difference. The parts reach the caller in the order they
// were emitted, numbered from 1, before the answer.
//
// Emit returns once the part is on its way (in amqpspace, once the broker
// has confirmed it). It returns an error matching ErrStreamClosed once the
// caller has stopped reading (it stopped its loop, its context ended, or it
// fell behind; the action's context is then cancelled as well) or the
// action has answered. A part over the space's size limit is not sent:
// Emit returns an error matching ErrMessageTooLarge at once, and the stream
// goes on with the next part, numbered without a gap. Emit is safe for
// concurrent use by the goroutines of one action; their parts are numbered
// in the order they go out.
func Emit(ctx context.Context, part any) error {
	h := fromContext(ctx)
	if h.conn == nil || h.msg == nil || h.msg.IsResponse() {
		return errNoAction
	}
	if !h.msg.Stream || h.msg.NoReply {
		return nil
	}
	em := h.conn.emitterOf(h.msg)
	if em == nil {
		return nil // a message handled outside an action (a hook's)
	}
	return em.emit(ctx, h.conn, part)
}

// streams is what an agent keeps for its streams, made when the first
// starts (in its pendingSet), guarded by conn.mu.
type streams struct {
	serving []*emitter // the streams of the actions running now
	stray   [8]string  // the streams whose stray parts were answered with [cancel], most recent last
	next    int

	// withdrawn are the requests a [cancel] named that were not being
	// handled when it came: queued, most likely, and then not run (see
	// serve); or answered already. Keys as stray's, at most maxWithdrawn,
	// the oldest forgotten first.
	withdrawn     map[string]struct{}
	withdrawnRing []string
	withdrawnNext int
}

// maxWithdrawn bounds the [cancel]s an agent remembers for requests it was
// not handling: a queued request whose [cancel] is followed by that many
// others before its turn comes runs after all, with a context that is not
// cancelled.
const maxWithdrawn = 256

// emitter is the sending side of one stream: an action that handles a
// request asking for parts.
type emitter struct {
	msg      *Message
	cancel   context.CancelFunc // the action's context
	stopping atomic.Bool        // a [cancel] came: set without mu, which a part on its way holds

	mu     sync.Mutex // held while a part is routed, so that parts go out in order
	seq    uint32     // the parts sent so far
	closed error      // why no more parts may go: the caller stopped, or the action answered
}

// serve returns the context for m's handler, which asks for parts: it is
// cancelled when the caller stops reading; end unregisters the stream. It
// returns ok false, and no context, when the caller stopped before m's
// handling started (a [cancel] came while m was queued): m is not to be
// handled.
func (c *conn) serve(base context.Context, m *Message) (ctx *actionContext, end func(), ok bool) {
	cctx, cancel := context.WithCancel(base)
	em := &emitter{msg: m, cancel: cancel}
	c.mu.Lock()
	st := c.streamsLocked()
	if len(st.withdrawn) > 0 {
		k := m.From + "\x00" + m.ID
		if _, gone := st.withdrawn[k]; gone {
			delete(st.withdrawn, k)
			c.mu.Unlock()
			cancel()
			return nil, nil, false
		}
	}
	st.serving = append(st.serving, em)
	c.mu.Unlock()
	ctx = newActionContext(cctx, c, m)
	return ctx, func() {
		ctx.end()
		c.mu.Lock()
		s := st.serving
		for i, e := range s {
			if e == em {
				last := len(s) - 1
				s[i], s[last] = s[last], nil
				st.serving = s[:last]
				break
			}
		}
		c.mu.Unlock()
		em.close(ErrStreamClosed)
		cancel()
	}, true
}

// emitterOf returns the emitter of the stream m's handler serves, or nil.
func (c *conn) emitterOf(m *Message) *emitter {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pendingLocked()
	if p == nil || p.streams == nil {
		return nil
	}
	for _, em := range p.streams.serving {
		if em.msg == m {
			return em
		}
	}
	return nil
}

// emit sends one part.
func (em *emitter) emit(ctx context.Context, c *conn, part any) error {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.closed == nil && em.stopping.Load() {
		em.closed = fmt.Errorf("%w: %q stopped reading", ErrStreamClosed, em.msg.From)
	}
	if em.closed != nil {
		return em.closed
	}
	m := em.msg
	p := newMessage()
	p.To, p.From, p.ParentID, p.Action, p.Args, p.Seq = m.From, c.agent.id, m.ID, PartAction, part, em.seq+1
	if err := p.check(true); err != nil {
		return err
	}
	if err := c.router.Route(ctx, p); err != nil {
		if em.stopping.Load() {
			// The caller stopped while the part was on its way, and the
			// cancelled context cut the wait short.
			em.closed = fmt.Errorf("%w: %q stopped reading (%w)", ErrStreamClosed, m.From, err)
			return em.closed
		}
		if errors.Is(err, ErrNoRecipient) {
			// The caller is gone: nobody reads the stream any more.
			em.closed = fmt.Errorf("%w: %q is gone", ErrStreamClosed, m.From)
			em.cancel()
			return em.closed
		}
		return err
	}
	em.seq++
	return nil
}

// close stops the stream with err, unless it is stopped, and returns how
// many parts it sent.
func (em *emitter) close(err error) uint32 {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.closed == nil {
		em.closed = err
	}
	return em.seq
}

// answered closes the stream of m's handler, which answers now, and
// returns how many parts went before the answer: the answer's Seq, by
// which its caller tells that none is missing.
//
//go:noinline
func (c *conn) answered(m *Message) uint32 {
	em := c.emitterOf(m)
	if em == nil {
		return 0
	}
	return em.close(fmt.Errorf("%w: %s.%s has answered", ErrStreamClosed, c.agent.id, m.Action))
}

// cancelled stops the stream a [cancel] names: that of the action handling
// the request m.ParentID from m.From. Its context is cancelled. A request
// not being handled is noted as withdrawn: if it waits in the queue, it
// is dropped when its turn comes (see serve). A [cancel] is never
// answered.
//
//go:noinline
func (c *conn) cancelled(m *Message) {
	if m.ParentID == "" {
		return
	}
	var em *emitter
	c.mu.Lock()
	if p := c.pendingLocked(); p != nil && p.streams != nil {
		for _, e := range p.streams.serving {
			if e.msg.ID == m.ParentID && e.msg.From == m.From {
				em = e
				break
			}
		}
	}
	if em == nil {
		// Queued, answered already, or never asked: only the first
		// matters, and only serve can tell.
		if !c.hasLeft() {
			c.streamsLocked().withdraw(m.From + "\x00" + m.ParentID)
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	// Not under em.mu: this runs on the goroutine that delivers the
	// agent's messages, which must not wait for a part on its way.
	em.stopping.Store(true)
	em.cancel()
}

// stream is the receiving side of one stream: the parts that came and
// the caller has not read yet, at most limit of them.
type stream struct {
	mu    sync.Mutex
	q     []*Message // q[head:] are unread
	head  int
	next  uint32 // the number of the next part
	limit int
	err   error // the stream has failed: nothing after it is read
	seen  bool  // a part came: the responder speaks streams, and may be told to stop
	wake  chan struct{}
}

// put takes in a part that came, or fails the stream.
func (s *stream) put(p *Message) {
	s.mu.Lock()
	s.seen = true
	switch {
	case s.err != nil:
	case p.Seq < s.next: // a part redelivered: it came already
	case p.Seq > s.next:
		s.err = fmt.Errorf("%w: part %d of the answer from %q came after part %d", ErrStreamGap, p.Seq, p.From, s.next-1)
	case len(s.q)-s.head >= s.limit:
		s.err = fmt.Errorf("%w: %d parts unread (StreamBuffer)", ErrStreamOverflow, s.limit)
	default:
		if s.head > 0 && len(s.q) == cap(s.q) {
			n := copy(s.q, s.q[s.head:])
			clear(s.q[n:])
			s.q, s.head = s.q[:n], 0
		}
		s.q = append(s.q, p)
		s.next++
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the next unread part, or, when there is none, the error
// the stream has failed with (nil while it goes on).
func (s *stream) take() (*Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head < len(s.q) {
		p := s.q[s.head]
		s.q[s.head] = nil
		if s.head++; s.head == len(s.q) {
			s.q, s.head = s.q[:0], 0
		}
		return p, nil
	}
	return nil, s.err
}

// part hands a [part] to the stream waiting for it. A part that no stream
// waits for is answered with a [cancel] (once per stream): its caller has
// stopped reading, perhaps before the first part came.
//
//go:noinline
func (c *conn) part(m *Message) {
	c.mu.Lock()
	p, ok := c.pendingLocked().find(m.ParentID, m.From)
	if !ok || p.st == nil {
		stray := c.strayLocked(m)
		c.mu.Unlock()
		if stray {
			go c.sendCancel(m.From, m.ParentID)
		}
		return
	}
	st := p.st
	c.mu.Unlock()
	st.put(m)
}

// withdraw notes that the caller of the request k names stopped reading
// its stream before the request was handled.
func (st *streams) withdraw(k string) {
	if st.withdrawn == nil {
		st.withdrawn = make(map[string]struct{})
	}
	if _, ok := st.withdrawn[k]; ok {
		return
	}
	if len(st.withdrawnRing) < maxWithdrawn {
		st.withdrawnRing = append(st.withdrawnRing, k)
	} else {
		delete(st.withdrawn, st.withdrawnRing[st.withdrawnNext]) // gone already, if its request has come
		st.withdrawnRing[st.withdrawnNext] = k
		st.withdrawnNext = (st.withdrawnNext + 1) % maxWithdrawn
	}
	st.withdrawn[k] = struct{}{}
}

// strayLocked reports whether m is the first stray part of its stream seen
// lately, and notes it.
func (c *conn) strayLocked(m *Message) bool {
	if c.hasLeft() {
		return false
	}
	st := c.streamsLocked()
	k := m.From + "\x00" + m.ParentID
	for _, s := range st.stray {
		if s == k {
			return false
		}
	}
	st.stray[st.next] = k
	st.next = (st.next + 1) % len(st.stray)
	return true
}

// streamsLocked returns the agent's streams, made on first use; c.mu is
// held.
func (c *conn) streamsLocked() *streams {
	p := &c.extraLocked().pending
	if p.streams == nil {
		p.streams = new(streams)
	}
	return p.streams
}

// cancelTimeout bounds the sending of a [cancel].
const cancelTimeout = 5 * time.Second

// sendCancel tells the agent to that the caller of request id has stopped
// reading its stream.
func (c *conn) sendCancel(to, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	m := newMessage()
	m.To, m.From, m.ParentID, m.Action, m.NoReply = to, c.agent.id, id, CancelAction, true
	if err := c.router.Route(ctx, m); err != nil && !errors.Is(err, ErrNoRecipient) {
		c.agent.logger.Debug("agency: [cancel] not delivered", "agent", c.agent.id, "to", to, "parent_id", id, "error", err)
	}
}

// recipientWatcher is a driver.RecipientWatcher.
type recipientWatcher interface {
	WatchRecipient(ctx context.Context, id string) <-chan error
}

// nativeRouter is a driver.NativeRouter.
type nativeRouter interface {
	Native(id string) bool
}

// native reports whether the agent with id speaks agency-go's wire, as
// the agent's space tells (see driver.NativeRouter).
func (c *conn) native(id string) bool {
	n, ok := c.router.(nativeRouter)
	return ok && n.Native(id)
}

// Stream sends the action to the agent with id to, as [Agent.Request]
// does, asking for the parts of its answer as they are made (see [Emit]),
// and returns them, then the answer: each part is yielded as a
// message whose Action is PartAction (its value read with [Value], its
// number in Seq), then the [response] message, or an error. Nothing
// follows an error: an [error] answer (as an *ActionError), a timeout or
// the context's error as for Request, ErrStreamGap when a part is
// missing, ErrStreamOverflow when the caller fell behind (see
// [StreamBuffer]), or the space's own (a wire space may tell that the
// responder's process is gone).
//
// Stopping early (a break out of the loop, or the context's end) tells
// the responder to stop with a [cancel] message: its action's context is
// cancelled, and its Emit fails; if its action has not started yet (the
// request waits in its queue), the action does not run. The [cancel] goes
// at once where the space vouches that the responder is an agency-go
// agent (space.Local; amqpspace unless it shares its exchange with agents
// of another library: see driver.NativeRouter); elsewhere it goes only
// once a part has come, or when the first part comes after the stop, so
// that an agent of another library is never sent one; such a responder
// that sends no part runs until its deadline. The request is sent when
// the loop starts, once per loop.
//
//	for m, err := range a.Stream(ctx, "Writer", "write", args) {
//		if err != nil {
//			return err
//		}
//		text, _ := agency.Value[string](m)
//		fmt.Print(text) // the parts as they come, then the answer
//	}
func (a *Agent) Stream(ctx context.Context, to, action string, args any, opts ...StreamOption) iter.Seq2[*Message, error] {
	return func(yield func(*Message, error) bool) {
		m := newMessage()
		m.To, m.Action, m.Args = to, action, args
		a.stream(ctx, m, opts, yield)
	}
}

// StreamMessage is Stream with the whole message in the caller's hands; see
// SendMessage. The iterator sends m itself, so it is for one loop.
func (a *Agent) StreamMessage(ctx context.Context, m *Message, opts ...StreamOption) iter.Seq2[*Message, error] {
	return func(yield func(*Message, error) bool) {
		a.stream(ctx, m, opts, yield)
	}
}

func (a *Agent) stream(ctx context.Context, m *Message, opts []StreamOption, yield func(*Message, error) bool) {
	cfg := streamConfig{buffer: DefaultStreamBuffer}
	for _, o := range opts {
		o(&cfg)
	}
	sent := func(err error) {
		if cfg.sent != nil {
			cfg.sent(err)
			cfg.sent = nil
		}
	}
	if m.To == Broadcast {
		err := fmt.Errorf("%w: a stream needs one recipient, not a broadcast", ErrMalformedMessage)
		sent(err)
		yield(nil, err)
		return
	}
	if dl, ok := ctx.Deadline(); ok && m.Deadline.IsZero() {
		m.Deadline = dl
	}
	m.NoReply, m.Stream = false, true
	c, err := a.prepare(m)
	if err != nil {
		sent(err)
		yield(nil, err)
		return
	}
	if a.hooks.send != nil {
		// A stream is a request to the observer, whose outcome is what
		// the loop ends with.
		var done func(error)
		ctx, done = a.observeSend(ctx, m, true)
		var outcome error
		next := yield
		yield = func(r *Message, err error) bool {
			if err != nil {
				outcome = err
			}
			return next(r, err)
		}
		defer func() { done(outcome) }()
	}
	a.carryTrace(ctx, m)
	if ctx.Err() != nil {
		err := requestError(ctx, m.To, m.Action)
		sent(err)
		yield(nil, err)
		return
	}
	st := &stream{next: 1, limit: cfg.buffer, wake: make(chan struct{}, 1)}
	ch := c.await(m.ID, m.To, st)
	defer c.forget(m.ID, ch)
	if err := c.router.Route(ctx, m); err != nil {
		if ctx.Err() != nil {
			err = requestError(ctx, m.To, m.Action)
			if c.native(m.To) && !cfg.noCancel {
				// The context ended while the space made sure of the
				// request (in amqpspace, waiting for the broker's
				// confirm): it may have gone out all the same.
				c.sendCancel(m.To, m.ID)
			}
		}
		sent(err)
		yield(nil, err)
		return
	}
	sent(nil)
	answered := false
	defer func() {
		if answered || cfg.noCancel {
			return
		}
		st.mu.Lock()
		seen := st.seen
		st.mu.Unlock()
		if seen || c.native(m.To) {
			// The responder speaks streams (a part came, or its space
			// vouches that it speaks agency-go's wire): tell it now. One
			// that may be of another library and has sent no part yet is
			// told by its first (see part); one that sends none is not
			// told, and stops at the deadline.
			c.sendCancel(m.To, m.ID)
		}
	}()
	var gone <-chan error
	if w, ok := c.router.(recipientWatcher); ok {
		wctx, stop := context.WithCancel(ctx)
		watch := w.WatchRecipient(wctx, m.To)
		gone = watch
		defer func() {
			stop()
			for range watch { // closed once the watch has ended
			}
		}()
	}
	for {
		p, err := st.take()
		if p != nil {
			if !yield(p, nil) {
				return
			}
			continue
		}
		if err != nil {
			yield(nil, err)
			return
		}
		select {
		case <-st.wake:
		case r := <-ch:
			for { // the parts that came before the answer
				p, err := st.take()
				if err != nil {
					yield(nil, err)
					return
				}
				if p == nil {
					break
				}
				if !yield(p, nil) {
					return
				}
			}
			answered = r.err == nil
			switch {
			case expired(ctx):
				yield(nil, requestError(ctx, m.To, m.Action))
			case r.err != nil:
				yield(nil, r.err)
			case r.m.Seq != st.next-1:
				yield(nil, fmt.Errorf("%w: the answer from %q counts %d parts, %d came", ErrStreamGap, m.To, r.m.Seq, st.next-1))
			case r.m.Err() != nil:
				yield(nil, r.m.Err())
			default:
				yield(r.m, nil)
			}
			return
		case <-ctx.Done():
			yield(nil, requestError(ctx, m.To, m.Action))
			return
		case err, ok := <-gone:
			if !ok {
				gone = nil
				continue
			}
			yield(nil, err)
			return
		}
	}
}

// streamMessage takes a [part] or a [cancel] in at once, wherever the
// agent is: neither waits behind its queue.
//
//go:noinline
func (c *conn) streamMessage(m *Message) {
	if m.Action == PartAction {
		c.part(m)
		return
	}
	c.cancelled(m)
}
