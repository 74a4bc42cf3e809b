package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/seed72275b23/agency-go/agency"
)

// catalog holds what the agent knows of the space: every other agent it has
// heard from and the actions that agent's help offers it. Hooks and turns
// read and write it from several goroutines, hence the lock.
type catalog struct {
	mu      sync.Mutex
	agents  map[string][]toolSpec             // agent id → its actions, sorted by name
	asking  *simplelru.LRU[string, helpAsked] // agent id → the help sent to it and not answered yet
	changed chan struct{}                     // closed and replaced on every change (tests wait on it)
	asked   time.Time                         // when the space was last surveyed
	survey  chan struct{}                     // closed when the survey under way ends; nil when none is
	stop    context.CancelFunc                // ends the survey made on joining, while it runs
	probes  map[string]chan struct{}          // id of a help sent by refresh → closed once its answer is taken
}

// helpAsked is the latest help sent to one agent, whose answer has not
// come.
type helpAsked struct {
	id    string    // the help message's id
	at    time.Time // when it was sent
	spoke bool      // the agent sent something since
}

// maxAsking bounds the agents whose answer to help the agent awaits at
// once: past it, the one asked longest ago is forgotten (its answer is
// still taken when it comes; meanwhile it may be asked again).
const maxAsking = 256

// toolSpec is one action of another agent, as the model sees it.
type toolSpec struct {
	Agent, Action string
	Description   string
	Params        json.RawMessage // the action's args schema, unchanged
}

func (c *catalog) init() {
	c.agents = make(map[string][]toolSpec)
	c.asking = newLRU[helpAsked](maxAsking)
	c.changed = make(chan struct{})
	c.probes = make(map[string]chan struct{})
}

// notify wakes whoever waits for a change; c.mu is held.
func (c *catalog) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// snapshot returns every tool that allow and deny let through, sorted by
// agent and action.
func (c *catalog) snapshot(allow, deny []selector) []toolSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	var specs []toolSpec
	for _, s := range c.agents {
		for _, t := range s {
			if offered(toolKey{t.Agent, t.Action}, allow, deny) {
				specs = append(specs, t)
			}
		}
	}
	slices.SortFunc(specs, func(x, y toolSpec) int {
		if n := strings.Compare(x.Agent, y.Agent); n != 0 {
			return n
		}
		return strings.Compare(x.Action, y.Action)
	})
	return specs
}

// set records the actions of agent id.
func (c *catalog) set(id string, specs []toolSpec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.agents[id] = specs
	c.notify()
}

func (c *catalog) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.agents, id)
	c.notify()
}

// hooks holds the agent's hook methods, so that they are no part of the
// Agent's API.
type hooks struct{ a *Agent }

// AfterAdd starts a survey of the space (see surveySpace), which the first
// turn waits for, runs the extensions' Added hooks, and takes up the
// turns a Journal holds pending (see resumePending). The survey runs
// beside the agent: its answers do not wait for the agent to handle
// messages.
func (h hooks) AfterAdd(ctx context.Context) {
	a := h.a
	c := &a.catalog
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	c.mu.Lock()
	// A new space: forget the old one.
	clear(c.agents)
	c.asking = newLRU[helpAsked](maxAsking)
	c.asked, c.survey, c.stop = time.Now(), done, stop
	c.notify()
	c.mu.Unlock()
	go func() {
		defer stop()
		a.surveySpace(sctx, "", nil)
		c.mu.Lock()
		c.survey, c.stop = nil, nil
		c.mu.Unlock()
		close(done)
	}()
	for _, x := range a.exts {
		if x.Added != nil {
			x.Added(ctx)
		}
	}
	a.resumePending(ctx)
}

