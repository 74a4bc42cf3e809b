// Package memorytest is the conformance suite of openai.Memory: every
// implementation (the in-process openai.NewMemory, the store-backed
// handoff.Memory, one of your own) runs it, so that all keep the rules an
// LLM agent relies on.
//
//	func TestMyMemory(t *testing.T) {
//		memorytest.Run(t, func(t *testing.T) openai.Memory { return newMyMemory(t) })
//	}
package memorytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai"
)

// Run runs the suite; newMemory returns an empty Memory for each subtest,
// which keeps at least 10 messages per conversation and 10 conversations.
func Run(t *testing.T, newMemory func(t *testing.T) openai.Memory) {
	t.Run("Unknown", func(t *testing.T) { unknown(t, newMemory(t)) })
	t.Run("AppendInOrder", func(t *testing.T) { appendInOrder(t, newMemory(t)) })
	t.Run("Replace", func(t *testing.T) { replace(t, newMemory(t)) })
	t.Run("OwnersApart", func(t *testing.T) { ownersApart(t, newMemory(t)) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, newMemory(t)) })
	if _, ok := newMemory(t).(openai.Journal); ok {
		t.Run("Journal", func(t *testing.T) { journal(t, newMemory(t).(openai.Journal)) })
	}
}

// A Journal (run when the memory is one) writes a pending turn with its
// messages, refuses to begin it twice, keeps what Record writes, lists
// the pending turns oldest first and forgets a finished one.
func journal(t *testing.T, j openai.Journal) {
	ctx := context.Background()
	key := openai.ConversationKey("Ann", "c1")
	p1 := openai.PendingTurn{ID: "m1", Key: key, Owner: "Ann", Conversation: "c1", Partner: "Ann", SayBack: true}
	p2 := openai.PendingTurn{ID: "m2", Key: openai.ConversationKey("Bob", "c1"), Owner: "Bob", Conversation: "c1", Partner: "Bob"}
	if err := j.Begin(ctx, p1, msg(openai.RoleUser, "q1")); err != nil {
		t.Fatal(err)
	}
	if err := j.Begin(ctx, p2); err != nil {
		t.Fatal(err)
	}
	if err := j.Begin(ctx, p1, msg(openai.RoleUser, "again")); !errors.Is(err, openai.ErrTurnPending) {
		t.Errorf("Begin of a pending turn: %v, want ErrTurnPending", err)
	}
	p1.Answered, p1.Answer, p1.Resumes = true, "a1", 1
	if err := j.Record(ctx, p1, msg(openai.RoleAssistant, "a1")); err != nil {
		t.Fatal(err)
	}
	if got := load(t, j, key); !slices.Equal(got, []string{"q1", "a1"}) {
		t.Errorf("history %q, want [q1 a1]", got)
	}
	ps, err := j.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].ID != "m1" || ps[1].ID != "m2" || !ps[0].Answered || ps[0].Answer != "a1" || ps[0].Resumes != 1 || ps[0].Key != key {
		t.Errorf("pending %+v", ps)
	}
	if err := j.Finish(ctx, p1); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(ctx, p1); err != nil {
		t.Errorf("Finish of a turn no longer pending: %v", err)
	}
	if ps, err := j.Pending(ctx); err != nil || len(ps) != 1 || ps[0].ID != "m2" {
		t.Errorf("pending after Finish: %+v, %v", ps, err)
	}
}

func msg(role, content string) openai.Message {
	return openai.Message{Role: role, Name: "x", Content: content}
}

func contents(h []openai.Message) []string {
	var out []string
	for _, m := range h {
		out = append(out, m.Content)
	}
	return out
}

func load(t *testing.T, m openai.Memory, key string) []string {
	t.Helper()
	h, err := m.Load(context.Background(), key)
	if err != nil {
		t.Fatalf("Load(%q): %v", key, err)
	}
	return contents(h)
}

