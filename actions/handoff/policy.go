package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// Defaults of a Policy.
const (
	// DefaultMaxHops is how many handoffs a conversation may make between
	// two messages of the user.
	DefaultMaxHops = 8
	// pingPongs is how many handoffs back and forth between the same two
	// agents, since the user's last message, stop the next one between
	// them.
	pingPongs = 4
	// DefaultAbsentWait is how long a committed handoff waits for its
	// receiver to be in the space before it goes back to its maker.
	DefaultAbsentWait = 15 * time.Second
)

// Policy is the openai.Extension that applies an agent's rules to its
// turns (see Policy.Extension), and takes over the conversations handed to
// it (see Policy.Serve). Each conversation's state (its holder, variables,
// version, hops) is a document in the Policy's store, and a handoff is one
// Apply that changes it, logs the handoff and queues the handoff message
// in the outbox; a relay started when the agent joins a space (a
// store.Relay) sends it, and counts it delivered once the receiver has
// answered. So a handoff committed just before the process dies is sent
// after it restarts, one to a receiver not in the space yet is sent when
// it joins, and only one agent holds a conversation at a time: a handoff
// by an agent that does not hold it, or a second one of the same version,
// is refused, not raced. When the receiver refuses a handoff that is not
// stale (it does not accept handoffs from this agent, say), the agent
// holds the conversation again, with the hops of before it, and the user
// is told why, in one Apply (EventReturned).
//
// A turn of an agent with a Policy goes like this. Before every model
// call, the conversation is read from the store; the OnContext rules are
// tried in order, and the first whose conditions hold hands the
// conversation on without calling the model. Otherwise the model is
// offered a transfer tool per OnLLM rule (whose Available condition
// holds) and per enabled handoff of a Dispatch, with parallel tool calls
// off, and the variables go into the system prompt (SystemTemplate) and
// into the __meta__ of every tool request (VarsFrom). The first transfer
// call of a reply hands the conversation on once the reply's results are
// recorded; a second one reads an error. A tool's Reply sets variables and
// may name the next target. When the model answers in text, the answer
// goes to the user and then the AfterWork rule applies.
//
// Loops are bounded: a handoff that would exceed MaxHops since the user's
// last message, or make the fifth back-and-forth between the same two
// agents (the fifth back-and-forth), is refused with an error the model reads
// ("loop_limit: …; answer the user instead"; errors.Is finds
// ErrLoopLimit). Every transition is an
// Event for the Observer and a line for the Logger.
//
// A Policy serves one agent; its methods are safe for concurrent use.
type Policy struct {
	self string
	cfg  config
	ev   events

	transfers []transferRule
	contexts  []contextRule
	afterWork Target
	tmpl      *template.Template
	dispatch  []*Dispatcher
	managed   int // index in dispatch of the managed one; -1: none
	static    map[string]bool

	// memory is the agent's history in the Policy's store, when it keeps
	// it there (Team sets it).
	memory *memory

	mu     sync.Mutex
	relay  *store.Relay
	absent map[string]time.Time // handoff message id → when its receiver was first found absent

	// committed, when set, runs after a handoff is committed and before
	// the relay is woken (tests stop the agent there).
	committed func(ctx context.Context, t Transfer)
}

type transferRule struct {
	name, description, message string
	to                         Target
	avail                      *condition
}

type contextRule struct {
	to          Target
	cond, avail *condition
	message     string
}

// Option configures a Policy.
type Option func(*config) error

type config struct {
	store     store.Store
	maxHops   int
	afterWork Target
	filter    Filter
	obs       Observer
	logger    *slog.Logger
	env       reflect.Type
	relay     store.RelayConfig
	absent    time.Duration
	set       map[string]bool
}

func (c *config) once(name string) error {
	if c.set[name] {
		return fmt.Errorf("%w: handoff: %s given twice", agency.ErrInvalidOption, name)
	}
	if c.set == nil {
		c.set = map[string]bool{}
	}
	c.set[name] = true
	return nil
}

// WithStore sets where the conversations are kept (default: a
// store.NewMemory of the Policy's own, which forgets them with the
// process). Agents that hand conversations to each other may share one;
// agents in other processes need not (the Transfer carries what moves),
// but only a shared store keeps one holder per conversation across them.
func WithStore(st store.Store) Option {
	return func(c *config) error {
		if st == nil {
			return fmt.Errorf("%w: handoff: WithStore(nil)", agency.ErrInvalidOption)
		}
		c.store = st
		return c.once("WithStore")
	}
}

// MaxHops sets how many handoffs a conversation may make between two
// messages of the user (default DefaultMaxHops).
func MaxHops(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: handoff: MaxHops(%d): at least 1", agency.ErrInvalidOption, n)
		}
		c.maxHops = n
		return c.once("MaxHops")
	}
}

// DefaultAfterWork sets what happens after the model answers in text when
// the agent has no AfterWork rule (a team's after-work; default
// RevertToUser).
func DefaultAfterWork(t Target) Option {
	return func(c *config) error {
		if err := t.valid(); err != nil {
			return fmt.Errorf("%w: %v", agency.ErrInvalidOption, err)
		}
		c.afterWork = t
		return c.once("DefaultAfterWork")
	}
}

