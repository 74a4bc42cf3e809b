package handoff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// Team wires a set of agents that hand conversations to each other: LLM
// agents with their rules (Agent), people (Human), and a user agent that
// runs a conversation from a human.Front or a script (UserAgent, Run).
// Set its fields, then call its methods; the zero value of a field is its
// default. Its Options are those of NewPolicy, for every agent it makes:
//
//	team := &handoff.Team{LLM: llmOpts, Options: []handoff.Option{
//		handoff.WithStore(st), handoff.MaxHops(6), handoff.DefaultAfterWork(handoff.RevertToUser())}}
//
// The agents it makes accept handoffs from the team's members only: the
// agents made by this Team, and those named in Members (the members that
// live in other processes). Its methods are safe for concurrent use.
type Team struct {
	// UserID is the id of the agent that speaks for the user (default
	// "User"): UserAgent's, or a human.User's of your own.
	UserID string
	// Options are the Policy options of every agent of the team
	// (WithStore, MaxHops, DefaultAfterWork, FilterHistory, Observe,
	// Logger, Env, Relay, AbsentWait). The store of WithStore (default
	// store.NewMemory()) also keeps the team's conversations, handoff logs,
	// dispatcher tables and the LLM agents' histories; the observer gets
	// the events of every agent. An invalid option fails the first method
	// that makes an agent, and Run.
	Options []Option
	// LLM are options for every LLM agent (the model, its server, …).
	// Team adds SystemPrompt, Extend, WithMemory and Deny("*", Action)
	// itself, so LLM must not hold the first three.
	LLM []openai.Option
	// AgentLLM are options for one LLM agent, by id, after LLM (its own
	// model server, say).
	AgentLLM map[string][]openai.Option
	// Members names the agents of the team that this Team does not make
	// (they run in other processes): they may hand conversations to the
	// Team's agents too.
	Members []string
	// Hooks are hook values (see agency.Hooks) of every agent the Team
	// makes: its UserAgent, its LLM agents and its persons. With a tracing
	// instrumentation among them (package agency/otelagency), a Run with a
	// traced context is one trace: its says, model calls, tool calls and
	// handoffs, with the handoff events as span events.
	Hooks []any

	once     sync.Once
	cfg      config // the Options applied
	err      error  // why they could not be
	mu       sync.Mutex
	local    map[string]bool // ids of the agents this Team made
	llms     map[string]*openai.Agent
	policies map[string]*Policy
	user     *teamUser
	limits   map[string]int // conversation → loop limits since the user's last message, while a Run runs it
}

func (t *Team) init() error {
	t.once.Do(func() {
		if t.UserID == "" {
			t.UserID = "User"
		}
		for _, o := range t.Options {
			if err := o(&t.cfg); err != nil {
				t.err = fmt.Errorf("handoff: Team.Options: %w", err)
				break
			}
		}
		if t.cfg.store == nil {
			t.cfg.store = store.NewMemory()
		}
		if t.cfg.logger == nil {
			t.cfg.logger = slog.New(slog.DiscardHandler)
		}
		if t.cfg.filter == nil {
			t.cfg.filter = DropOtherToolCalls
		}
		t.local = map[string]bool{}
		t.llms = map[string]*openai.Agent{}
		t.policies = map[string]*Policy{}
		t.limits = map[string]int{}
	})
	return t.err
}

// Store returns where the team keeps its conversations: the store of
// WithStore among its Options, or the store.NewMemory it made.
func (t *Team) Store() store.Store {
	_ = t.init()
	return t.cfg.store
}

// access lets the team's members hand over to its agents.
func (t *Team) access(m *agency.Message) agency.Access {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.local[m.From] || slices.Contains(t.Members, m.From) {
		return agency.Permitted
	}
	return agency.Denied
}

func (t *Team) member(id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.local[id] {
		return fmt.Errorf("handoff: the team has an agent %q already", id)
	}
	if id == t.UserID {
		return fmt.Errorf("handoff: %q is the team's user", id)
	}
	t.local[id] = true
	return nil
}

func (t *Team) events() events {
	return events{obs: ObserverFunc(t.observe), logger: t.cfg.logger}
}

// observe counts the loop limits of conversations that a Run runs, and
// passes every event on.
func (t *Team) observe(ctx context.Context, e Event) {
	if e.Kind == EventLoopLimit {
		t.mu.Lock()
		if _, running := t.limits[e.Conversation]; running {
			t.limits[e.Conversation]++
		}
		t.mu.Unlock()
	}
	if t.cfg.obs != nil {
		t.cfg.obs.Event(ctx, e)
	}
}