// A conversation the memory does not know has no history.
func unknown(t *testing.T, m openai.Memory) {
	if got := load(t, m, openai.ConversationKey("Ann", "c1")); len(got) != 0 {
		t.Errorf("an unknown conversation holds %q", got)
	}
}

// Appended messages come back in order, oldest first, with their fields;
// the caller may change the slice Load returns.
func appendInOrder(t *testing.T, m openai.Memory) {
	ctx := context.Background()
	key := openai.ConversationKey("Ann", "c1")
	call := openai.Message{Role: openai.RoleAssistant, Name: "Bot", ToolCalls: []openai.ToolCall{{ID: "call_1", Name: "A__b", Arguments: "{}"}}}
	result := openai.Message{Role: openai.RoleTool, ToolCallID: "call_1", Content: "3"}
	if err := m.Append(ctx, key, msg(openai.RoleUser, "1")); err != nil {
		t.Fatal(err)
	}
	if err := m.Append(ctx, key, call, result); err != nil {
		t.Fatal(err)
	}
	if err := m.Append(ctx, key, msg(openai.RoleAssistant, "4")); err != nil {
		t.Fatal(err)
	}
	h, err := m.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 4 || h[0].Content != "1" || h[1].ToolCalls[0].ID != "call_1" || h[2].ToolCallID != "call_1" || h[3].Content != "4" {
		t.Fatalf("history %+v", h)
	}
	h[0].Content = "changed"
	if got := load(t, m, key); got[0] != "1" {
		t.Errorf("changing what Load returned changed the memory: %q", got)
	}
}

// Replace sets a conversation's history.
func replace(t *testing.T, m openai.Memory) {
	ctx := context.Background()
	key := openai.ConversationKey("Ann", "c1")
	if err := m.Append(ctx, key, msg(openai.RoleUser, "old")); err != nil {
		t.Fatal(err)
	}
	if err := m.Replace(ctx, key, []openai.Message{msg(openai.RoleUser, "a"), msg(openai.RoleAssistant, "b")}); err != nil {
		t.Fatal(err)
	}
	if got := load(t, m, key); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after Replace: %q", got)
	}
}

// A conversation belongs to the agent that started it: two owners that
// name the same conversation id keep two histories, and neither Append
// nor Replace of one reaches the other.
func ownersApart(t *testing.T, m openai.Memory) {
	ctx := context.Background()
	ann, bob := openai.ConversationKey("Ann", "c1"), openai.ConversationKey("Bob", "c1")
	if err := m.Append(ctx, ann, msg(openai.RoleUser, "Ann's secret")); err != nil {
		t.Fatal(err)
	}
	if got := load(t, m, bob); len(got) != 0 {
		t.Fatalf("Bob's conversation c1 holds Ann's: %q", got)
	}
	if err := m.Append(ctx, bob, msg(openai.RoleUser, "Bob's")); err != nil {
		t.Fatal(err)
	}
	if err := m.Replace(ctx, bob, []openai.Message{msg(openai.RoleUser, "Bob's new")}); err != nil {
		t.Fatal(err)
	}
	if got := load(t, m, ann); !slices.Equal(got, []string{"Ann's secret"}) {
		t.Errorf("Ann's conversation after Bob's turns: %q", got)
	}
	if got := load(t, m, bob); !slices.Equal(got, []string{"Bob's new"}) {
		t.Errorf("Bob's conversation: %q", got)
	}
	if got := load(t, m, openai.ConversationKey("Ann", "c1 ")); len(got) != 0 {
		t.Errorf("another id of Ann's holds %q", got)
	}
}

// Different conversations are used concurrently (the agent runs one turn
// at a time per conversation): none loses a message.
func concurrent(t *testing.T, m openai.Memory) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			key := openai.ConversationKey(fmt.Sprintf("U%d", i), "c1")
			for j := range 5 {
				if err := m.Append(ctx, key, msg(openai.RoleUser, fmt.Sprint(j))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		if got := load(t, m, openai.ConversationKey(fmt.Sprintf("U%d", i), "c1")); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
			t.Errorf("U%d: %q", i, got)
		}
	}
}
