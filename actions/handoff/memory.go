package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store"
)

// memoryMessages is how many messages of a conversation Memory keeps for
// an agent; older ones are dropped first.
const memoryMessages = 200

// Memory returns an openai.Memory that keeps the conversations of the LLM
// agent with the given id in st (one document of kind kindMemory per
// conversation), so that the agent built again after a restart, on the
// same store, continues where it stopped. The agent names each
// conversation to it by its openai.ConversationKey, so that the histories
// of two owners who name the same conversation id are two documents. It keeps the last 200
// messages of each conversation, never a tool result without its call.
// Team gives it to every LLM agent it makes.
func Memory(st store.Store, agent string) openai.Memory {
	return &memory{st: st, agent: agent}
}

type memory struct {
	st    store.Store
	agent string
}

// memoryID is the id of an agent's history of a conversation, by the
// conversation's key (openai.ConversationKey: its owner and its id); an
// agent id holds no white space, so the first space ends it.
func memoryID(agent, key string) string { return agent + " " + key }

func (m *memory) Load(ctx context.Context, conversation string) ([]openai.Message, error) {
	h, _, err := m.load(ctx, conversation)
	return h, err
}

func (m *memory) load(ctx context.Context, conversation string) ([]openai.Message, store.Doc, error) {
	d, err := m.st.Get(ctx, kindMemory, memoryID(m.agent, conversation))
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Doc{}, nil
	}
	if err != nil {
		return nil, d, err
	}
	var h []openai.Message
	if err := json.Unmarshal(d.Body, &h); err != nil {
		return nil, d, fmt.Errorf("handoff: the history of %q in %q: %w", conversation, m.agent, err)
	}
	return h, d, nil
}

func (m *memory) Append(ctx context.Context, conversation string, msgs ...openai.Message) error {
	return m.write(ctx, conversation, func(h []openai.Message) []openai.Message { return append(h, msgs...) })
}

func (m *memory) Replace(ctx context.Context, conversation string, msgs []openai.Message) error {
	return m.write(ctx, conversation, func([]openai.Message) []openai.Message { return slices.Clone(msgs) })
}

func (m *memory) write(ctx context.Context, conversation string, f func([]openai.Message) []openai.Message) error {
	return store.ApplyRetrying(ctx, m.st, func(ctx context.Context) (store.Changes, error) {
		doc, err := m.changed(ctx, conversation, f)
		return store.Changes{Put: []store.Doc{doc}}, err
	})
}

// changed returns the document of the conversation's history as f changes
// it, to be put with compare-and-set.
func (m *memory) changed(ctx context.Context, conversation string, f func([]openai.Message) []openai.Message) (store.Doc, error) {
	h, d, err := m.load(ctx, conversation)
	if err != nil {
		return store.Doc{}, err
	}
	body, err := json.Marshal(trim(f(h), memoryMessages))
	if err != nil {
		return store.Doc{}, err
	}
	return store.Doc{Kind: kindMemory, ID: memoryID(m.agent, conversation), Parent: conversation, Session: conversation,
		Version: d.Version, Body: body}, nil
}

// appended returns the document of the conversation's history with msgs
// added, for an Apply of the caller's.
func (m *memory) appended(ctx context.Context, conversation string, msgs ...openai.Message) (store.Doc, error) {
	return m.changed(ctx, conversation, func(h []openai.Message) []openai.Message { return append(h, msgs...) })
}

// trim keeps the last n messages, less any tool results at the start
// whose call was cut off.
func trim(h []openai.Message, n int) []openai.Message {
	if len(h) > n {
		h = h[len(h)-n:]
	}
	for len(h) > 0 && h[0].Role == openai.RoleTool {
		h = h[1:]
	}
	if h == nil {
		h = []openai.Message{}
	}
	return h
}

// Memory is an openai.Journal too: the agent's pending turns are
// documents of kind kindTurn (Parent the agent's id), each written in the
// same Apply as the history it goes with, so that the agent built again
// on the same store takes up the turns a crash cut short.
var _ openai.Journal = (*memory)(nil)

func (m *memory) turnID(p openai.PendingTurn) string { return m.agent + " " + p.ID }

// turnDoc returns the document of p, to be written over version.
func (m *memory) turnDoc(p openai.PendingTurn, version int64) (store.Doc, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return store.Doc{}, err
	}
	return store.Doc{Kind: kindTurn, ID: m.turnID(p), Parent: m.agent, Session: p.Conversation, User: p.Owner,
		Version: version, Body: body}, nil
}

func (m *memory) Begin(ctx context.Context, p openai.PendingTurn, msgs ...openai.Message) error {
	return m.writeTurn(ctx, p, true, msgs)
}

func (m *memory) Record(ctx context.Context, p openai.PendingTurn, msgs ...openai.Message) error {
	return m.writeTurn(ctx, p, false, msgs)
}

// writeTurn writes p and appends msgs to its history, in one Apply; with
// fresh set, p must not be pending yet.
func (m *memory) writeTurn(ctx context.Context, p openai.PendingTurn, fresh bool, msgs []openai.Message) error {
	return store.ApplyRetrying(ctx, m.st, func(ctx context.Context) (store.Changes, error) {
		old, err := m.st.Get(ctx, kindTurn, m.turnID(p))
		switch {
		case err == nil && fresh:
			return store.Changes{}, fmt.Errorf("%w: %s in %q", openai.ErrTurnPending, p.ID, m.agent)
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return store.Changes{}, err
		}
		doc, err := m.turnDoc(p, old.Version)
		if err != nil {
			return store.Changes{}, err
		}
		c := store.Changes{Put: []store.Doc{doc}}
		if len(msgs) > 0 {
			h, err := m.appended(ctx, p.Key, msgs...)
			if err != nil {
				return store.Changes{}, err
			}
			c.Put = append(c.Put, h)
		}
		return c, nil
	})
}

func (m *memory) Finish(ctx context.Context, p openai.PendingTurn) error {
	return store.ApplyRetrying(ctx, m.st, func(ctx context.Context) (store.Changes, error) {
		d, err := m.st.Get(ctx, kindTurn, m.turnID(p))
		if errors.Is(err, store.ErrNotFound) {
			return store.Changes{}, nil
		}
		if err != nil {
			return store.Changes{}, err
		}
		return store.Changes{Delete: []store.Doc{{Kind: kindTurn, ID: d.ID, Version: d.Version}}}, nil
	})
}

func (m *memory) Pending(ctx context.Context) ([]openai.PendingTurn, error) {
	docs, err := m.st.List(ctx, store.Query{Kind: kindTurn, Parent: m.agent})
	if err != nil {
		return nil, err
	}
	out := make([]openai.PendingTurn, 0, len(docs))
	for _, d := range docs {
		var p openai.PendingTurn
		if err := json.Unmarshal(d.Body, &p); err != nil {
			return nil, fmt.Errorf("handoff: the pending turn %q: %w", d.ID, err)
		}
		out = append(out, p)
	}
	return out, nil
}