// Agent makes an LLM agent of the team, with the system prompt and
// rules given, and the team's store, after-work, hop budget and options.
// Add its Agent() to a space.
func (t *Team) Agent(id, prompt string, rules ...Rule) (*openai.Agent, error) {
	if err := t.init(); err != nil {
		return nil, err
	}
	c := t.cfg
	c.obs = ObserverFunc(t.observe)
	p, err := newPolicy(id, rules, c)
	if err != nil {
		return nil, err
	}
	p.memory = &memory{st: t.cfg.store, agent: id}
	llmOpts := append(slices.Concat(t.LLM, t.AgentLLM[id]), openai.SystemPrompt(prompt), openai.Extend(p.Extension()),
		openai.Deny("*", Action), openai.WithMemory(p.memory))
	if opts := t.agentOptions(); len(opts) > 0 {
		llmOpts = append(llmOpts, openai.AgentOptions(opts...))
	}
	llm, err := openai.New(id, llmOpts...)
	if err != nil {
		return nil, err
	}
	if err := p.serve(llm, agency.AccessFunc(t.access)); err != nil {
		return nil, err
	}
	if err := t.member(id); err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.llms[id], t.policies[id] = llm, p
	t.mu.Unlock()
	return llm, nil
}

// Human makes a person of the team, reached through f, who takes over
// conversations handed to them: they are shown the conversation so far (a
// note, then each line the user and the agents said), and their answer
// goes to the user; from then on the user's lines come to their say, each
// answered by the person. A person hands nothing on. Add its Agent() to a
// space.
func (t *Team) Human(id string, f human.Front) (*human.Agent, error) {
	if err := t.init(); err != nil {
		return nil, err
	}
	person, err := human.New(id, f, t.agentOptions()...)
	if err != nil {
		return nil, err
	}
	ev, filter := t.events(), t.cfg.filter
	err = accept(person.Agent(), func(ctx context.Context, tr Transfer) error {
		return take(ctx, t.cfg.store, ev, id, tr, nil)
	}, func(ctx context.Context, tr Transfer) error {
		_, err := person.Take(ctx, human.Handover{Conversation: tr.Conversation, Owner: tr.owner(), User: tr.User,
			ReplyTo: tr.ReplyTo, History: briefing(id, tr, filter(id, tr))})
		return err
	}, agency.AccessFunc(t.access))
	if err != nil {
		return nil, err
	}
	if err := t.member(id); err != nil {
		return nil, err
	}
	return person, nil
}

// agentOptions are the agency options of the agents the Team makes.
func (t *Team) agentOptions() []agency.Option {
	opts := make([]agency.Option, len(t.Hooks))
	for i, h := range t.Hooks {
		opts[i] = agency.Hooks(h)
	}
	return opts
}

// briefing is what a person who takes over a conversation is shown: a
// note saying who handed it over and why, each thing the user and the
// agents said in history (verbatim, one Line each), and a note that their
// answer goes to the user.
func briefing(self string, t Transfer, history []openai.Message) []human.Line {
	from := "another agent"
	if len(t.Path) > 0 {
		from = t.Path[len(t.Path)-1]
	}
	note := fmt.Sprintf("--- %s, %s hands you conversation %s", self, from, t.Conversation)
	if t.Message != "" {
		note += ": " + t.Message
	}
	lines := []human.Line{{Text: note + "\n"}}
	for _, m := range history {
		if m.Content == "" || (m.Role != openai.RoleUser && m.Role != openai.RoleAssistant) {
			continue
		}
		who := m.Name
		if who == "" {
			who = m.Role
		}
		lines = append(lines, human.Line{From: who, Text: m.Content})
	}
	return append(lines, human.Line{Text: fmt.Sprintf("--- your answer goes to %s\n", t.User)})
}

// Check reports the static targets of the team's agents (OnLLM,
// OnContext and AfterWork rules, DefaultAfterWork) that name no member:
// no agent this Team made and none named in Members. Call it once every
// agent is made (Run does, and refuses to start a team that fails it): a
// target with a typo is then an error, not a handoff that waits for an
// agent that never comes.
func (t *Team) Check() error {
	if err := t.init(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(t.policies)) {
		for _, target := range t.policies[id].staticTargets() {
			if !t.local[target] && !slices.Contains(t.Members, target) {
				errs = append(errs, fmt.Errorf("handoff: a rule of %s hands to %q, which is no member of the team (members: %s; name those of other processes in Members)",
					id, target, strings.Join(t.memberIDs(), ", ")))
			}
		}
	}
	return errors.Join(errs...)
}

