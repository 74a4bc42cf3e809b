package openai

import (
	"context"
	"slices"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// The roles of a [Message].
const (
	RoleUser      = "user"      // a partner's say
	RoleAssistant = "assistant" // a model's reply
	RoleTool      = "tool"      // a tool's result
)

// Message is one message of a conversation's history, as the model sees
// it. It encodes to JSON, so that a history can be stored or handed to an
// agent in another process.
type Message struct {
	Role string `json:"role"` // RoleUser, RoleAssistant or RoleTool
	// Name is who said it: the partner of a user message, the agent whose
	// model wrote an assistant message. The model is sent it only when it
	// matches ^[a-zA-Z0-9_-]{1,64}$.
	Name       string     `json:"name,omitempty"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // an assistant message's calls
	ToolCallID string     `json:"tool_call_id,omitempty"` // the call a tool message answers
}

// ToolCall is one call of a function tool that a model made.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`      // the tool's name
	Arguments string `json:"arguments"` // a JSON text, as the model wrote it
}

// Memory keeps the history of each conversation, oldest message first.
// The conversation an agent names to it is a [ConversationKey]: its owner
// and its id, so that two agents that name the same conversation id keep
// two histories.
//
// An agent calls it for one conversation at a time (it runs one turn at a
// time per conversation), and for different conversations concurrently.
// [NewMemory] is the in-process default; a durable implementation lets an
// agent built again continue a conversation where it stopped.
type Memory interface {
	// Load returns the conversation's history; none for a conversation it
	// does not know. The caller may change the slice it gets.
	Load(ctx context.Context, conversation string) ([]Message, error)
	// Append adds messages at the end of the conversation's history.
	Append(ctx context.Context, conversation string, msgs ...Message) error
	// Replace sets the conversation's history to msgs: a conversation
	// handed over by another agent ([Agent.Continue]) comes with its own.
	Replace(ctx context.Context, conversation string, msgs []Message) error
}

// NewMemory returns a Memory in process that keeps at most messages
// messages per conversation (dropping the oldest first, and never a tool
// result without its call) and at most conversations conversations
// (forgetting the one unused longest first). Both must be at least 1. It
// is safe for concurrent use.
func NewMemory(messages, conversations int) Memory {
	if messages < 1 || conversations < 1 {
		panic("openai: NewMemory needs at least one message and one conversation")
	}
	return &memory{max: messages, convs: newLRU[[]Message](conversations)}
}

// memory is the in-process Memory.
type memory struct {
	max   int
	mu    sync.Mutex
	convs *simplelru.LRU[string, []Message]
}

func (m *memory) Load(_ context.Context, conversation string) ([]Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, _ := m.convs.Get(conversation)
	return slices.Clone(h), nil
}

func (m *memory) Append(_ context.Context, conversation string, msgs ...Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, _ := m.convs.Get(conversation)
	m.convs.Add(conversation, trimHistory(append(h, msgs...), m.max))
	return nil
}

func (m *memory) Replace(_ context.Context, conversation string, msgs []Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.convs.Add(conversation, trimHistory(slices.Clone(msgs), m.max))
	return nil
}

// trimHistory keeps the last n messages, less any tool results at the start
// whose call was cut off.
func trimHistory(h []Message, n int) []Message {
	if len(h) > n {
		h = slices.Clone(h[len(h)-n:])
	}
	for len(h) > 0 && h[0].Role == RoleTool {
		h = h[1:]
	}
	return h
}

// newLRU returns a map of at most max entries that forgets the one unused
// longest (github.com/hashicorp/golang-lru/v2's simplelru, which is not
// safe for concurrent use: its owner locks).
func newLRU[V any](max int) *simplelru.LRU[string, V] {
	l, err := simplelru.NewLRU[string, V](max, nil)
	if err != nil {
		panic(err) // max < 1, which the callers never give
	}
	return l
}

// convLocks runs one turn at a time per conversation. A lock that no one
// holds or waits for is forgotten, so the map holds only conversations
// with a turn under way.
type convLocks struct {
	mu    sync.Mutex
	locks map[string]*convLock
}

type convLock struct {
	ch    chan struct{} // capacity 1: full while held
	users int           // holders and waiters
}

// lock waits until the conversation is free or ctx ends; on success the
// caller must call the returned unlock.
func (l *convLocks) lock(ctx context.Context, conversation string) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[string]*convLock)
	}
	c := l.locks[conversation]
	if c == nil {
		c = &convLock{ch: make(chan struct{}, 1)}
		l.locks[conversation] = c
	}
	c.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if c.users--; c.users == 0 {
			delete(l.locks, conversation)
		}
		l.mu.Unlock()
	}
	select {
	case c.ch <- struct{}{}:
		return func() { <-c.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
