package agency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"reflect"
	"runtime"
	"sync/atomic"
)

// Agent is a participant in a space: an id, a set of actions, and the hooks
// its owner implements. Create one with [NewAgent], register its actions with
// [Handle], then add it to a space.
//
// Its methods are safe for concurrent use.
type Agent struct {
	id string
	*settings

	actions actionSet // written only before the agent first joins a space
	conn    atomic.Pointer[conn]

	// first is the conn of the agent's first connect, made in place: an
	// agent in a space is one allocation with its first action and its
	// conn, not three. A later connect makes a new conn, so that a conn,
	// once closed, stays closed for whoever still holds it.
	first conn
}

// joined tells whether the agent has joined a space, or is joining one:
// set for good by the first connect, which takes the agent's own conn.
func (a *Agent) joined() bool { return a.first.is(stateTaken) }

// settings is what an agent's options set, read-only once the agent is
// made. Agents made without options share defaultSettings: an idle agent
// stays small.
type settings struct {
	hooks         hookSet
	ownBroadcasts bool
	concurrency   int
	sequence      func(*Message) string
	logger        *slog.Logger
}

var defaultSettings = &settings{ownBroadcasts: true, concurrency: 1, logger: discardLogger}

// Option configures an agent in [NewAgent].
type Option func(*agentConfig) error

type agentConfig struct {
	hooks         []any // the values given to Hooks, in order
	ownBroadcasts *bool
	concurrency   int
	sequence      func(*Message) string
	logger        *slog.Logger
	changing      bool
}

