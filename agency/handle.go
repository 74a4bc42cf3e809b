package agency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/seed72275b23/agency-go/internal/stack"
)

// Deliver hands an incoming message to the agent. It never blocks on the
// agent: the message is queued, or, if it answers one of the agent's
// requests, handed to the waiting Request at once. It returns ErrNoRecipient
// once the agent has stopped taking messages. Safe for concurrent use.
func (c *conn) Deliver(m *Message) error { return c.DeliverFunc(m, nil) }

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
func (c *conn) DeliverFunc(m *Message, taken func()) error {
	var t *taker
	if taken != nil {
		t = &taker{f: taken}
	}
	a := c.agent
	if m.To == Broadcast && m.From == a.id && !a.ownBroadcasts {
		t.fire()
		return nil
	}
	if m.Action == PartAction || m.Action == CancelAction {
		c.streamMessage(m)
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
	if !m.IsResponse() && c.claimable(m) {
		claimContext(c, m)
	}
	ok, run := c.mb.put(item{m: m, taken: t})
	if !ok {
		return c.leavingError()
	}
	if run {
		c.spawn()
	}
	if t != nil && c.waitingNow() {
		// The agent waits for a response: hold nothing back meanwhile.
		// (await counts itself before it releases the queue, so that one
		// of the two always sees the other.)
		t.fire()
	}
	return nil
}

// waitingNow reports whether a Request or Survey of the agent is under
// way.
func (c *conn) waitingNow() bool {
	x := c.extra.Load()
	return x != nil && x.waiting.Load() > 0
}

// The cold paths of DeliverFunc (see handle).

//go:noinline
func (c *conn) dropResponse(m *Message) {
	c.agent.logger.Debug("agency: dropping a response nobody waits for", "agent", c.agent.id, "from", m.From, "parent_id", m.ParentID)
}

//go:noinline
func (c *conn) leavingError() error {
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

// deliver handles the queue until it is empty, then returns; the mailbox
// starts it again when a message arrives. Only one runs at a time. Once
// the queue is closed and empty, and the actions running beside it have
// returned, the agent has left, and may join a space again.
func (c *conn) deliver() {
	// Once the queue is empty, a goroutine that has answered a request,
	// or handled more than one message, yields once before it returns, and
	// stays if a message has come meanwhile: a caller that makes one
	// request after another, or a sender in a burst, is served at once
	// instead of starting a goroutine each time. One that handled a single
	// message that takes no answer (a broadcast's) returns at once:
	// yielding there only doubles the scheduler's work for a broadcast to
	// many agents.
	linger, lingered, handled := false, false, 0
	grown := false // see fromWire
	var done batch // the batch handled last, whose storage the next take gives back
	paced := false
	for {
		b, closed := c.mb.take(lingered || !linger, done, paced)
		done, paced = batch{}, false
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
				if !grown && fromWire(it.m) {
					stack.Grow16K() // before fire, which may acknowledge it over the wire
					grown = true
				}
				if c.agent.concurrency <= 1 {
					it.taken.fire()
					c.handle(it.m)
					continue
				}
				c.dispatch(it)
			}
		}
		done = b
	}
}

