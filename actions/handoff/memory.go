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
	for attempt := 0; ; attempt++ {
		doc, err := m.changed(ctx, conversation, f)
		if err != nil {
			return err
		}
		err = m.st.Apply(ctx, store.Changes{Put: []store.Doc{doc}})
		if errors.Is(err, store.ErrConflict) && attempt < 16 {
			continue
		}
		return err
	}
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
