package driver

import (
	"context"
	"errors"
	"sync"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/internal/driverlink"
)

// Conn is an agent's attachment to a space: the space delivers incoming
// messages to it and closes it when the agent leaves. [Connect] makes one;
// a space that keeps a struct of its own for each agent may hold a Conn in
// it instead and attach it with [Conn.Connect], so that attaching an agent
// allocates nothing of its own. A Conn must not be copied once connected.
type Conn struct {
	c conn
}

// conn is agency's connection, as this package sees it.
type conn interface {
	Agent() *agency.Agent
	Added(ctx context.Context)
	DeliverFunc(m *agency.Message, taken func()) error
	FailRequests(err error)
	FailRequestsTo(to string, err error)
	BeforeRemove(ctx context.Context)
	Close(ctx context.Context) error
	CloseIdle(ctx context.Context) (done bool, err error)
	Leaving() bool
}

// Connect attaches a to a space whose outgoing side is r, and returns its
// Conn. The space calls [Conn.Added] once the agent can be reached, which
// runs its AfterAdd hook and then starts its delivery loop (messages that
// arrive before queue up), and [Conn.Close] to take it out again. An agent
// is in at most one space at a time: a second Connect fails with
// agency.ErrAlreadyAdded. Connect panics if a or r is nil.
func Connect(a *agency.Agent, r Router) (*Conn, error) {
	c := new(Conn)
	if err := c.Connect(a, r); err != nil {
		return nil, err
	}
	return c, nil
}

// Connect is [Connect] for a Conn the space holds: it attaches a to the
// space whose outgoing side is r, through c, which must be a zero Conn
// (Connect panics otherwise, or if a or r is nil). When it fails, c stays
// a zero Conn.
func (c *Conn) Connect(a *agency.Agent, r Router) error {
	if a == nil || r == nil {
		panic("driver: Connect with a nil agent or Router")
	}
	if c.c != nil {
		panic("driver: Connect of a Conn that is connected already")
	}
	impl, err := driverlink.Connect(a, r)
	if err != nil {
		return err
	}
	c.c = impl.(conn)
	return nil
}

// Agent returns the connected agent.
func (c *Conn) Agent() *agency.Agent { return c.c.Agent() }

// Added runs the agent's AfterAdd hook and then starts handling messages,
// so that the hook and the actions never run at once. The space calls it
// once the agent is reachable, before its Add returns.
func (c *Conn) Added(ctx context.Context) { c.c.Added(ctx) }

// Deliver hands an incoming message to the agent. It never blocks on the
// agent: the message is queued, or, if it answers one of the agent's
// requests, handed to the waiting Request at once. It returns
// agency.ErrNoRecipient once the agent has stopped taking messages. Safe
// for concurrent use, with one rule: a space that delivers one *Message to
// several agents (a broadcast in process) delivers it to one at a time,
// as space.Local's loop does, since Deliver notes in the message which
// agent's handler may use it as its context. Messages decoded from a wire
// are each delivered once, and need no care.
func (c *Conn) Deliver(m *agency.Message) error { return c.c.DeliverFunc(m, nil) }

// DeliverFunc is Deliver for a space that paces delivery: taken is called
// once the agent has taken m, so that the space can hold m's
// acknowledgement (and, with it, further messages) until then. That is
// when the agent starts handling m; at once, for a message that answers a
// waiting Request or that the agent drops; and earlier than its turn while
// the agent waits for a response (a Request is under way), so that a
// space that holds messages back never holds back the response behind
// them. taken runs on any goroutine and must not block for long. When
// DeliverFunc returns an error it does not call taken.
func (c *Conn) DeliverFunc(m *agency.Message, taken func()) error {
	return c.c.DeliverFunc(m, taken)
}

// FailRequests makes every Request of the agent that is waiting for its
// response return err at once. A space calls it when the way those
// responses come has broken (a wire space's connection was lost), rather
// than let each caller wait out its deadline for an answer that may never
// come. Requests made afterwards are not affected. Safe for concurrent use.
func (c *Conn) FailRequests(err error) { c.c.FailRequests(err) }

// FailRequestsTo is [Conn.FailRequests] for the Requests sent to the agent
// with id to alone: a space calls it when the way to that agent has broken
// while others still work. Safe for concurrent use.
func (c *Conn) FailRequestsTo(to string, err error) { c.c.FailRequestsTo(to, err) }

// Leaving reports whether the agent has started to leave: [Conn.BeforeRemove]
// or [Conn.Close] has been called. A space that lets an agent's id go only
// after that may send a response to a Conn it remembers while Leaving is
// false: no later Conn with that id exists yet, so none can be waiting for
// the response. Safe for concurrent use.
func (c *Conn) Leaving() bool { return c.c.Leaving() }

// BeforeRemove runs the agent's BeforeRemove hook, once, while the agent
// still takes messages. A space that must do work between the hook and the
// end of intake (a wire space stops new messages at the broker, then drains
// those already on their way) calls it before [Conn.Close]; otherwise Close
// runs it.
func (c *Conn) BeforeRemove(ctx context.Context) { c.c.BeforeRemove(ctx) }

// Close takes the agent out: it runs the BeforeRemove hook unless
// [Conn.BeforeRemove] has (the hook may run while an action does), stops
// taking messages, handles those already queued, and waits for running
// actions. When ctx ends first, the actions' context is cancelled, the
// queue is dropped and ctx's error returned; the agent stays in use, and
// cannot join another space, until its running action returns.
//
// Called with the context of one of the agent's own actions (an agent
// removing itself), Close cannot wait for that action: it stops intake and
// returns, and the agent leaves once its running actions and queue are
// done. Close is idempotent.
func (c *Conn) Close(ctx context.Context) error { return c.c.Close(ctx) }

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
		if done, err := c.c.CloseIdle(ctx); done {
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