// FilterHistory sets the filter of the history the agent continues a
// conversation handed to it on (default DropOtherToolCalls).
func FilterHistory(f Filter) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: handoff: FilterHistory(nil)", agency.ErrInvalidOption)
		}
		c.filter = f
		return c.once("FilterHistory")
	}
}

// Observe sends the Policy's events to o.
func Observe(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return fmt.Errorf("%w: handoff: Observe(nil)", agency.ErrInvalidOption)
		}
		c.obs = o
		return c.once("Observe")
	}
}

// Logger logs the Policy's events: handoffs and the rest at Info, refusals,
// condition errors and loop limits at Warn. The default logs nothing.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: handoff: Logger(nil)", agency.ErrInvalidOption)
		}
		c.logger = l
		return c.once("Logger")
	}
}

// Env compiles the Policy's conditions against the type of v, a struct
// (Account{}): every name must be a field (by its expr tag, else its Go
// name) and every operation must fit the fields' types, so a misspelt
// variable or a type mistake fails NewPolicy, with its position. The
// variables are decoded into the struct (by its json tags) when a
// condition is evaluated. Without Env conditions are untyped: variables
// are looked up by name when a condition is evaluated, and one that is
// missing then makes the rule not fire (a condition_error event).
//
//	type Account struct {
//		LoggedIn bool `json:"logged_in" expr:"logged_in"`
//		Attempts int  `json:"attempts" expr:"attempts"`
//	}
//	p, err := handoff.NewPolicy("Triage", rules, handoff.Env(Account{}))
func Env(v any) Option {
	return func(c *config) error {
		t := reflect.TypeOf(v)
		if t == nil || t.Kind() != reflect.Struct {
			return fmt.Errorf("%w: handoff: Env(%T): give a struct value", agency.ErrInvalidOption, v)
		}
		c.env = t
		return c.once("Env")
	}
}

// Relay configures the relay that sends the Policy's handoff messages
// from the store's outbox (see store.RelayConfig). The Policy gives it a
// Send of its own, which counts a handoff as delivered once the receiver
// answered (within half the Lease; see Policy), so cfg.Send is not used.
// Its Backoff defaults to 100ms and its MaxBackoff to 5s: a receiver that
// joins after the sender gets the handoff within seconds.
func Relay(cfg store.RelayConfig) Option {
	return func(c *config) error {
		c.relay = cfg
		return c.once("Relay")
	}
}

// AbsentWait sets how long a committed handoff waits for a receiver that
// is not in the space (a target with a typo, a tool's Reply naming an
// agent that never joined, one that left) before the conversation goes
// back to the agent that made it: the store names it the holder again, a
// handoff_returned event says why (its Reason starts with
// "no_recipient"), and the user is told. Default DefaultAbsentWait; the
// relay tries again meanwhile, so a receiver that joins within the wait
// (after a restart, say) gets the handoff. It goes back within d plus the
// relay's MaxBackoff.
func AbsentWait(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: handoff: AbsentWait(%v): a positive duration", agency.ErrInvalidOption, d)
		}
		c.absent = d
		return c.once("AbsentWait")
	}
}

// NewPolicy returns the policy of the agent self with the given rules. It
// compiles every condition and template now, and fails, naming the rule
// and the position of the mistake, on a syntax error, on an unknown name
// or a type error with Env, on a target a rule cannot have, on a bad or
// doubled tool name, or on an invalid option.
func NewPolicy(self string, rules []Rule, opts ...Option) (*Policy, error) {
	if err := agency.ValidateID(self); err != nil {
		return nil, fmt.Errorf("handoff: NewPolicy: %w", err)
	}
	var c config
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	return newPolicy(self, rules, c)
}

// newPolicy makes the Policy of self with the options already applied to
// c.
func newPolicy(self string, rules []Rule, c config) (*Policy, error) {
	if err := agency.ValidateID(self); err != nil {
		return nil, fmt.Errorf("handoff: NewPolicy: %w", err)
	}
	p := &Policy{self: self, managed: -1, static: map[string]bool{}, cfg: c}
	if p.cfg.store == nil {
		p.cfg.store = store.NewMemory()
	}
	if p.cfg.maxHops == 0 {
		p.cfg.maxHops = DefaultMaxHops
	}
	if p.cfg.absent == 0 {
		p.cfg.absent = DefaultAbsentWait
	}
	if p.cfg.filter == nil {
		p.cfg.filter = DropOtherToolCalls
	}
	if p.cfg.logger == nil {
		p.cfg.logger = slog.New(slog.DiscardHandler)
	}
	p.ev = events{obs: p.cfg.obs, logger: p.cfg.logger}
	for i, r := range rules {
		if err := p.addRule(r); err != nil {
			return nil, fmt.Errorf("handoff: rule %d of %s: %w", i+1, self, err)
		}
	}
	return p, nil
}