// dispatch runs it beside the delivery goroutine, for an agent with
// Concurrency(n), n > 1, once a slot is free and its Sequence lets it. It
// is a function of its own so that the delivery goroutine's frame stays
// small for the common case (see handle).
//
//go:noinline
func (c *conn) dispatch(it item) {
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
		if fromWire(it.m) {
			stack.Grow16K()
		}
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
func (c *conn) handle(m *Message) {
	// The common path is kept short, and what only some messages need is
	// in functions of its own: the delivery goroutine starts with a small
	// stack for each burst of messages, and a deep frame here would make
	// it grow, and copy, that stack each time.
	a := c.agent
	base := c.baseContext()
	if a.hooks.trace != nil {
		base = c.extractTrace(base, m)
	}
	if a.hooks.handle != nil && !m.IsResponse() {
		var o *observed
		base, o = c.observeHandle(base, m)
		defer o.end()
	}
	if !m.Deadline.IsZero() && !m.IsResponse() && time.Until(m.Deadline) <= 0 {
		c.dropExpired(base, m)
		return
	}
	var ctx context.Context
	if m.Stream {
		ac, end, ok := c.serve(base, m)
		if !ok {
			c.dropWithdrawn(base, m)
			return
		}
		defer end()
		ctx = ac
	} else if sc := c.sentContext(m); sc != nil {
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
	if act.cfg.approve != nil || act.cfg.policy.fn != nil || act.cfg.policy.decide(m) != Permitted {
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

// sentContext returns m itself as its handler's context, when it was
// claimed for c on delivery (see claimable).
func (c *conn) sentContext(m *Message) *sentContext {
	if m.handler != c {
		return nil
	}
	return (*sentContext)(unsafe.Pointer(m))
}

// claimable reports whether m, an action's message, may be its own handler
// context at c: it has no deadline and asks for no parts (which need a
// context of their own), and c's handlers' context is its base, unchanged
// by trace or handle hooks.
func (c *conn) claimable(m *Message) bool {
	return m.Deadline.IsZero() && !m.Stream && c.agent.hooks.trace == nil && c.agent.hooks.handle == nil
}

// dropExpired drops m, whose sender has stopped waiting: running it now
// would act for no one (and, queued behind a backlog, long after the
// fact). Nor is there anyone to answer.
//
//go:noinline
func (c *conn) dropExpired(ctx context.Context, m *Message) {
	a := c.agent
	if a.hooks.handle != nil {
		noteOutcome(ctx, &ActionError{Type: TypeTimeout, Text: "the deadline passed before the message was handled"})
	}
	a.logger.Debug("agency: dropping a message whose deadline has passed", "agent", a.id, "from", m.From, "action", m.Action, "deadline", m.Deadline)
}

// dropWithdrawn drops m, whose caller stopped reading its stream before
// its turn came: running it now would act for no one.
//
//go:noinline
func (c *conn) dropWithdrawn(ctx context.Context, m *Message) {
	a := c.agent
	if a.hooks.handle != nil {
		noteOutcome(ctx, &ActionError{Type: TypeActionFailed, Text: "cancelled: the caller stopped reading the stream before the action started"})
	}
	a.logger.Debug("agency: dropping a request whose caller stopped reading its stream before it was handled", "agent", a.id, "from", m.From, "action", m.Action)
}

// handleOwn handles the framework's own actions: responses and help.
//
//go:noinline
func (c *conn) handleOwn(ctx context.Context, m *Message) {
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
func (c *conn) noSuchAction(ctx context.Context, m *Message) {
	if m.To != Broadcast {
		c.fail(ctx, m, newActionError(TypeNotFound, nil,
			"%q has no action %q; send it \"help\" to list the actions it offers", c.agent.id, m.Action))
	}
}

// admit applies act's access policy to m: false when m may not run (its
// sender has been told); otherwise, for an action given Approve whose
// approver was asked, the handler's call with the arguments it saw.
//
//go:noinline
func (c *conn) admit(ctx context.Context, act *action, m *Message) (approved func() (any, error), ok bool) {
	if access := c.decide(act, m); access == Requested && act.cfg.approve != nil {
		run, ae := act.cfg.approve(ctx, m)
		if ae != nil {
			c.fail(ctx, m, ae)
			return nil, false
		}
		return run, true
	} else if !c.permitted(ctx, access, m) {
		c.fail(ctx, m, newActionError(TypePermissionDenied, nil, "%q not permitted for %q", c.agent.id+"."+m.Action, m.From))
		return nil, false
	}
	return nil, true
}

// beforeAction runs the BeforeAction hook.
//
//go:noinline
func (c *conn) beforeAction(ctx context.Context, m *Message) {
	h := c.agent.hooks.before
	c.guard("BeforeAction", func() { h.BeforeAction(ctx, m) })
}

// afterAction ends an action that failed, or whose agent has an
// AfterAction hook: it runs the hook and answers m.
//
//go:noinline
func (c *conn) afterAction(ctx context.Context, m *Message, value any, err error) {
	var ae *ActionError
	if err != nil {
		// AfterAction sees the error the caller receives; it unwraps to the
		// handler's own error.
		ae = asActionError(err)
		if ae.Type == TypeActionFailed && errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The handler gave up because the caller's deadline passed:
			// that is a timeout, as the caller sees it.
			ae = &ActionError{Type: TypeTimeout, Text: ae.Text, cause: err}
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
func (c *conn) respond(ctx context.Context, m *Message, value any) {
	if err := c.reply(ctx, m, ResponseAction, value); err != nil {
		c.responseLost(m, err)
	}
}

//go:noinline
func (c *conn) responseLost(m *Message, err error) {
	c.agent.logger.Warn("agency: response not delivered", "agent", c.agent.id, "to", m.From, "action", m.Action, "error", err)
}

func (c *conn) permitted(ctx context.Context, access Access, m *Message) bool {
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
func (c *conn) decide(act *action, m *Message) Access {
	if act.cfg.policy.fn == nil {
		return act.cfg.policy.decide(m)
	}
	access := Denied
	c.guard("AccessFunc", func() { access = act.cfg.policy.decide(m) })
	return access
}

// run calls the action's handler (through approved, when its approver has
// decoded the arguments), turning a panic into action_failed.
func (c *conn) run(ctx context.Context, act *action, m *Message, approved func() (any, error)) (value any, err error) {
	defer func() {
		if p := recover(); p != nil {
			value, err = nil, c.panicked(m, p)
		}
	}()
	if approved != nil {
		return approved()
	}
	return act.run(c.agent, ctx, m.Args)
}

// panicked logs an action's panic and returns the error its caller gets.
//
//go:noinline
func (c *conn) panicked(m *Message, p any) error {
	c.agent.logger.Error("agency: action panicked", "agent", c.agent.id, "action", m.Action, "panic", p, "stack", string(debug.Stack()))
	return newActionError(TypeActionFailed, nil, "%s.%s panicked: %v", c.agent.id, m.Action, p)
}

// guard runs a hook, logging rather than crashing on a panic: a hook's bug
// must not take the agent, or the space, down with it.
func (c *conn) guard(hook string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			c.agent.logger.Error("agency: hook panicked", "agent", c.agent.id, "hook", hook, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// fail sends ae back to m's sender. The cause stays here: a caller sees the
// same error whether or not the message crossed a wire.
func (c *conn) fail(ctx context.Context, m *Message, ae *ActionError) {
	if err := c.reply(ctx, m, ErrorAction, ae); err != nil {
		c.agent.logger.Warn("agency: error response not delivered", "agent", c.agent.id, "to", m.From, "action", m.Action, "error", err)
	}
}

// reply sends a [response] or [error] for m back to its sender, unless
// the sender said it takes none.
func (c *conn) reply(ctx context.Context, m *Message, action string, args any) error {
	if action == ErrorAction && c.agent.hooks.handle != nil {
		if ae, ok := args.(*ActionError); ok {
			noteOutcome(ctx, ae)
		}
	}
	if m.NoReply {
		if action == ErrorAction {
			c.noErrorToSender(m, args)
		}
		return nil
	}
	if c.hasLeft() { // a handler's context kept past its agent's removal
		return c.leftError()
	}
	if ae, ok := args.(*ActionError); ok {
		// What the caller reads: no cause, and a text of bounded size
		// whatever the handler or the input made of it.
		args = &ActionError{Type: ae.Type, Text: limitErrorText(ae.Text)}
	}
	r := newMessage()
	r.To, r.From, r.ParentID, r.Action, r.Args = m.From, c.agent.id, m.ID, action, args
	if m.Stream {
		r.Seq = c.answered(m) // the parts before it: the caller tells a gap by it
	}
	if err := c.router.Route(ctx, r); err != nil {
		return c.replyFailed(ctx, m, action, err)
	}
	return nil
}

// The cold paths of reply, in functions of their own (see handle).

//go:noinline
func (c *conn) noErrorToSender(m *Message, args any) {
	c.agent.logger.Debug("agency: not sending an error to a sender that takes no responses", "agent", c.agent.id, "to", m.From, "action", m.Action, "error", args)
}

//go:noinline
func (c *conn) leftError() error {
	return fmt.Errorf("%w: %q has left the space", ErrNotAdded, c.agent.id)
}

//go:noinline
func (c *conn) replyFailed(ctx context.Context, m *Message, action string, err error) error {
	if errors.Is(err, ErrNoRecipient) {
		c.agent.logger.Debug("agency: the sender is gone; response dropped", "agent", c.agent.id, "to", m.From)
		return nil
	}
	if action == ResponseAction && errors.Is(err, ErrMessageTooLarge) {
		// The caller would wait for a response that cannot be sent: it
		// gets an error at once instead, small enough to pass. The
		// response stays undelivered, and err says so to whoever sent it.
		// Under a limit so small that this error is over it too, a short
		// fixed text takes its place (under one that cannot carry even
		// that, no response can pass at all).
		if e := c.reply(ctx, m, ErrorAction, &ActionError{Type: TypeResponseTooLarge, Text: fmt.Sprintf(
			"the response of %s.%s is too large to send: %s", c.agent.id, m.Action, strings.TrimPrefix(err.Error(), ErrMessageTooLarge.Error()+": "))}); errors.Is(e, ErrMessageTooLarge) {
			_ = c.reply(ctx, m, ErrorAction, &ActionError{Type: TypeResponseTooLarge, Text: "too large"})
		}
	}
	return err
}

// fromWire reports whether m's arguments are JSON text, as a message that
// came over a wire has them: handling it decodes them, answering it
// encodes the answer, and taking it acknowledges it to the wire, which go
// deeper than a goroutine's first stack. A goroutine that handles one
// grows its stack first, once (package stack): measured on amqpspace's
// 16 concurrent requesters, the runtime's copying of stacks went from
// about 5 % of the process's CPU to 1 % (docs/performance.md). In
// process, where arguments are Go values and nothing is encoded, the
// stack is left to grow as it needs.
func fromWire(m *Message) bool {
	_, raw := m.Args.(json.RawMessage)
	return raw
}