// Hooks makes the agent call the hook interfaces v implements ([AfterAdder],
// [PermissionRequester], …). v usually is the value whose methods are the
// agent's actions. Hooks may be given several times, with different
// values (a tracer's, a logger's, the agent's own): each value gets the
// events it implements, in the order the values were given, and a panic in
// one does not keep the others from theirs. Several PermissionRequesters
// must all agree; the first that refuses decides.
func Hooks(v any) Option {
	return func(c *agentConfig) error {
		if err := checkHooks(v); err != nil {
			return err
		}
		for _, old := range c.hooks {
			if sameValue(old, v) {
				return fmt.Errorf("%w: Hooks(%T) given twice with the same value", ErrInvalidOption, v)
			}
		}
		c.hooks = append(c.hooks, v)
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
	if len(opts) == 0 {
		return &Agent{id: id, settings: defaultSettings}, nil
	}
	var c agentConfig
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	st := *defaultSettings
	st.hooks = resolveHooks(c.hooks)
	if c.ownBroadcasts != nil {
		st.ownBroadcasts = *c.ownBroadcasts
	}
	if c.concurrency != 0 {
		st.concurrency = c.concurrency
	}
	st.sequence = c.sequence
	if c.logger != nil {
		st.logger = c.logger
	}
	a := &Agent{id: id, settings: &st}
	if c.changing {
		a.actions.more = &moreActions{changes: new(changingActions)}
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
// actor model, sending to an id that no agent has is not an error for Send;
// but where the space can tell (always in space.Local, through the broker's
// returns in amqpspace) the agent's ErrorHandler hook receives an [error]
// of type not_found in answer, as if from the absent id, whose error
// matches ErrNoRecipient (and ErrNotFound) under errors.Is.
//
// A message sent while a trace is under way carries its traceparent (see
// [Traceparent]).
func (a *Agent) Send(ctx context.Context, to, action string, args any) (string, error) {
	m := newMessage()
	m.To, m.Action, m.Args = to, action, args
	return a.SendMessage(ctx, m)
}

// SendMessage is Send with the whole message in the caller's hands, for meta
// keys such as "thoughts" or an id of the caller's choosing. It sets m.From
// (a From naming another agent is ErrForgedSender) and m.ID when empty, and
// m.NoReply when the agent has neither a ValueHandler nor an ErrorHandler
// hook (responses would have nowhere to go; a NoReply the caller set is
// kept); the space may deliver m itself, so the caller must not change it
// afterwards.
func (a *Agent) SendMessage(ctx context.Context, m *Message) (id string, err error) {
	c, err := a.prepare(m)
	if err != nil {
		return "", err
	}
	if a.hooks.send != nil && !m.IsResponse() {
		var done func(error)
		ctx, done = a.observeSend(ctx, m, false)
		defer func() { done(err) }()
	}
	a.carryTrace(ctx, m)
	if !a.hooks.wantsResponses() && !m.IsResponse() {
		// Its responses would be dropped on arrival: over a wire, not
		// sending them halves the traffic of one-way messages.
		m.NoReply = true
	}
	if err := c.router.Route(ctx, m); err != nil {
		if !errors.Is(err, ErrNoRecipient) {
			return m.ID, err
		}
		c.noRecipient(m)
	}
	return m.ID, nil
}

// noRecipient tells the agent's ErrorHandler that m, sent point to point,
// found no recipient. The [error] takes the agent's queue, as an answer
// from the recipient would.
func (c *conn) noRecipient(m *Message) {
	if m.To == Broadcast || m.IsResponse() || m.NoReply || c.agent.hooks.err == nil {
		return
	}
	ae := newActionError(TypeNotFound, ErrNoRecipient, "no agent %q in the space: %q was not delivered", m.To, m.Action)
	r := &Message{To: c.agent.id, From: m.To, ID: NewID(), ParentID: m.ID, Action: ErrorAction, Args: ae}
	if err := c.Deliver(r); err != nil {
		c.agent.logger.Debug("agency: no recipient, and the sender is leaving", "agent", c.agent.id, "to", m.To, "action", m.Action)
	}
}

// Request sends the action to the agent with id to and waits for the first
// response from that agent (a response to the same id from any other agent
// goes to the hooks, as a response to a Send does). An [error] response is
// returned as an *ActionError (errors.Is matches ErrNotFound,
// ErrPermissionDenied, …). ctx's deadline travels with the request
// (Message.Deadline), so the handler's context ends when the caller stops
// waiting, and a recipient that gets to the request after it does not run
// it. Once the deadline has passed the error is a timeout
// (errors.Is(err, ErrTimeout)), even for a response that came at the same
// moment; when ctx is cancelled it is ctx's error. A recipient the space
// knows to be absent is ErrNoRecipient at once; a space that loses the way
// the response would come may end the wait with an error of its own (see
// conn.FailRequests).
//
// Request may be called from inside an action: responses never wait behind
// the agent's queue.
func (a *Agent) Request(ctx context.Context, to, action string, args any) (*Message, error) {
	m := newMessage() // as Send makes them
	m.To, m.Action, m.Args = to, action, args
	return a.RequestMessage(ctx, m)
}

// RequestMessage is Request with the whole message in the caller's hands; see
// SendMessage.
func (a *Agent) RequestMessage(ctx context.Context, m *Message) (resp *Message, err error) {
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
	if a.hooks.send != nil {
		var done func(error)
		ctx, done = a.observeSend(ctx, m, true)
		defer func() { done(err) }()
	}
	a.carryTrace(ctx, m)
	if err := ctx.Err(); err != nil {
		return nil, requestError(ctx, m.To, m.Action)
	}
	ch := c.await(m.ID, m.To, nil)
	defer c.forget(m.ID, ch)
	if err := c.router.Route(ctx, m); err != nil {
		if ctx.Err() != nil {
			return nil, requestError(ctx, m.To, m.Action) // the same error as a wait that ran out
		}
		return nil, err
	}
	// Yield once before waiting: a recipient in this process is most often
	// served on this goroutine's processor, and answers within that turn.
	// An answer that finds its caller not yet parked wakes no one, and the
	// caller takes it on its next turn; parking at once would cost a
	// wake-up (and often a sleeping thread's) for every request.
	runtime.Gosched()
	var r answer
	select {
	case r = <-ch:
	default:
		select {
		case r = <-ch:
		case <-ctx.Done():
			return nil, requestError(ctx, m.To, m.Action)
		}
	}
	if expired(ctx) {
		// The answer came, but after the caller stopped waiting: the
		// caller hears what it would have heard a moment earlier.
		return nil, requestError(ctx, m.To, m.Action)
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := r.m.Err(); err != nil {
		return nil, err
	}
	return r.m, nil
}

// prepare fills in and checks an outgoing message.
func (a *Agent) prepare(m *Message) (*conn, error) {
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
	if err := m.check(true); err != nil { // From is a.id, checked by NewAgent
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

// Value returns the value a [response] message (or a [part]) carries, as an R. The
// answer is the same in every space: a value that crossed a wire is
// decoded from its JSON encoding, and so is, in process, a value that is
// not an R or an R that holds interface values (R any, map[string]any,
// []any, a struct with a field of type any): those hold what
// encoding/json makes (map[string]any, []any, float64, string, bool, nil),
// never the responder's own Go types. Any other R is returned as it is.
func Value[R any](m *Message) (R, error) {
	if m.Action != ResponseAction && m.Action != PartAction {
		var zero R
		if err := m.Err(); err != nil {
			return zero, err
		}
		return zero, fmt.Errorf("agency: Value of a %q message, not a [response]", m.Action)
	}
	// A value from the wire is a json.RawMessage, which every interface type
	// R would hold as it is: decode it unless an R is the raw text itself.
	// (Args holds an R that is not an interface type only when it is the
	// raw text itself, or the value is not from the wire.)
	if v, ok := m.Args.(R); ok && !holdsInterface(reflect.TypeFor[R]()) {
		return v, nil
	}
	return convertValue[R](m)
}

// convertValue is Value for an R that is not handed over as it is: in a
// function of its own, so that the R it decodes into, which escapes, is
// made only here.
func convertValue[R any](m *Message) (R, error) {
	var r R
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

// actionSet is an agent's actions by name. The first is kept in place, in
// the agent (most agents have one or a few actions, and an idle agent stays
// small); the others beside it, in a list, and in a map once there are
// many.
type actionSet struct {
	first action       // the first action registered; its h is nil until then
	more  *moreActions // made for the second action
}

// moreActions is an actionSet with more than one action.
type moreActions struct {
	list   []*action // every action, the first too, in the order registered
	byName map[string]*action
	// changes, on an agent made with ChangingActions, holds the actions
	// RegisterJSON may add and remove while the agent is in a space.
	changes *changingActions
}

// actionSetMapAt is the number of actions from which a lookup goes
// through the map.
const actionSetMapAt = 9

func (s *actionSet) get(name string) *action {
	if act := s.getStatic(name); act != nil || s.more == nil || s.more.changes == nil {
		return act
	}
	return s.more.changes.get(name)
}

// changing returns the actions that may change, on an agent made with
// ChangingActions; else nil.
func (s *actionSet) changing() *changingActions {
	if s.more == nil {
		return nil
	}
	return s.more.changes
}

// getStatic returns the action registered before the agent joined.
func (s *actionSet) getStatic(name string) *action {
	if m := s.more; m != nil {
		if m.byName != nil {
			return m.byName[name]
		}
		for _, act := range m.list {
			if act.name == name {
				return act
			}
		}
		return nil
	}
	if s.first.h != nil && s.first.name == name {
		return &s.first
	}
	return nil
}

// len returns the number of actions.
func (s *actionSet) len() int {
	switch {
	case s.more != nil:
		n := len(s.more.list)
		if s.more.changes != nil {
			n += len(s.more.changes.list())
		}
		return n
	case s.first.h != nil:
		return 1
	}
	return 0
}

// all returns the actions, in the order registered.
func (s *actionSet) all() iter.Seq[*action] {
	return func(yield func(*action) bool) {
		if s.more != nil {
			for _, act := range s.more.list {
				if !yield(act) {
					return
				}
			}
			if s.more.changes != nil {
				for _, act := range s.more.changes.list() {
					if !yield(act) {
						return
					}
				}
			}
			return
		}
		if s.first.h != nil {
			yield(&s.first)
		}
	}
}

// slot returns where a new action is to be made: in place while there is
// none yet, else a new one. The caller fills it in, then adds it, or
// clears it again.
func (s *actionSet) slot() *action {
	if s.first.h == nil && s.more == nil {
		return &s.first
	}
	return new(action)
}

// add adds act, from slot, filled in.
func (s *actionSet) add(act *action) {
	if act == &s.first {
		return // in place
	}
	if s.more == nil {
		s.more = &moreActions{list: []*action{&s.first}}
	}
	m := s.more
	m.list = append(m.list, act)
	switch {
	case m.byName != nil:
		m.byName[act.name] = act
	case len(m.list) >= actionSetMapAt:
		m.byName = make(map[string]*action, len(m.list))
		for _, a := range m.list {
			m.byName[a.name] = a
		}
	}
}