func (p *Policy) compile(src string) (*condition, error) {
	if src == "" {
		return nil, nil
	}
	return compile(src, p.cfg.env)
}

func (p *Policy) addRule(r Rule) error {
	switch r.kind {
	case ruleLLM:
		if err := r.to.valid(); err != nil {
			return err
		}
		if !r.to.moves() {
			return fmt.Errorf("OnLLM(%s): a transfer tool goes To an agent or Back", r.to)
		}
		name := r.name
		if name == "" {
			name = "transfer_back"
			if r.to.Kind == KindAgent {
				name = "transfer_to_" + r.to.Agent
			}
		}
		if err := p.claim(name); err != nil {
			return err
		}
		avail, err := p.compile(r.available)
		if err != nil {
			return err
		}
		p.transfers = append(p.transfers, transferRule{name: name, description: r.text, message: r.message, to: r.to, avail: avail})
	case ruleContext:
		if err := r.to.valid(); err != nil {
			return err
		}
		if !r.to.moves() {
			return fmt.Errorf("OnContext(%s): a condition hands the conversation To an agent or Back", r.to)
		}
		cond, err := p.compile(r.text)
		if err != nil {
			return err
		}
		if cond == nil {
			return errors.New("OnContext: an empty condition")
		}
		avail, err := p.compile(r.available)
		if err != nil {
			return err
		}
		p.contexts = append(p.contexts, contextRule{to: r.to, cond: cond, avail: avail, message: r.message})
	case ruleAfterWork:
		if err := r.to.valid(); err != nil {
			return err
		}
		if !p.afterWork.IsZero() {
			return errors.New("AfterWork given twice")
		}
		p.afterWork = r.to
	case ruleTemplate:
		if p.tmpl != nil {
			return errors.New("SystemTemplate given twice")
		}
		t, err := template.New(p.self).Option("missingkey=default").Parse(r.text)
		if err != nil {
			return fmt.Errorf("SystemTemplate: %w", err)
		}
		p.tmpl = t
	case ruleDispatch:
		if r.d == nil {
			return errors.New("Dispatch(nil)")
		}
		if r.manage {
			if p.managed >= 0 {
				return errors.New("Manage given to two Dispatch rules")
			}
			for _, t := range r.d.manageTools() {
				if err := p.claim(t.name); err != nil {
					return err
				}
			}
			p.managed = len(p.dispatch)
		}
		p.dispatch = append(p.dispatch, r.d)
	default:
		return errors.New("a zero Rule: make rules with OnLLM, OnContext, AfterWork, SystemTemplate or Dispatch")
	}
	return nil
}

// claim reserves a tool name of the agent's own.
func (p *Policy) claim(name string) error {
	if !namePattern.MatchString(name) || strings.Contains(name, "__") {
		return fmt.Errorf("tool name %q: want ^[a-zA-Z0-9_-]{1,64}$ without \"__\" (give one with Name)", name)
	}
	if p.static[name] {
		return fmt.Errorf("tool name %q used twice", name)
	}
	p.static[name] = true
	return nil
}

// staticTargets returns the agents the Policy's rules name: those of its
// OnLLM, OnContext and AfterWork rules and of its DefaultAfterWork.
func (p *Policy) staticTargets() []string {
	var out []string
	add := func(t Target) {
		if t.Kind == KindAgent && !slices.Contains(out, t.Agent) {
			out = append(out, t.Agent)
		}
	}
	for _, r := range p.transfers {
		add(r.to)
	}
	for _, r := range p.contexts {
		add(r.to)
	}
	add(p.afterWork)
	add(p.cfg.afterWork)
	return out
}

// Extension returns the extension to give the agent's openai.New (with
// openai.Extend). The agent should also be given openai.Deny("*",
// handoff.Action), so that other agents' handoff actions are not offered
// as tools (the transfer tools are the way to hand off), and
// openai.WithMemory(handoff.Memory(store, id)) to keep its histories in
// the store; Team does all three.
func (p *Policy) Extension() openai.Extension {
	return openai.Extension{
		Before:   p.before,
		Call:     p.call,
		Result:   p.result,
		Answer:   p.answer,
		Added:    p.added,
		Removing: p.removing,
	}
}

// Serve registers the handoff action on llm's agent (before it joins a
// space): a Transfer from one of the agents named in from makes llm take
// the conversation over (refused when the store says the transfer is stale
// or another agent holds the conversation) and continue it at once, on
// the history the Policy's FilterHistory keeps, answering the user.
func (p *Policy) Serve(llm *openai.Agent, from ...string) error {
	if len(from) == 0 {
		return fmt.Errorf("handoff: Serve on %q: name the agents that may hand over to it", p.self)
	}
	policy := make(map[string]agency.Access, len(from))
	for _, id := range from {
		policy[id] = agency.Permitted
	}
	return p.serve(llm, agency.AccessBySender(policy, agency.Denied))
}