// BeforeRemove stops the resumed turns under way (they stay pending),
// runs the extensions' Removing hooks, and ends the survey made on joining
// if it still runs.
func (h hooks) BeforeRemove(ctx context.Context) {
	h.a.stopResuming()
	for _, x := range h.a.exts {
		if x.Removing != nil {
			x.Removing(ctx)
		}
	}
	c := &h.a.catalog
	c.mu.Lock()
	stop, done := c.stop, c.survey
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// HandleActionValue reads the answers to help; other responses (to the says
// the agent sends) are only noted.
func (h hooks) HandleActionValue(ctx context.Context, m *agency.Message) {
	a := h.a
	if !a.isHelpAnswer(m) {
		a.notice(ctx, m.From, "")
		return
	}
	a.answered(m, false)
	help, err := agency.Value[map[string]json.RawMessage](m)
	if err != nil {
		a.logger.Warn("openai: unreadable help answer", "from", m.From, "error", err)
		help = nil // known, with nothing to offer
	}
	a.catalog.set(m.From, toolSpecs(m.From, help))
	a.catalog.taken(m.ParentID)
}

// HandleActionError handles the errors that answer the agent's sends: an
// agent whose help fails is known with no actions; one the space says is
// not there is forgotten, so that a later agent with its id is asked again
// (at once, if it has spoken meanwhile).
func (h hooks) HandleActionError(ctx context.Context, m *agency.Message, err *agency.ActionError) {
	a := h.a
	if !a.isHelpAnswer(m) {
		a.logger.Debug("openai: error response", "from", m.From, "error", err)
		a.notice(ctx, m.From, "")
		return
	}
	gone := errors.Is(err, agency.ErrNoRecipient)
	latest, again := a.answered(m, gone)
	switch {
	case gone && latest:
		a.catalog.drop(m.From)
		if again {
			a.notice(ctx, m.From, "")
		}
	case gone:
		// An older help found its agent gone; a newer one is under way.
	default:
		a.logger.Warn("openai: help failed", "from", m.From, "error", err)
		a.catalog.set(m.From, nil)
	}
	a.catalog.taken(m.ParentID)
}

// taken tells the refresh that sent the help with the given id, if one
// waits for it, that its answer is in the catalog.
func (c *catalog) taken(helpID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if done, ok := c.probes[helpID]; ok {
		delete(c.probes, helpID)
		close(done)
	}
}

// helpSuffix ends the id of every help the agent sends to one agent, so
// that an answer to it is known as one whatever the agent remembers of it.
const helpSuffix = ".help"

// isHelpAnswer reports whether m answers a help the agent sent.
func (a *Agent) isHelpAnswer(m *agency.Message) bool {
	return strings.HasSuffix(m.ParentID, helpSuffix) && m.From != a.agent.ID()
}

// answered forgets the help to m's sender that m answers, and reports
// whether it was the latest one sent to it, and whether the sender spoke
// while it waited. A gone answer to an older help forgets nothing: the
// newer one, to an agent that may have joined since with the same id, is
// still awaited.
func (a *Agent) answered(m *agency.Message, gone bool) (latest, spoke bool) {
	c := &a.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.asking.Get(m.From)
	latest = ok && h.id == m.ParentID
	if latest || (ok && !gone) {
		c.asking.Remove(m.From)
	}
	return latest, ok && h.spoke
}

// notice asks an agent the catalog does not know for help. The answer comes
// to HandleActionValue. While a help to it waits for its answer, it is not
// asked again for helpAgain, however much it talks (an operand/agency
// agent on a broker without interop never answers): the agent is noted as
// having spoken, so that it is asked again at once if that help finds its
// agent gone (a later agent with the same id must not stay unknown; see
// HandleActionError). The help carries the conversation being served, if
// any.
func (a *Agent) notice(ctx context.Context, id, conversation string) {
	if id == a.agent.ID() {
		return
	}
	c := &a.catalog
	c.mu.Lock()
	if _, known := c.agents[id]; known {
		c.mu.Unlock()
		return
	}
	if h, asked := c.asking.Get(id); asked && time.Since(h.at) < a.helpAgain() {
		h.spoke = true
		c.asking.Add(id, h)
		c.mu.Unlock()
		return
	}
	// Recorded before the send, so that no answer can come first; an older
	// help to id is forgotten (its answer is still taken).
	msgID := agency.NewID() + helpSuffix
	c.asking.Add(id, helpAsked{id: msgID, at: time.Now()})
	c.mu.Unlock()
	m := &agency.Message{To: id, ID: msgID, Action: agency.HelpAction}
	if conversation != "" {
		m.Meta = map[string]any{metaConversation: conversation}
	}
	if _, err := a.agent.SendMessage(ctx, m); err != nil {
		a.logger.Warn("openai: help not sent", "to", id, "error", err)
		c.mu.Lock()
		if h, ok := c.asking.Get(id); ok && h.id == msgID {
			c.asking.Remove(id)
		}
		c.mu.Unlock()
	}
}

// helpAgain is how long the agent waits for an agent's answer to help
// before it asks that agent again.
func (a *Agent) helpAgain() time.Duration { return max(a.every, a.settle) }

// maxProbes bounds the agents a survey's turn asks directly.
const maxProbes = 8

// rediscover brings the catalog up to date at the start of a turn of
// conversation: when a survey is under way (the one made on joining, or
// another turn's), it waits for it; else, when the last survey is older
// than Rediscover's every, it surveys the space (see surveySpace).
func (a *Agent) rediscover(ctx context.Context, conversation string) {
	c := &a.catalog
	c.mu.Lock()
	if done := c.survey; done != nil {
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
		}
		return
	}
	if time.Since(c.asked) < a.every {
		c.mu.Unlock()
		return
	}
	done := make(chan struct{})
	c.survey, c.asked = done, time.Now()
	known := slices.Sorted(maps.Keys(c.agents))
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.survey = nil
		c.mu.Unlock()
		close(done)
	}()
	a.surveySpace(ctx, conversation, known)
}

