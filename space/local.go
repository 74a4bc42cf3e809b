package space

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// Local is a Space whose agents live in this process. It hands each message
// to its recipients as it is, without encoding it, so a received message
// must be treated as read-only. Create one with NewLocal.
type Local struct {
	mu      sync.RWMutex
	agents  agentTable
	closed  bool
	maxSize int  // MaxMessageSize; 0: no limit
	taps    taps // tap.go
}

// LocalOption configures NewLocal. One with a wrong value makes NewLocal
// panic, with an error matching agency.ErrInvalidOption that names it:
// NewLocal returns no error, so that it can be written wherever a space is
// wanted, and a wrong option is a programmer's mistake, caught at once.
type LocalOption func(*Local) error

// MaxMessageSize bounds the encoding of a message in the space to n bytes,
// as a space that crosses a wire bounds it (amqpspace's
// Config.MaxMessageSize): a larger message is not delivered and its sender
// gets an error matching agency.ErrMessageTooLarge; a caller whose
// response would be larger gets agency.ErrResponseTooLarge at once (with
// a short fixed text when the full one is over the limit too; a limit too
// small for even that, under about 200 bytes with ids of some twenty
// bytes, leaves the caller to its deadline). Without
// it a Local space, which never encodes a message, has no limit; with it,
// each message is encoded once to be measured, which costs what encoding
// costs: it is for tests of code that will run over a wire. n must be
// positive.
func MaxMessageSize(n int) LocalOption {
	return func(s *Local) error {
		if n <= 0 {
			return fmt.Errorf("space: %w: MaxMessageSize(%d): the limit must be positive", agency.ErrInvalidOption, n)
		}
		s.maxSize = n
		return nil
	}
}

// NewLocal returns an empty in-process space. It panics if an option has a
// wrong value (see LocalOption).
func NewLocal(opts ...LocalOption) *Local {
	s := &Local{agents: newAgentTable()}
	for _, o := range opts {
		if err := o(s); err != nil {
			panic(err)
		}
	}
	return s
}

var _ Space = (*Local)(nil)

// Add puts a in the space; see Space.Add.
func (s *Local) Add(ctx context.Context, a *agency.Agent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := a.ID()
	h := s.agents.hash(id)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if _, ok := s.agents.find(h, id); ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrAgentExists, id)
	}
	r := &localRouter{s: s}
	if err := r.conn.Connect(a, r); err != nil {
		s.mu.Unlock()
		return err
	}
	c := &r.conn
	s.agents.insert(h, c)
	s.mu.Unlock()
	c.Added(ctx)
	return nil
}

// Remove takes the agent with the given id out; see Space.Remove. Messages
// sent to it while it drains fail as if it were gone.
func (s *Local) Remove(ctx context.Context, id string) error {
	h := s.agents.hash(id)
	s.mu.RLock()
	c, ok := s.agents.get(h, id)
	s.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownAgent, id)
	}
	err := c.Close(ctx)
	s.mu.Lock()
	s.agents.remove(h, c)
	s.mu.Unlock()
	return err
}

// Close removes every agent, concurrently, and closes the space; see
// Space.Close.
func (s *Local) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*driver.Conn, 0, s.agents.len())
	for c := range s.agents.all() {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	err := driver.CloseAll(ctx, conns)
	s.mu.Lock()
	s.agents.reset()
	s.mu.Unlock()
	return err
}

// localRouter routes one agent's messages. It is 32 bytes, a size class:
// the sender is reached through conn (see sender), not held here too.
type localRouter struct {
	s *Local
	// last is the Conn of the agent last sent a message to: a sender that
	// sends to one agent again and again, as most do (and an agent that
	// answers one caller's requests), skips the space's lock and map. An
	// open Conn is the one the space has for its id (Remove closes it
	// before letting the id go), so a Deliver that succeeds reaches the
	// right agent, and one that fails sends the message the long way. It
	// may keep a removed agent's Conn from the collector until the sender
	// sends elsewhere or leaves.
	last atomic.Pointer[driver.Conn]
	// conn is the agent's Conn, kept here so that adding an agent
	// allocates the two at once.
	conn driver.Conn
}