func (p *Policy) serve(llm *openai.Agent, access agency.ActionOption) error {
	if llm.Agent().ID() != p.self {
		return fmt.Errorf("handoff: the policy of %q cannot serve %q", p.self, llm.Agent().ID())
	}
	return accept(llm.Agent(), func(ctx context.Context, t Transfer) error {
		return take(ctx, p.cfg.store, p.ev, p.self, t, p.writeAhead)
	}, func(ctx context.Context, t Transfer) error {
		c := openai.Continuation{Conversation: t.Conversation, Owner: t.owner(), Partner: t.User, ReplyTo: t.ReplyTo, Data: handedData(t)}
		if p.memory == nil {
			c.History = p.cfg.filter(p.self, t)
		}
		_, err := llm.Continue(ctx, c)
		return err
	}, access)
}

// handedData is the Data of the turn that continues a conversation handed
// over: the Transfer, without the history (which is in the memory).
func handedData(t Transfer) *Transfer {
	t.History = nil
	return &t
}

// writeAhead returns, for an agent whose histories are in the Policy's
// store (Memory, as Team has it), the changes that take writes with the
// conversation it takes over: the history the receiver continues on, and
// its turn, pending (see openai.Journal). So a crash after the sender was
// told that the handoff arrived loses nothing: the agent built again
// takes the turn up.
func (p *Policy) writeAhead(ctx context.Context, t Transfer) (store.Changes, error) {
	if p.memory == nil {
		return store.Changes{}, nil
	}
	m := agency.MessageFrom(ctx)
	if m == nil {
		return store.Changes{}, nil
	}
	key := openai.ConversationKey(t.owner(), t.Conversation)
	data, err := json.Marshal(handedData(t))
	if err != nil {
		return store.Changes{}, err
	}
	pt := openai.PendingTurn{ID: m.ID, Key: key, Owner: t.owner(), Conversation: t.Conversation, Partner: t.User,
		ReplyTo: t.ReplyTo, SayBack: true, Data: data, Started: time.Now().UTC()}
	old, err := p.cfg.store.Get(ctx, kindTurn, p.memory.turnID(pt))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Changes{}, err
	}
	turn, err := p.memory.turnDoc(pt, old.Version)
	if err != nil {
		return store.Changes{}, err
	}
	history, err := p.memory.changed(ctx, key, func([]openai.Message) []openai.Message { return p.cfg.filter(p.self, t) })
	if err != nil {
		return store.Changes{}, err
	}
	return store.Changes{Put: []store.Doc{history, turn}}, nil
}

// take makes self the holder of the conversation a Transfer hands over.
// A conversation the store knows is taken only from its holder, as the
// store has it: either the sender committed the handoff to self in the
// store (self holds it at the Transfer's version, and the sender is the
// last on its path), or the store has the sender as its holder at an
// older version (the sender did not commit the handoff here: it keeps its
// own store in another process, whose versions went on; such a store
// knows only the agent it handed the conversation to, so across stores a
// conversation comes back only from that one: processes that pass a
// conversation among more agents share one store). Anything else is
// refused (see admit), as is a Transfer that names another user than the
// store's: a handoff never changes who the user is.
func take(ctx context.Context, st store.Store, ev events, self string, t Transfer, with func(context.Context, Transfer) (store.Changes, error)) error {
	var from string
	if m := agency.MessageFrom(ctx); m != nil {
		from = m.From
	}
	c, err := updateConv(ctx, st, t.owner(), t.Conversation, func(c *Conversation, exists bool) (store.Changes, error) {
		if exists {
			if err := admit(*c, from, self, t); err != nil {
				return store.Changes{}, err
			}
		}
		*c = Conversation{ID: t.Conversation, Owner: t.owner(), Active: self, User: t.User, Vars: t.Vars, Version: t.Version + 1,
			Hops: t.Hops, Path: slices.Clone(t.Path), Status: StatusActive}
		if with == nil {
			return store.Changes{}, nil
		}
		return with(ctx, t)
	})
	if err != nil {
		ev.emit(ctx, Event{Kind: EventRefused, Conversation: t.Conversation, Agent: self, From: from, To: self,
			Name: t.Name, Hops: t.Hops, Path: t.Path, Version: t.Version, Err: err})
		return err
	}
	ev.emit(ctx, Event{Kind: EventAccepted, Conversation: t.Conversation, Agent: self, From: from, To: self,
		Name: t.Name, Message: t.Message, Hops: c.Hops, Path: c.Path, Version: c.Version, Vars: t.Vars})
	return nil
}