// surveySpace surveys the space (agency.Survey: complete when every agent
// it reached has answered, on a space that can tell who that is, such as
// space.Local; after settle without a new answer on one that cannot, such
// as amqpspace; after twice settle at most), then asks directly, at most
// maxProbes, the agents whose help has a shape of its own and the agents
// in known that did not answer (see refresh), and forgets those the space
// says are gone.
func (a *Agent) surveySpace(ctx context.Context, conversation string, known []string) {
	c := &a.catalog
	// An agent busy with a long action answers help after it: the survey
	// waits for it only so long.
	sctx, cancel := context.WithTimeout(ctx, 2*a.settle)
	var meta map[string]any // the survey on joining serves no conversation
	if conversation != "" {
		meta = map[string]any{metaConversation: conversation}
	}
	found, err := agency.Survey(sctx, a.agent, agency.SurveyQuiet(a.settle), agency.SurveyMeta(meta))
	cancel()
	if err != nil && ctx.Err() != nil {
		return
	}
	var ask []string // agents to ask directly
	for _, id := range slices.Sorted(maps.Keys(found)) {
		help := found[id]
		raw := make(map[string]json.RawMessage, len(help))
		custom := false
		for name, h := range help {
			raw[name], _ = json.Marshal(h)
			custom = custom || !isObject(h.Args)
		}
		switch {
		case !custom:
			c.set(id, toolSpecs(id, raw))
		case !slices.Contains(known, id):
			// A help entry of its own shape (CustomHelp), which the survey
			// does not keep: ask for it as it is.
			ask = append(ask, id)
		}
	}
	for _, id := range known {
		if _, ok := found[id]; !ok {
			ask = append(ask, id)
		}
	}
	if len(ask) > maxProbes {
		ask = ask[:maxProbes]
	}
	var wg sync.WaitGroup
	for _, id := range ask {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.refresh(ctx, id, conversation, a.settle)
		}()
	}
	wg.Wait()
}

