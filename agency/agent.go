package agency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
)

// Agent is a participant in a space: an id, a set of actions, and the hooks
// its owner implements. Create one with [NewAgent], register its actions with
// [Handle], then add it to a space.
//
// Its methods are safe for concurrent use.
type Agent struct {
	id            string
	hooks         hookSet
	ownBroadcasts bool
	concurrency   int
	logger        *slog.Logger

	actions map[string]*action // written only before the agent first joins a space
	joined  atomic.Bool        // set for good on the first Connect
	conn    atomic.Pointer[Conn]
}

// Option configures an agent in [NewAgent].
type Option func(*agentConfig) error

type agentConfig struct {
	hooks         *hookSet
	ownBroadcasts *bool
	concurrency   int
	logger        *slog.Logger
}

// Hooks makes the agent call the hook interfaces v implements ([AfterAdder],
// [PermissionRequester], …). v usually is the value whose methods are the
// agent's actions.
func Hooks(v any) Option {
	return func(c *agentConfig) error {
		if c.hooks != nil {
			return fmt.Errorf("%w: Hooks given twice", ErrInvalidOption)
		}
		h, err := resolveHooks(v)
		if err != nil {
			return err
		}
		c.hooks = &h
		return nil
	}
}

// OwnBroadcasts sets whether the agent receives the broadcasts it sends
// itself. It does by default.
func OwnBroadcasts(on bool) Option {
	return func(c *agentConfig) error {
		if c.ownBroadcasts != nil {
			return fmt.Errorf("%w: OwnBroadcasts given twice", ErrInvalidOption)
		}
		c.ownBroadcasts = &on
		return nil
	}
}

// Concurrency lets the agent run up to n actions at once. By default it runs
// one at a time, in arrival order, so that its state needs no locks.
func Concurrency(n int) Option {
	return func(c *agentConfig) error {
		if c.concurrency != 0 {
			return fmt.Errorf("%w: Concurrency given twice", ErrInvalidOption)
		}
		if n < 1 {
			return fmt.Errorf("%w: Concurrency(%d): at least 1", ErrInvalidOption, n)
		}
		c.concurrency = n
		return nil
	}
}