// admit reports why a Transfer from the agent from cannot make self the
// holder of the conversation c that the store holds, if it cannot: a
// later version (a resent handoff, or one another agent took; moved_on),
// a sender that does not hold it (not_holder), another user (refused).
func admit(c Conversation, from, self string, t Transfer) error {
	switch last := ""; {
	case c.Version > t.Version:
		return agency.ActionFailedf("%v: conversation %q is at version %d, the handoff at %d (it is stale, or was taken over already)", ErrMovedOn, t.Conversation, c.Version, t.Version)
	case c.Version == t.Version && c.Active != self:
		return agency.ActionFailedf("%v: conversation %q at version %d is held by %q", ErrMovedOn, t.Conversation, c.Version, c.Active)
	case c.Version == t.Version:
		if n := len(c.Path); n > 0 {
			last = c.Path[n-1]
		}
		if last != from {
			return agency.ActionFailedf("%v: %s did not hand conversation %q over: at version %d it was handed to %s by %q", ErrNotHolder, from, t.Conversation, c.Version, self, last)
		}
	case c.Active != from:
		return agency.ActionFailedf("%v: %s does not hold conversation %q: %s does, at version %d; only its holder hands it on", ErrNotHolder, from, t.Conversation, c.Active, c.Version)
	}
	if c.User != "" && t.User != c.User {
		return agency.ActionFailedf("%v: a handoff does not change the user of conversation %q (%s), and this one names %s", ErrRefused, t.Conversation, c.User, t.User)
	}
	return nil
}

func (p *Policy) added(ctx context.Context) {
	a := agency.AgentFrom(ctx)
	if a == nil {
		return
	}
	r := p.newRelay(a)
	p.mu.Lock()
	old := p.relay
	p.relay = r
	p.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	r.Start()
}

func (p *Policy) removing(context.Context) {
	p.mu.Lock()
	r := p.relay
	p.relay = nil
	p.mu.Unlock()
	if r != nil {
		r.Stop()
	}
}

func (p *Policy) wake() {
	p.mu.Lock()
	r := p.relay
	p.mu.Unlock()
	if r != nil {
		r.Wake()
	}
}

// begin returns the conversation as a model call of turn t finds it. The
// first call of a turn that a say started (the user spoke) makes the agent
// its holder and starts the hop count again.
func (p *Policy) begin(ctx context.Context, t *openai.Turn) (Conversation, error) {
	st := p.cfg.store
	if t.Step == 0 && t.Data == nil {
		return updateConv(ctx, st, t.Owner, t.Conversation, func(c *Conversation, exists bool) (store.Changes, error) {
			if exists && c.Active == p.self && c.Hops == 0 && len(c.Path) == 0 && c.Status == StatusActive {
				return store.Changes{}, errUnchanged
			}
			if !exists || c.User == "" {
				c.User = t.Partner
			}
			c.Active, c.Hops, c.Path, c.Status = p.self, 0, nil, StatusActive
			c.Version++
			return store.Changes{}, nil
		})
	}
	c, _, err := loadConv(ctx, st, t.Owner, t.Conversation)
	if errors.Is(err, store.ErrNotFound) {
		return Conversation{ID: t.Conversation, Owner: t.Owner, Active: p.self, User: t.Partner, Status: StatusActive}, nil
	}
	return c, err
}

// holds evaluates a rule's condition; nil holds. An evaluation error is a
// condition_error event, and the condition does not hold.
func (p *Policy) holds(ctx context.Context, c *condition, conv Conversation) bool {
	if c == nil {
		return true
	}
	ok, err := c.eval(conv.Vars)
	if err != nil {
		p.ev.emit(ctx, Event{Kind: EventConditionError, Conversation: conv.ID, Agent: p.self, Name: c.String(), Version: conv.Version, Err: err})
		return false
	}
	return ok
}

func (p *Policy) before(ctx context.Context, t *openai.Turn, r *openai.Request) error {
	conv, err := p.begin(ctx, t)
	if err != nil {
		return err
	}
	for _, rule := range p.contexts {
		if !p.holds(ctx, rule.avail, conv) || !p.holds(ctx, rule.cond, conv) {
			continue
		}
		to, err := p.check(ctx, conv, rule.to, rule.cond.String())
		if err != nil {
			continue // the model is asked instead
		}
		p.ev.emit(ctx, Event{Kind: EventCondition, Conversation: conv.ID, Agent: p.self, From: p.self, To: to, Name: rule.cond.String(), Version: conv.Version})
		h := hand{to: to, name: "on_context", message: orDefault(rule.message, to)}
		t.End(func(ctx context.Context, t *openai.Turn) { p.handoff(ctx, t, h) })
		return nil
	}
	if p.tmpl != nil {
		var b strings.Builder
		if err := p.tmpl.Execute(&b, map[string]any(conv.Vars)); err != nil {
			return fmt.Errorf("handoff: SystemTemplate: %w", err)
		}
		r.System = b.String()
	}
	transfers := false
	for _, tr := range p.transfers {
		if p.holds(ctx, tr.avail, conv) {
			r.Tools = append(r.Tools, openai.Tool{Name: tr.name, Description: tr.description})
			transfers = true
		}
	}
	for i, d := range p.dispatch {
		key := openai.ConversationKey(t.Owner, t.Conversation)
		table, dropped, err := p.table(ctx, i, key)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(dropped, func(e entry) bool { return !e.Revoked }) {
			p.drop(ctx, t, i, key)
		}
		for _, h := range enabled(table) {
			if p.static[h.Name] || slices.ContainsFunc(r.Tools, func(x openai.Tool) bool { return x.Name == h.Name }) {
				continue // a name another tool has
			}
			r.Tools = append(r.Tools, openai.Tool{Name: h.Name, Description: h.Description})
			transfers = true
		}
		if i == p.managed {
			for _, x := range d.manageTools() {
				r.Tools = append(r.Tools, openai.Tool{Name: x.name, Description: x.description, Parameters: x.params})
			}
		}
	}
	if transfers {
		off := false
		r.Params.ParallelToolCalls = &off
	}
	meta := make(map[string]any, len(r.Meta)+2)
	maps.Copy(meta, r.Meta)
	vars := maps.Clone(conv.Vars)
	if vars == nil {
		vars = Vars{}
	}
	meta[metaVars], meta[metaVersion] = vars, conv.Version
	r.Meta = meta
	return nil
}