// refresh asks one agent for help and waits for the answer, at most
// timeout once the space has taken the help; it works inside a running
// action because the answer comes to the hooks, which run beside it. An
// agent that the space says is gone is dropped.
//
// Whether the agent is there is the space's word, which the wait for it
// does not bound: amqpspace has it from the broker (an unroutable
// mandatory message comes back), and a broker slow to say so must not
// leave a gone agent on offer for another turn. SendMessage returns once
// the space has given it, an agency.ErrNoRecipient going to
// HandleActionError as an [error] from the agent; the answer of an agent
// that is there goes to HandleActionValue, however late (a busy agent
// answers after its action). Both are taken as notice's answers are.
func (a *Agent) refresh(ctx context.Context, id, conversation string, timeout time.Duration) {
	c := &a.catalog
	msgID := agency.NewID() + helpSuffix
	done := make(chan struct{})
	c.mu.Lock()
	// Recorded before the send, so that no answer can come first.
	c.asking.Add(id, helpAsked{id: msgID, at: time.Now()})
	c.probes[msgID] = done
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.probes, msgID)
		c.mu.Unlock()
	}()
	m := &agency.Message{To: id, ID: msgID, Action: agency.HelpAction}
	if conversation != "" {
		m.Meta = map[string]any{metaConversation: conversation}
	}
	if _, err := a.agent.SendMessage(ctx, m); err != nil {
		a.logger.Warn("openai: help refresh failed", "agent", id, "error", err)
		c.mu.Lock()
		if h, ok := c.asking.Get(id); ok && h.id == msgID {
			c.asking.Remove(id)
		}
		c.mu.Unlock()
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		a.logger.Debug("openai: no answer to help yet", "agent", id, "waited", timeout)
	case <-ctx.Done():
	}
}

// toolSpecs turns an agent's help answer into tools. An entry that is not
// an agency.ActionHelp with an args schema (CustomHelp may have any shape)
// becomes a tool that takes any object and shows the entry to the model in
// its description.
func toolSpecs(agent string, help map[string]json.RawMessage) []toolSpec {
	specs := make([]toolSpec, 0, len(help))
	for action, raw := range help {
		s := toolSpec{Agent: agent, Action: action}
		var h agency.ActionHelp
		if err := json.Unmarshal(raw, &h); err == nil && isObject(h.Args) {
			s.Params = schemaOf(h.Args)
			s.Description = describe(agent, action, h.Description)
			if h.Access == agency.Requested.String() {
				s.Description += " (The agent asks for approval before each call; it may refuse.)"
			}
		} else {
			s.Params = json.RawMessage(`{"type":"object"}`)
			s.Description = describe(agent, action, "Its help, whose arguments must be inferred: "+clip(string(raw), 1500))
		}
		specs = append(specs, s)
	}
	slices.SortFunc(specs, func(x, y toolSpec) int { return strings.Compare(x.Action, y.Action) })
	return specs
}

// schemaOf returns the JSON Schema of an action's arguments from the args
// of its help entry. That is the schema itself for an agent of this
// library; an operand/agency (Python) agent lists its arguments instead,
// {"name": {"type": …, "description": …}, …}, which becomes the properties
// of an object schema (Python's help does not say which are required).
func schemaOf(args json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(args, &top); err != nil {
		return args
	}
	var kind string
	if t, ok := top["type"]; ok && json.Unmarshal(t, &kind) == nil {
		return args // a schema: its "type" is a string
	}
	for _, v := range top {
		if !isObject(v) {
			return args
		}
	}
	// The arguments keep the order the agent listed them in.
	return slices.Concat([]byte(`{"type":"object","properties":`), bytes.TrimSpace(args), []byte(`}`))
}

func describe(agent, action, text string) string {
	d := fmt.Sprintf("Action %q of agent %q.", action, agent)
	if text != "" {
		d += " " + text
	}
	return d
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// clip shortens s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
