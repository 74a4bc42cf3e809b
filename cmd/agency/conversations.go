package main

import (
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// Bounds of what Studio keeps of conversations.
const (
	maxConversations = 200
	maxTurns         = 200
)

// conversation is what the messages that passed tell of one conversation:
// who holds it (the agent it was said to, then each agent a handoff
// passed it to) and its transcript.
type conversation struct {
	ID       string    `json:"id"`
	Holder   string    `json:"holder"`
	User     string    `json:"user,omitempty"`
	Handoffs int       `json:"handoffs"`
	Updated  time.Time `json:"updated"`
	Turns    []turn    `json:"turns"`

	// Stored is what a handoff team's store holds of the conversation,
	// when Studio reads one: who holds it, by the store's own record.
	Stored *storedConversation `json:"stored,omitempty"`
}

// storedConversation is a conversation as package handoff keeps it.
type storedConversation struct {
	Holder  string         `json:"holder"`
	User    string         `json:"user"`
	Status  string         `json:"status"`
	Version int64          `json:"version"`
	Hops    int            `json:"hops,omitempty"`
	Path    []string       `json:"path,omitempty"`
	Vars    map[string]any `json:"vars,omitempty"`
	Log     []storedHop    `json:"log,omitempty"`
}

// storedHop is one handoff of a stored conversation's log.
type storedHop struct {
	From string `json:"from"`
	To   string `json:"to"`
	Name string `json:"name"`
}

// turn is one line of a transcript.
type turn struct {
	At   time.Time `json:"at"`
	From string    `json:"from"`
	To   string    `json:"to"`
	// Kind is "say", "handoff", "call" (an action run for the
	// conversation) or "error".
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// conversations follows the conversations of the events. It is safe for
// concurrent use.
type conversations struct {
	mu   sync.Mutex
	byID map[string]*conversation
}

func newConversations() *conversations {
	return &conversations{byID: make(map[string]*conversation)}
}

// observe updates the conversation ev belongs to, if any, and returns a
// copy of it.
func (cs *conversations) observe(ev event) (conversation, bool) {
	id := ev.Conversation
	var transfer struct {
		Conversation string `json:"conversation"`
		User         string `json:"user"`
		Message      string `json:"message"`
	}
	if ev.Kind == "request" && ev.Action == "handoff" {
		if json.Unmarshal(ev.Args, &transfer) == nil && transfer.Conversation != "" {
			id = transfer.Conversation
		}
	}
	if id == "" && ev.Kind == "request" && ev.Action == "say" {
		id = ev.From // an LLM agent keys a say without one by its sender
	}
	if id == "" || ev.Action == agency.HelpAction {
		return conversation{}, false // discovery, not part of the talk
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[id]
	if !ok {
		if ev.Kind != "request" {
			return conversation{}, false // an answer to a conversation not seen start
		}
		if len(cs.byID) >= maxConversations {
			cs.dropOldest()
		}
		c = &conversation{ID: id}
		cs.byID[id] = c
	}
	t := turn{At: ev.At, From: ev.From, To: ev.To}
	switch {
	case ev.Kind == "request" && ev.Action == "handoff":
		c.Holder, c.User = ev.To, transfer.User
		c.Handoffs++
		t.Kind, t.Text = "handoff", transfer.Message
	case ev.Kind == "request" && ev.Action == "say":
		var say sayArgs
		_ = json.Unmarshal(ev.Args, &say)
		if c.Holder == "" {
			if ev.To == c.ID { // said back to the user the conversation is named after
				c.Holder, c.User = ev.From, ev.To
			} else {
				c.Holder, c.User = ev.To, ev.From
			}
		}
		t.Kind, t.Text = "say", say.Content
	case ev.Kind == "request":
		if c.Holder == "" {
			c.Holder = ev.From // who acts for a conversation serves it
		}
		t.Kind, t.Text = "call", ev.Action+" "+string(ev.Args)
	case ev.Kind == "error":
		t.Kind, t.Text = "error", ev.ErrorType+": "+ev.Error
	default:
		return conversation{}, false // answers repeat what a say said
	}
	c.Updated = ev.At
	if len(c.Turns) >= maxTurns {
		c.Turns = slices.Delete(c.Turns, 0, 1)
	}
	c.Turns = append(c.Turns, t)
	out := *c
	out.Turns = slices.Clone(c.Turns)
	return out, true
}

func (cs *conversations) dropOldest() {
	var oldest *conversation
	for _, c := range cs.byID {
		if oldest == nil || c.Updated.Before(oldest.Updated) {
			oldest = c
		}
	}
	if oldest != nil {
		delete(cs.byID, oldest.ID)
	}
}

// list returns every conversation, latest first.
func (cs *conversations) list() []conversation {
	return cs.sorted()
}

// sorted returns every conversation, latest first.
func (cs *conversations) sorted() []conversation {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]conversation, 0, len(cs.byID))
	for _, c := range cs.byID {
		cc := *c
		cc.Turns = slices.Clone(c.Turns)
		out = append(out, cc)
	}
	slices.SortFunc(out, func(a, b conversation) int { return b.Updated.Compare(a.Updated) })
	return out
}