// hand is a handoff about to be made.
type hand struct {
	to, name, message, call string
	set                     Vars // variables a tool's Reply sets with it
}

func orDefault(message, to string) string {
	if message != "" {
		return message
	}
	return fmt.Sprintf("Transferred to %s. Adopt persona immediately.", to)
}

// check resolves a target of the conversation to an agent and checks the
// loop limits; a refusal is an event too.
func (p *Policy) check(ctx context.Context, conv Conversation, target Target, name string) (string, error) {
	to, err := p.resolve(conv, target)
	if err == nil && conv.Active != p.self {
		err = fmt.Errorf("%w: %s does not hold this conversation any more: %s does", ErrNotHolder, p.self, conv.Active)
	}
	if err == nil {
		err = p.limits(conv, to)
	}
	if err != nil {
		kind := EventRefused
		if errors.Is(err, ErrLoopLimit) {
			kind = EventLoopLimit
		}
		p.ev.emit(ctx, Event{Kind: kind, Conversation: conv.ID, Agent: p.self, From: p.self, To: to, Name: name,
			Hops: conv.Hops, Path: conv.Path, Version: conv.Version, Err: err})
	}
	return to, err
}

func (p *Policy) resolve(conv Conversation, target Target) (string, error) {
	switch target.Kind {
	case KindAgent:
		return target.Agent, nil
	case KindBack:
		if len(conv.Path) == 0 {
			return "", fmt.Errorf("%w: no agent handed this conversation over since the user's last message: there is nobody to go back to", ErrNoTarget)
		}
		return conv.Path[len(conv.Path)-1], nil
	}
	return "", fmt.Errorf("%w: a %s target hands nothing over", ErrNoTarget, target.Kind)
}

// limits refuses a handoff to the agent to that would exceed the hop
// budget or continue a ping-pong.
func (p *Policy) limits(conv Conversation, to string) error {
	if to == p.self {
		return fmt.Errorf("%w: %s holds this conversation already", ErrNotHolder, p.self)
	}
	if conv.Hops >= p.cfg.maxHops {
		s := "s"
		if conv.Hops == 1 {
			s = ""
		}
		return fmt.Errorf("%w: %d handoff%s since the user's last message (%s); answer the user instead",
			ErrLoopLimit, conv.Hops, s, strings.Join(append(slices.Clone(conv.Path), p.self), "→"))
	}
	if nodes := append(slices.Clone(conv.Path), p.self); len(nodes) > pingPongs {
		last := nodes[len(nodes)-pingPongs-1:]
		a, b := last[0], last[1]
		pingPong := a != b && (to == a || to == b)
		for i, n := range last {
			if (i%2 == 0 && n != a) || (i%2 == 1 && n != b) {
				pingPong = false
			}
		}
		if pingPong {
			return fmt.Errorf("%w: %s and %s handed this conversation back and forth %d times since the user's last message; answer the user instead",
				ErrLoopLimit, p.self, to, pingPongs)
		}
	}
	return nil
}

