package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store"
)

// The kinds of the documents this package keeps in a store (store.Doc's
// Kind): the conversation documents are read through LoadConversation,
// Holder and Log, the histories through Memory.
const (
	kindConversation = "handoff.conversation" // one per conversation: Conversation
	kindLog          = "handoff.log"          // one per handoff made, Parent the conversation's key: LogEntry
	kindDispatch     = "handoff.dispatch"     // a dispatcher's table for one agent and conversation
	kindMemory       = "handoff.memory"       // an LLM agent's history of one conversation (Memory)
	kindTurn         = "handoff.turn"         // an LLM agent's pending turn (Memory as an openai.Journal)
)

// The statuses of a Conversation.
const (
	StatusActive     = "active"     // an agent holds it
	StatusTerminated = "terminated" // an agent ended it (Terminate)
)

// Conversation is what a store holds of a conversation: who holds it, its
// variables and its version, and the handoffs since the user's last
// message.
//
// A conversation belongs to the agent that started it, its Owner: the
// store keeps it under openai.ConversationKey(Owner, ID), so that another
// agent that names the same id has a conversation of its own, and never
// reads or changes this one's holder, variables, history or dispatcher
// tables.
type Conversation struct {
	ID      string   `json:"-"`
	Owner   string   `json:"owner,omitempty"` // who it belongs to (User when empty)
	Active  string   `json:"active"`          // the agent that holds it
	User    string   `json:"user"`            // the agent that speaks for the user
	Vars    Vars     `json:"vars,omitempty"`
	Version int64    `json:"version"` // grows with every change: holder, variables, hops
	Hops    int      `json:"hops,omitempty"`
	Path    []string `json:"path,omitempty"`
	Status  string   `json:"status"`
	// Updated is when the store last changed it (set by LoadConversation
	// and Conversations).
	Updated time.Time `json:"-"`
}

// LogEntry is one handoff in a conversation's log.
type LogEntry struct {
	ID      string    `json:"-"` // the handoff message's __meta__.id
	From    string    `json:"from"`
	To      string    `json:"to"`
	Name    string    `json:"name"`
	Hops    int       `json:"hops"`
	Path    []string  `json:"path"`
	Version int64     `json:"version"`
	Time    time.Time `json:"-"`
}

// LoadConversation returns what st holds of owner's conversation, or an
// error wrapping store.ErrNotFound.
func LoadConversation(ctx context.Context, st store.Store, owner, id string) (Conversation, error) {
	c, _, err := loadConv(ctx, st, owner, id)
	return c, err
}

// Holder returns the agent that holds owner's conversation according to
// st, or "" when st does not know it: where a user agent built again
// (after a restart) sends the user's next line.
func Holder(ctx context.Context, st store.Store, owner, conversation string) (string, error) {
	c, err := LoadConversation(ctx, st, owner, conversation)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return c.Active, err
}

// Log returns the handoffs made in owner's conversation, oldest first, as
// recorded in st by the agents that made them.
func Log(ctx context.Context, st store.Store, owner, conversation string) ([]LogEntry, error) {
	docs, err := st.List(ctx, store.Query{Kind: kindLog, Parent: openai.ConversationKey(owner, conversation)})
	if err != nil {
		return nil, err
	}
	out := make([]LogEntry, 0, len(docs))
	for _, d := range docs {
		var e LogEntry
		if err := json.Unmarshal(d.Body, &e); err != nil {
			return nil, fmt.Errorf("handoff: log entry %q: %w", d.ID, err)
		}
		e.ID, e.Time = d.ID, d.Created
		out = append(out, e)
	}
	return out, nil
}

// Conversations returns the conversations st holds, the most recently
// changed first, at most limit of them (all when limit is 0): for tools
// that show a team's state, such as the agency command's Studio.
func Conversations(ctx context.Context, st store.Store, limit int) ([]Conversation, error) {
	docs, err := st.List(ctx, store.Query{Kind: kindConversation, Newest: true, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]Conversation, 0, len(docs))
	for _, d := range docs {
		var c Conversation
		if err := json.Unmarshal(d.Body, &c); err != nil {
			return nil, fmt.Errorf("handoff: conversation %q in the store: %w", d.ID, err)
		}
		c.ID, c.Owner, c.Updated = d.Session, d.User, d.Updated
		out = append(out, c)
	}
	return out, nil
}

func loadConv(ctx context.Context, st store.Store, owner, id string) (Conversation, store.Doc, error) {
	d, err := st.Get(ctx, kindConversation, openai.ConversationKey(owner, id))
	if err != nil {
		return Conversation{ID: id, Owner: owner}, d, err
	}
	var c Conversation
	if err := json.Unmarshal(d.Body, &c); err != nil {
		return Conversation{ID: id, Owner: owner}, d, fmt.Errorf("handoff: conversation %q of %q in the store: %w", id, owner, err)
	}
	c.ID, c.Owner, c.Updated = id, owner, d.Updated
	return c, d, nil
}

// errUnchanged tells updateConv that the function changed nothing.
var errUnchanged = errors.New("unchanged")

// updateConv reads owner's conversation, lets f change it (exists says whether
// the store had it) and writes it with the extra changes f returns, in one
// Apply; on a conflict it reads again and calls f again (store.ApplyRetrying). f returns
// errUnchanged to write nothing, or another error to give up. It returns
// the conversation as written (or read, when unchanged).
func updateConv(ctx context.Context, st store.Store, owner, id string, f func(c *Conversation, exists bool) (store.Changes, error)) (Conversation, error) {
	var c Conversation
	err := store.ApplyRetrying(ctx, st, func(ctx context.Context) (store.Changes, error) {
		var d store.Doc
		var err error
		c, d, err = loadConv(ctx, st, owner, id)
		exists := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Changes{}, err
		}
		c.Path = slices.Clone(c.Path)
		extra, err := f(&c, exists)
		if err != nil {
			return store.Changes{}, err
		}
		body, err := json.Marshal(c)
		if err != nil {
			return store.Changes{}, err
		}
		c.ID, c.Owner = id, owner
		doc := store.Doc{Kind: kindConversation, ID: openai.ConversationKey(owner, id), Session: id, User: owner, Body: body}
		if exists {
			doc.Version = d.Version
		}
		extra.Put = append([]store.Doc{doc}, extra.Put...)
		return extra, nil
	})
	if errors.Is(err, errUnchanged) {
		return c, nil // as read
	}
	return c, err
}