var (
	_ driver.BroadcastRouter = (*localRouter)(nil)
	_ driver.NativeRouter    = (*localRouter)(nil)
)

// Native reports true: every agent of a Local is an agency-go agent.
func (r *localRouter) Native(string) bool { return true }

// sender returns the agent whose messages r routes.
func (r *localRouter) sender() *agency.Agent { return r.conn.Agent() }

// RouteBroadcast delivers the broadcast m to every agent in the space and
// returns the ids of those that took it in.
func (r *localRouter) RouteBroadcast(_ context.Context, m *agency.Message) ([]string, error) {
	if m.From != r.sender().ID() {
		return nil, fmt.Errorf("%w: %q sending as %q", agency.ErrForgedSender, r.sender().ID(), m.From)
	}
	if m.To != agency.Broadcast {
		return nil, fmt.Errorf("%w: RouteBroadcast of a message to %q", agency.ErrMalformedMessage, m.To)
	}
	s := r.s
	if s.maxSize > 0 {
		if err := s.checkSize(m); err != nil {
			return nil, err
		}
	}
	s.observe(m)
	s.mu.RLock()
	defer s.mu.RUnlock()
	reached := make([]string, 0, s.agents.len())
	for c := range s.agents.all() {
		if c.Deliver(m) == nil {
			reached = append(reached, c.Agent().ID())
		}
	}
	return reached, nil
}

func (r *localRouter) Route(_ context.Context, m *agency.Message) error {
	if m.From != r.sender().ID() {
		return r.forged(m)
	}
	s := r.s
	if s.maxSize > 0 {
		if err := s.checkSize(m); err != nil {
			return err
		}
	}
	s.observe(m)
	if m.To == agency.Broadcast {
		s.broadcast(m)
		return nil
	}
	// A response (or a part of one, or a [cancel]) takes the remembered
	// Conn only while its agent has not started to leave: a Conn on its way
	// out takes such a message (to drop it) that the agent's next Conn,
	// under the same id, may wait for.
	// Until the old Conn starts to leave there is no next one, so no
	// request of its can be the one answered.
	if c := r.last.Load(); c != nil && c.Agent().ID() == m.To && (!answers(m) || !c.Leaving()) && c.Deliver(m) == nil {
		return nil
	}
	s.mu.RLock()
	c, ok := s.agents.get(s.agents.hash(m.To), m.To)
	s.mu.RUnlock()
	if !ok {
		return noRecipient(m)
	}
	r.last.Store(c)
	return c.Deliver(m)
}

// broadcast delivers m to every agent in the space.
//
//go:noinline
func (s *Local) broadcast(m *agency.Message) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for c := range s.agents.all() {
		_ = c.Deliver(m) // an agent on its way out misses the broadcast
	}
}

// The cold paths of Route, in functions of their own: the recipient's
// delivery goroutine may call Route (to answer), on a small stack that a
// deep frame would make grow.

// checkSize measures m's encoding against MaxMessageSize. A response over
// it is an error agency turns into a response_too_large for the caller.
//
//go:noinline
func (s *Local) checkSize(m *agency.Message) error {
	body, err := m.MarshalJSON()
	if err != nil {
		return err
	}
	if len(body) > s.maxSize {
		return fmt.Errorf("%w: %d bytes encoded, limit %d (space.MaxMessageSize)", agency.ErrMessageTooLarge, len(body), s.maxSize)
	}
	return nil
}

//go:noinline
func (r *localRouter) forged(m *agency.Message) error {
	return fmt.Errorf("%w: %q sending as %q", agency.ErrForgedSender, r.sender().ID(), m.From)
}

// answers reports whether m answers a request or speaks of its stream: a
// Conn takes such a message even once it is leaving (and drops it).
func answers(m *agency.Message) bool {
	return m.IsResponse() || m.Action == agency.PartAction || m.Action == agency.CancelAction
}

//go:noinline
func noRecipient(m *agency.Message) error {
	return fmt.Errorf("%w: %q", agency.ErrNoRecipient, m.To)
}