// handoff commits a handoff of turn t's conversation: the conversation
// (its new holder, version, hops and path), the log entry and the
// handoff message in the outbox, in one Apply. Then the relay sends the
// message. When it cannot be made (another agent took the conversation
// meanwhile, the store fails), the user is told.
func (p *Policy) handoff(ctx context.Context, t *openai.Turn, h hand) {
	id := agency.NewID()
	var tr Transfer
	conv, err := updateConv(ctx, p.cfg.store, t.Owner, t.Conversation, func(c *Conversation, exists bool) (store.Changes, error) {
		if !exists {
			c.Active, c.User, c.Status = p.self, t.Partner, StatusActive
		}
		if c.User == "" {
			c.User = t.Partner
		}
		if c.Active != p.self {
			return store.Changes{}, fmt.Errorf("%w: %s does not hold conversation %q any more: %s does", ErrNotHolder, p.self, t.Conversation, c.Active)
		}
		if err := p.limits(*c, h.to); err != nil {
			return store.Changes{}, err
		}
		if len(h.set) > 0 {
			c.Vars = c.Vars.merge(h.set)
		}
		c.Path = append(c.Path, p.self)
		c.Hops++
		c.Active, c.Status = h.to, StatusActive
		c.Version++
		tr = Transfer{Conversation: t.Conversation, User: c.User, ReplyTo: replyTo(ctx, t), Name: h.name, Message: h.message, Call: h.call,
			Vars: c.Vars, Version: c.Version, Hops: c.Hops, Path: slices.Clone(c.Path), History: t.History}
		if t.Owner != c.User {
			tr.Owner = t.Owner
		}
		meta := map[string]any{metaConversation: t.Conversation}
		if tp := agency.Traceparent(ctx); tp != "" {
			meta[agency.TraceparentKey] = tp
		}
		out, err := store.NewOutgoing(p.self, &agency.Message{ID: id, To: h.to, Action: Action, Args: tr, Meta: meta})
		if err != nil {
			return store.Changes{}, err
		}
		entry, err := json.Marshal(LogEntry{From: p.self, To: h.to, Name: h.name, Hops: c.Hops, Path: c.Path, Version: c.Version})
		if err != nil {
			return store.Changes{}, err
		}
		ch := store.Changes{
			Put:  []store.Doc{{Kind: kindLog, ID: id, Parent: openai.ConversationKey(t.Owner, t.Conversation), Session: t.Conversation, User: t.Owner, Body: entry}},
			Send: []store.Outgoing{out},
		}
		// The turn ends with the handoff: a crash after this Apply must not
		// resume it.
		if pt, ok := t.Pending(); ok && p.memory != nil {
			d, err := p.cfg.store.Get(ctx, kindTurn, p.memory.turnID(pt))
			switch {
			case err == nil:
				ch.Delete = append(ch.Delete, store.Doc{Kind: kindTurn, ID: d.ID, Version: d.Version})
			case !errors.Is(err, store.ErrNotFound):
				return store.Changes{}, err
			}
		}
		return ch, nil
	})
	if err != nil {
		p.ev.emit(ctx, Event{Kind: EventRefused, Conversation: t.Conversation, Agent: p.self, From: p.self, To: h.to, Name: h.name,
			Hops: conv.Hops, Path: conv.Path, Version: conv.Version, Err: err})
		p.tell(ctx, t, fmt.Sprintf("Sorry, I could not hand this conversation to %s: %v", h.to, err), false)
		return
	}
	if len(h.set) > 0 {
		p.ev.emit(ctx, Event{Kind: EventVars, Conversation: t.Conversation, Agent: p.self, Name: h.name, Version: conv.Version, Vars: h.set})
	}
	p.ev.emit(ctx, Event{Kind: EventHandoff, Conversation: t.Conversation, Agent: p.self, From: p.self, To: h.to, Name: h.name,
		Message: h.message, Hops: conv.Hops, Path: conv.Path, Version: conv.Version, Vars: tr.Vars})
	if p.committed != nil {
		p.committed(ctx, tr)
	}
	p.wake()
}

// replyTo returns the id of the user's message that turn t answers: the
// say that started it, or, for a turn of a conversation handed over, what
// the handoff carried.
func replyTo(ctx context.Context, t *openai.Turn) string {
	switch d := t.Data.(type) {
	case *Transfer:
		return d.ReplyTo
	case json.RawMessage: // a resumed turn's (see openai.Journal)
		var tr Transfer
		if json.Unmarshal(d, &tr) == nil {
			return tr.ReplyTo
		}
	}
	if m := agency.MessageFrom(ctx); m != nil && m.Action == "say" {
		return m.ID
	}
	return ""
}

// tell says text to the turn's partner in its conversation, as the
// conversation's last answer when final is set (the conversation is then
// marked terminated).
func (p *Policy) tell(ctx context.Context, t *openai.Turn, text string, final bool) {
	meta := map[string]any{metaConversation: t.Conversation}
	if final {
		meta[metaFinal] = true
		p.terminate(ctx, t)
	}
	if _, err := t.Agent().SendMessage(ctx, &agency.Message{To: t.Partner, Action: "say", Args: openai.SayArgs{Content: text}, Meta: meta}); err != nil {
		p.cfg.logger.Warn("handoff: could not tell the user", "conversation", t.Conversation, "agent", p.self, "to", t.Partner, "error", err)
	}
}

func (p *Policy) terminate(ctx context.Context, t *openai.Turn) {
	conversation := t.Conversation
	_, err := updateConv(ctx, p.cfg.store, t.Owner, conversation, func(c *Conversation, exists bool) (store.Changes, error) {
		if c.Status == StatusTerminated {
			return store.Changes{}, errUnchanged
		}
		if !exists {
			c.Active = p.self
		}
		c.Status = StatusTerminated
		c.Version++
		return store.Changes{}, nil
	})
	if err != nil {
		p.cfg.logger.Warn("handoff: could not close the conversation", "conversation", conversation, "agent", p.self, "error", err)
	}
}

