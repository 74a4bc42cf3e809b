package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/seed72275b23/agency-go/agency"
)

// catalog holds what the agent knows of the space: every other agent it has
// heard from and the actions that agent's help offers it. Hooks write it on
// the agent's goroutine; tool calls of a running turn refresh and drop
// entries from theirs, hence the lock.
type catalog struct {
	mu      sync.Mutex
	agents  map[string][]toolSpec // agent id → its actions, sorted by name
	helpIDs map[string]string     // id of a help message sent → its recipient (or Broadcast)
	changed chan struct{}         // closed and replaced on every change (tests wait on it)
}

// toolSpec is one action of another agent, as the model sees it.
type toolSpec struct {
	Agent, Action string
	Description   string
	Params        json.RawMessage // the action's args schema, unchanged
}

func (c *catalog) init() {
	c.agents = make(map[string][]toolSpec)
	c.helpIDs = make(map[string]string)
	c.changed = make(chan struct{})
}

// notify wakes whoever waits for a change; c.mu is held.
func (c *catalog) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// snapshot returns every tool, sorted by agent and action.
func (c *catalog) snapshot() []toolSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	var specs []toolSpec
	for _, s := range c.agents {
		specs = append(specs, s...)
	}
	slices.SortFunc(specs, func(x, y toolSpec) int {
		if n := strings.Compare(x.Agent, y.Agent); n != 0 {
			return n
		}
		return strings.Compare(x.Action, y.Action)
	})
	return specs
}

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

// AfterAdd asks every agent in the space for help. The answers come to
// HandleActionValue once the agent handles messages.
func (a *Agent) AfterAdd(ctx context.Context) {
	c := &a.catalog
	c.mu.Lock()
	// A new space: forget the old one.
	clear(c.agents)
	clear(c.helpIDs)
	c.notify()
	c.mu.Unlock()
	a.sendHelp(ctx, agency.Broadcast)
}

// HandleActionValue reads the answers to help; other responses (to the says
// the agent sends) are only noted.
func (a *Agent) HandleActionValue(ctx context.Context, m *agency.Message) {
	if !a.isHelpAnswer(m) {
		a.notice(ctx, m.From)
		return
	}
	help, err := agency.Value[map[string]json.RawMessage](m)
	if err != nil {
		a.logger.Warn("openai: unreadable help answer", "from", m.From, "error", err)
		help = nil // known, with nothing to offer
	}
	a.catalog.set(m.From, toolSpecs(m.From, help))
}

// HandleActionError handles the errors that answer the agent's sends: an
// agent whose help fails is known with no actions.
func (a *Agent) HandleActionError(ctx context.Context, m *agency.Message, err *agency.ActionError) {
	if a.isHelpAnswer(m) {
		a.logger.Warn("openai: help failed", "from", m.From, "error", err)
		a.catalog.set(m.From, nil)
		return
	}
	a.logger.Debug("openai: error response", "from", m.From, "error", err)
	a.notice(ctx, m.From)
}

// isHelpAnswer reports whether m answers a help the agent sent, and forgets
// a targeted help once answered.
func (a *Agent) isHelpAnswer(m *agency.Message) bool {
	c := &a.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	to, ok := c.helpIDs[m.ParentID]
	if !ok || (to != agency.Broadcast && to != m.From) {
		return false
	}
	if to != agency.Broadcast {
		delete(c.helpIDs, m.ParentID)
	}
	return m.From != a.agent.ID()
}

// notice asks an agent the catalog does not know for help. The answer comes
// to HandleActionValue, after the running action. It asks on every message
// until an answer comes, never more often than the agent talks: a help that
// found its agent gone (Send cannot tell) must not leave a later agent with
// the same id unknown for good.
func (a *Agent) notice(ctx context.Context, id string) {
	c := &a.catalog
	c.mu.Lock()
	_, known := c.agents[id]
	c.mu.Unlock()
	if id != a.agent.ID() && !known {
		a.sendHelp(ctx, id)
	}
}

// sendHelp sends help to id (or Broadcast), its answers to come to the
// response hooks. The message id is recorded before the send, so that no
// answer can come first.
func (a *Agent) sendHelp(ctx context.Context, to string) {
	c := &a.catalog
	m := &agency.Message{To: to, ID: agency.NewID(), Action: agency.HelpAction}
	c.mu.Lock()
	c.helpIDs[m.ID] = to
	c.mu.Unlock()
	if _, err := a.agent.SendMessage(ctx, m); err != nil {
		a.logger.Warn("openai: help not sent", "to", to, "error", err)
		c.mu.Lock()
		delete(c.helpIDs, m.ID)
		c.mu.Unlock()
	}
}

// refresh asks one agent for help and waits for the answer; it works inside
// a running action because responses to a Request bypass the inbox.
func (a *Agent) refresh(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	help, err := agency.Call[map[string]json.RawMessage](ctx, a.agent, id, agency.HelpAction, nil)
	switch {
	case errors.Is(err, agency.ErrNoRecipient):
		a.catalog.drop(id)
	case err != nil:
		a.logger.Warn("openai: help refresh failed", "agent", id, "error", err)
	default:
		a.catalog.set(id, toolSpecs(id, help))
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
			s.Params = h.Args
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