// Logger sets where the agent logs what it drops or cannot deliver. The
// default logs nothing.
func Logger(l *slog.Logger) Option {
	return func(c *agentConfig) error {
		if c.logger != nil {
			return fmt.Errorf("%w: Logger given twice", ErrInvalidOption)
		}
		if l == nil {
			return fmt.Errorf("%w: Logger(nil)", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

var discardLogger = slog.New(slog.DiscardHandler)

// NewAgent returns an agent with the given id (see [ValidateID]) and no
// actions but help.
func NewAgent(id string, opts ...Option) (*Agent, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	var c agentConfig
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	a := &Agent{id: id, ownBroadcasts: true, concurrency: 1, logger: discardLogger}
	if c.hooks != nil {
		a.hooks = *c.hooks
	}
	if c.ownBroadcasts != nil {
		a.ownBroadcasts = *c.ownBroadcasts
	}
	if c.concurrency != 0 {
		a.concurrency = c.concurrency
	}
	if c.logger != nil {
		a.logger = c.logger
	}
	return a, nil
}

// MustNewAgent is like NewAgent but panics on error. It is meant for agents
// whose id and options are fixed in the program.
func MustNewAgent(id string, opts ...Option) *Agent {
	a, err := NewAgent(id, opts...)
	if err != nil {
		panic(err)
	}
	return a
}

// ID returns the agent's id.
func (a *Agent) ID() string { return a.id }

// Send sends the action to the agent with id to (or to every agent, with
// Broadcast) and returns the message id. It does not wait for the action: its
// responses reach the agent's ValueHandler and ErrorHandler hooks. As in the
// actor model, sending to an id that no agent has is not an error.
func (a *Agent) Send(ctx context.Context, to, action string, args any) (string, error) {
	return a.SendMessage(ctx, &Message{To: to, Action: action, Args: args})
}

// SendMessage is Send with the whole message in the caller's hands, for meta
// keys such as "thoughts" or an id of the caller's choosing. It sets m.From
// (a From naming another agent is ErrForgedSender) and m.ID when empty, and
// m.NoReply when the agent has neither a ValueHandler nor an ErrorHandler
// hook (responses would have nowhere to go; a NoReply the caller set is
// kept); the space may deliver m itself, so the caller must not change it
// afterwards.
func (a *Agent) SendMessage(ctx context.Context, m *Message) (string, error) {
	c, err := a.prepare(m)
	if err != nil {
		return "", err
	}
	if !a.hooks.wantsResponses() && !m.IsResponse() {
		// Its responses would be dropped on arrival: over a wire, not
		// sending them halves the traffic of one-way messages.
		m.NoReply = true
	}
	if err := c.router.Route(ctx, m); err != nil && !errors.Is(err, ErrNoRecipient) {
		return m.ID, err
	}
	return m.ID, nil
}

// Request sends the action to the agent with id to and waits for the first
// response from that agent (a response to the same id from any other agent
// goes to the hooks, as a response to a Send does). An [error] response is
// returned as an *ActionError (errors.Is matches ErrNotFound,
// ErrPermissionDenied, …). ctx's deadline travels with the request
// (Message.Deadline), so the handler's context ends when the caller stops
// waiting. When the deadline passes first the error is a timeout
// (errors.Is(err, ErrTimeout)); when ctx is cancelled it is ctx's error. A
// recipient the space knows to be absent is ErrNoRecipient at once.
//
// Request may be called from inside an action: responses never wait behind
// the agent's queue.
func (a *Agent) Request(ctx context.Context, to, action string, args any) (*Message, error) {
	return a.RequestMessage(ctx, &Message{To: to, Action: action, Args: args})
}

// RequestMessage is Request with the whole message in the caller's hands; see
// SendMessage.
func (a *Agent) RequestMessage(ctx context.Context, m *Message) (*Message, error) {
	if m.To == Broadcast {
		return nil, fmt.Errorf("%w: a request needs one recipient, not a broadcast", ErrMalformedMessage)
	}
	if dl, ok := ctx.Deadline(); ok && m.Deadline.IsZero() {
		m.Deadline = dl
	}
	m.NoReply = false // a request waits for its response
	c, err := a.prepare(m)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, requestError(ctx, m.To, m.Action)
	}
	ch := c.await(m.ID, m.To)
	defer c.forget(m.ID, ch)
	if err := c.router.Route(ctx, m); err != nil {
		if ctx.Err() != nil {
			return nil, requestError(ctx, m.To, m.Action) // the same error as a wait that ran out
		}
		return nil, err
	}
	select {
	case r := <-ch:
		if err := r.Err(); err != nil {
			return nil, err
		}
		return r, nil
	case <-ctx.Done():
		return nil, requestError(ctx, m.To, m.Action)
	case <-c.gone:
		return nil, fmt.Errorf("%w: removed while waiting for %q", ErrNotAdded, m.To)
	}
}

// prepare fills in and checks an outgoing message.
func (a *Agent) prepare(m *Message) (*Conn, error) {
	c := a.conn.Load()
	if c == nil {
		return nil, ErrNotAdded
	}
	switch m.From {
	case "":
		m.From = a.id
	case a.id:
	default:
		return nil, fmt.Errorf("%w: %q sending as %q", ErrForgedSender, a.id, m.From)
	}
	if m.ID == "" {
		m.ID = NewID()
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Call sends a request (see [Agent.Request]) and decodes the response value
// as an R.
func Call[R any](ctx context.Context, a *Agent, to, action string, args any) (R, error) {
	r, err := a.Request(ctx, to, action, args)
	if err != nil {
		var zero R
		return zero, err
	}
	return Value[R](r)
}

// Value returns the value a [response] message carries, as an R. A value that
// is already an R (in process) is returned as it is; any other is converted
// through its JSON encoding.
func Value[R any](m *Message) (R, error) {
	var r R
	if m.Action != ResponseAction {
		if err := m.Err(); err != nil {
			return r, err
		}
		return r, fmt.Errorf("agency: Value of a %q message, not a [response]", m.Action)
	}
	// A value from the wire is a json.RawMessage, which every interface type
	// R would hold as it is: decode it unless an R is the raw text itself.
	if _, raw := m.Args.(json.RawMessage); !raw || reflect.TypeFor[R]() == reflect.TypeFor[json.RawMessage]() {
		if v, ok := m.Args.(R); ok {
			return v, nil
		}
	}
	if err := convert(m.Args, &r); err != nil {
		return r, fmt.Errorf("agency: response value from %q is not a %v: %w", m.From, reflect.TypeFor[R](), err)
	}
	return r, nil
}

// convert stores v in *dst through v's JSON encoding.
func convert(v any, dst any) error {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return err
		}
	}
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	return json.Unmarshal(raw, dst)
}