// memberIDs returns the ids of the team's members, sorted; t.mu is held.
func (t *Team) memberIDs() []string {
	ids := slices.Concat(slices.Collect(maps.Keys(t.local)), t.Members)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Holder returns the agent that holds a conversation of the team's user
// (UserID) according to the team's store ("" when it does not know the
// conversation).
func (t *Team) Holder(ctx context.Context, conversation string) (string, error) {
	if err := t.init(); err != nil {
		return "", err
	}
	return Holder(ctx, t.cfg.store, t.UserID, conversation)
}

// Start is how Run starts a conversation.
type Start struct {
	// Agent gets the first message.
	Agent string
	// Message is the user's first message.
	Message string
	// Conversation is the conversation's id (default: a new one). A
	// conversation the store knows goes on: its variables are kept, with
	// Vars put in.
	Conversation string
	// Vars are the context variables the conversation starts with.
	Vars Vars
	// User is shown every answer and asked for the user's next message
	// whenever the conversation reverts to the user, until they say
	// "exit" or their input ends. Without one, Run returns as soon as the
	// conversation reverts to the user.
	User human.Front
}

// The statuses of a Result.
const (
	RunTerminated   = "terminated"    // an agent terminated the conversation, or the user left
	RunAwaitingUser = "awaiting_user" // the conversation reverted to the user, and Start.User is nil
	RunLoopLimit    = "loop_limit"    // as awaiting_user, after a loop limit stopped a handoff since the user's last message
	RunFailed       = "failed"        // Run returned an error
)

// Result is how a Run ended.
type Result struct {
	// History is the conversation as its last agent has it (or, when that
	// is not an LLM agent of this Team, the messages the user said and
	// was told).
	History []openai.Message
	Vars    Vars   // the conversation's variables at the end
	Last    string // the agent that answered last
	Status  string // one of the Run* constants
}

// UserAgent returns the agent through which Run speaks for the user, with
// the id UserID. Add it to the space before Run.
func (t *Team) UserAgent() *agency.Agent {
	_ = t.init() // an invalid option fails Run
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.user == nil {
		t.user = newTeamUser(t.UserID, agency.AccessFunc(t.access), t.agentOptions()...)
	}
	return t.user.agent
}

// Run runs a conversation, as AG2's initiate_swarm_chat does: it sets the
// conversation's variables, says s.Message to s.Agent as the user, and
// waits for the answer (from whichever agent holds the conversation by
// then). It goes on with s.User's next line, to the agent that answered,
// until an agent terminates the conversation or the user says "exit". The
// UserAgent must be in the space.
func (t *Team) Run(ctx context.Context, s Start) (Result, error) {
	t.UserAgent()
	if s.Agent == "" || s.Message == "" {
		return Result{Status: RunFailed}, errors.New("handoff: Run needs a Start.Agent and a Start.Message")
	}
	if err := t.Check(); err != nil {
		return Result{Status: RunFailed}, err
	}
	conv := s.Conversation
	if conv == "" {
		conv = agency.NewID()
	}
	_, err := updateConv(ctx, t.cfg.store, t.UserID, conv, func(c *Conversation, exists bool) (store.Changes, error) {
		c.Vars = c.Vars.merge(s.Vars)
		c.Active, c.User, c.Hops, c.Path, c.Status = s.Agent, t.UserID, 0, nil, StatusActive
		c.Version++
		return store.Changes{}, nil
	})
	if err != nil {
		return Result{Status: RunFailed}, err
	}
	u := t.user
	r := u.open(conv)
	defer u.close(conv)
	t.mu.Lock()
	t.limits[conv] = 0
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.limits, conv)
		t.mu.Unlock()
	}()

	holder, text, status := s.Agent, s.Message, ""
	var transcript []openai.Message
	for status == "" {
		mark := r.count()
		t.mu.Lock()
		t.limits[conv] = 0
		t.mu.Unlock()
		transcript = append(transcript, openai.Message{Role: openai.RoleUser, Name: t.UserID, Content: text})
		_, err := u.agent.RequestMessage(ctx, &agency.Message{To: holder, Action: "say",
			Args: openai.SayArgs{Content: text}, Meta: map[string]any{metaConversation: conv}})
		var ae *agency.ActionError
		switch {
		case err == nil:
		case errors.As(err, &ae) && ae.Type == agency.TypeActionFailed:
			// the agent failed its turn and said why
		default:
			return Result{Last: holder, Status: RunFailed}, fmt.Errorf("handoff: Run: the say to %s: %w", holder, err)
		}
		says, err := r.wait(ctx, mark)
		if err != nil {
			return Result{Last: holder, Status: RunFailed}, err
		}
		for _, h := range says {
			transcript = append(transcript, openai.Message{Role: openai.RoleAssistant, Name: h.from, Content: h.text})
			if s.User != nil {
				_ = s.User.Show(ctx, human.Line{Conversation: conv, From: h.from, Text: h.text})
			}
		}
		last := says[len(says)-1]
		holder = last.from
		switch {
		case last.final:
			status = RunTerminated
		case s.User == nil:
			status = RunAwaitingUser
			t.mu.Lock()
			if t.limits[conv] > 0 {
				status = RunLoopLimit
			}
			t.mu.Unlock()
		default:
			line, err := nextLine(ctx, s.User, conv)
			if errors.Is(err, io.EOF) || line == "exit" {
				status = RunTerminated
				break
			}
			if err != nil {
				return Result{Last: holder, Status: RunFailed}, err
			}
			text = line
		}
	}
	res := Result{Last: holder, Status: status, History: transcript}
	t.mu.Lock()
	_, isLLM := t.llms[holder]
	t.mu.Unlock()
	if isLLM {
		if h, err := Memory(t.cfg.store, holder).Load(ctx, openai.ConversationKey(t.UserID, conv)); err == nil {
			res.History = h
		}
	}
	c, err := LoadConversation(ctx, t.cfg.store, t.UserID, conv)
	if err != nil {
		return res, err
	}
	res.Vars = c.Vars
	return res, nil
}