func (p *Policy) call(ctx context.Context, t *openai.Turn, c openai.ToolCall) (string, error) {
	switch c.Name {
	case toolCreate, toolEnable, toolDisable, toolDelete:
		if p.managed >= 0 {
			return p.manage(ctx, t, c)
		}
	}
	var target Target
	var message string
	if i := slices.IndexFunc(p.transfers, func(tr transferRule) bool { return tr.name == c.Name }); i >= 0 {
		target, message = p.transfers[i].to, p.transfers[i].message
	} else {
		h, ok, err := p.entry(ctx, t, c.Name)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("not_found: there is no tool named %q; call one of the tools you have", c.Name)
		}
		target, message = To(h.Target), h.Message
	}
	if t.Ended() {
		return "", fmt.Errorf("only one handoff per reply; %s was not made", c.Name)
	}
	conv, err := p.begin(ctx, t)
	if err != nil {
		return "", err
	}
	to, err := p.check(ctx, conv, target, c.Name)
	if err != nil {
		return "", err
	}
	h := hand{to: to, name: c.Name, message: orDefault(message, to), call: c.ID}
	t.End(func(ctx context.Context, t *openai.Turn) { p.handoff(ctx, t, h) })
	return h.message, nil
}

func (p *Policy) result(ctx context.Context, t *openai.Turn, r *openai.Result) error {
	rep, ok := parseReply(r.Content)
	if !ok {
		return nil
	}
	r.Content = string(rep.Value)
	if r.Content == "" {
		r.Content = "null"
	}
	g := Target{Kind: KindStay}
	if rep.Goto != nil {
		g = *rep.Goto
	}
	if err := g.valid(); err != nil {
		r.Content += "\nerror: " + err.Error()
		g = Stay()
	}
	if g.moves() && !t.Ended() {
		// The variables are set by the handoff's own Apply: one version.
		conv, err := p.begin(ctx, t)
		if err != nil {
			return err
		}
		to, err := p.check(ctx, conv, g, r.Call.Name)
		if err == nil {
			h := hand{to: to, name: r.Call.Name, message: orDefault("", to), set: rep.Set}
			t.End(func(ctx context.Context, t *openai.Turn) { p.handoff(ctx, t, h) })
			return nil
		}
		r.Content += "\nerror: " + err.Error()
		g = Stay()
	}
	if err := p.set(ctx, t, r.Call.Name, rep.Set); err != nil {
		return err
	}
	switch {
	case g.Kind == KindStay:
	case t.Ended():
		r.Content += fmt.Sprintf("\nerror: only one handoff per reply; going to %s was not done", g)
	case g.Kind == KindUser || g.Kind == KindTerminate:
		// The value is the turn's answer: in the history, as the model's,
		// and said to the user.
		answer, final := text(rep.Value), g.Kind == KindTerminate
		t.End(func(ctx context.Context, t *openai.Turn) {
			if err := t.Record(ctx, openai.Message{Role: openai.RoleAssistant, Name: p.self, Content: answer}); err != nil {
				p.cfg.logger.Warn("handoff: the answer is not in the history", "conversation", t.Conversation, "agent", p.self, "error", err)
			}
			p.tell(ctx, t, answer, final)
		})
	}
	return nil
}

// set puts variables a tool's Reply set into the conversation.
func (p *Policy) set(ctx context.Context, t *openai.Turn, tool string, vars Vars) error {
	if len(vars) == 0 {
		return nil
	}
	conv, err := updateConv(ctx, p.cfg.store, t.Owner, t.Conversation, func(c *Conversation, exists bool) (store.Changes, error) {
		if !exists {
			c.Active, c.User, c.Status = p.self, t.Partner, StatusActive
		}
		c.Vars = c.Vars.merge(vars)
		c.Version++
		return store.Changes{}, nil
	})
	if err != nil {
		return err
	}
	p.ev.emit(ctx, Event{Kind: EventVars, Conversation: t.Conversation, Agent: p.self, Name: tool, Version: conv.Version, Vars: vars})
	return nil
}

func (p *Policy) answer(ctx context.Context, t *openai.Turn, a *openai.Answer) error {
	target := p.afterWork
	if target.IsZero() {
		target = p.cfg.afterWork
	}
	if target.IsZero() || target.Kind == KindUser {
		return nil
	}
	ev := Event{Kind: EventAfterWork, Conversation: t.Conversation, Agent: p.self, Name: target.String()}
	switch target.Kind {
	case KindStay:
		a.Again = true
	case KindTerminate:
		if a.Meta == nil {
			a.Meta = map[string]any{}
		}
		a.Meta[metaFinal] = true
		p.terminate(ctx, t)
	default:
		conv, err := p.begin(ctx, t)
		if err != nil {
			return err
		}
		to, err := p.check(ctx, conv, target, "after_work")
		if err != nil {
			return nil // the answer went to the user, who has the conversation's next word
		}
		if a.Meta == nil {
			a.Meta = map[string]any{}
		}
		a.Meta[metaHandedTo] = to
		ev.From, ev.To = p.self, to
		h := hand{to: to, name: "after_work", message: orDefault("", to)}
		t.End(func(ctx context.Context, t *openai.Turn) { p.handoff(ctx, t, h) })
	}
	p.ev.emit(ctx, ev)
	return nil
}