// nextLine asks the user for their next message, skipping empty lines.
func nextLine(ctx context.Context, f human.Front, conv string) (string, error) {
	for {
		line, err := f.Ask(ctx, human.Line{})
		if err != nil {
			return "", err
		}
		if line = strings.TrimSpace(line); line != "" {
			return line, nil
		}
	}
}

// teamUser is the agent of Run: its say records what the agents tell the
// user, per conversation under way.
type teamUser struct {
	agent *agency.Agent
	mu    sync.Mutex
	runs  map[string]*runSays
}

type runSays struct {
	u       *teamUser
	says    []heard
	changed chan struct{}
}

type heard struct {
	from, text string
	final      bool
	handedTo   string
}

// newTeamUser makes the agent of Run; access lets only the team's members
// tell the user something, so that no other agent takes a conversation
// over by saying something in it.
func newTeamUser(id string, access agency.ActionOption, opts ...agency.Option) *teamUser {
	u := &teamUser{runs: map[string]*runSays{}}
	u.agent = agency.MustNewAgent(id, opts...)
	agency.Handle(u.agent, "say", u.say, access, agency.Describe("Tell the user something"), agency.Returns("that the user was told"))
	return u
}

func (u *teamUser) say(ctx context.Context, args openai.SayArgs) (string, error) {
	m := agency.MessageFrom(ctx)
	conv, _ := m.Meta[metaConversation].(string)
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.runs[conv]
	if r == nil {
		return "", agency.InvalidArgsf("no conversation %q is under way with %s", conv, u.agent.ID())
	}
	h := heard{from: m.From, text: args.Content}
	h.final, _ = m.Meta[metaFinal].(bool)
	h.handedTo, _ = m.Meta[metaHandedTo].(string)
	r.says = append(r.says, h)
	close(r.changed)
	r.changed = make(chan struct{})
	return "told", nil
}

func (u *teamUser) open(conv string) *runSays {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := &runSays{u: u, changed: make(chan struct{})}
	u.runs[conv] = r
	return r
}

func (u *teamUser) close(conv string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.runs, conv)
}

func (r *runSays) count() int {
	r.u.mu.Lock()
	defer r.u.mu.Unlock()
	return len(r.says)
}

// wait returns the says after mark once one of them is an answer: a say
// that does not hand the conversation on.
func (r *runSays) wait(ctx context.Context, mark int) ([]heard, error) {
	for {
		r.u.mu.Lock()
		says, changed := slices.Clone(r.says[mark:]), r.changed
		r.u.mu.Unlock()
		if i := slices.IndexFunc(says, func(h heard) bool { return h.handedTo == "" }); i >= 0 {
			return says[:i+1], nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
