package main

import (
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
)

// Studio follows a conversation through the messages of a handoff team:
// the user's say, the holder's calls, a handoff (the handoff package's own
// Transfer, as it travels), and the new holder's answer.
func TestConversations(t *testing.T) {
	tl, cs := newTimeline(), newConversations()
	at := time.Now()
	send := func(m *agency.Message) (conversation, bool) {
		t.Helper()
		if m.ID == "" {
			m.ID = agency.NewID()
		}
		body, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Millisecond)
		return cs.observe(tl.event(at, body))
	}
	conv := map[string]any{"conversation": "c1"}
	send(&agency.Message{To: "Triage", From: "User", Meta: conv, Action: "say", Args: openai.SayArgs{Content: "I want a refund"}})
	send(&agency.Message{To: "Shop", From: "Triage", Meta: conv, Action: "look_up_item", Args: map[string]string{"search_query": "anvil"}})
	c, ok := send(&agency.Message{To: "Refunds", From: "Triage", Meta: conv, Action: "handoff", Args: handoff.Transfer{
		Conversation: "c1", User: "User", Name: "transfer_to_refunds", Message: "The customer wants a refund.", Hops: 1, Path: []string{"Triage"},
	}})
	if !ok || c.Holder != "Refunds" || c.User != "User" || c.Handoffs != 1 {
		t.Fatalf("after the handoff: %+v", c)
	}
	c, _ = send(&agency.Message{To: "User", From: "Refunds", Meta: conv, Action: "say", Args: openai.SayArgs{Content: "Which item?"}})
	want := []turn{
		{From: "User", To: "Triage", Kind: "say", Text: "I want a refund"},
		{From: "Triage", To: "Shop", Kind: "call", Text: `look_up_item {"search_query":"anvil"}`},
		{From: "Triage", To: "Refunds", Kind: "handoff", Text: "The customer wants a refund."},
		{From: "Refunds", To: "User", Kind: "say", Text: "Which item?"},
	}
	if len(c.Turns) != len(want) {
		t.Fatalf("turns %+v", c.Turns)
	}
	for i, w := range want {
		got := c.Turns[i]
		got.At = time.Time{}
		if got != w {
			t.Errorf("turn %d: %+v, want %+v", i, got, w)
		}
	}

	// A say without a conversation is the sender's, as an LLM agent keys
	// it; the agent's answering say goes to the same conversation.
	send(&agency.Message{To: "Assistant", From: "cli", Action: "say", Args: openai.SayArgs{Content: "hi"}})
	c, _ = send(&agency.Message{To: "cli", From: "Assistant", Meta: map[string]any{"conversation": "cli"}, Action: "say", Args: openai.SayArgs{Content: "hello"}})
	if c.ID != "cli" || c.Holder != "Assistant" || c.User != "cli" || len(c.Turns) != 2 {
		t.Errorf("a say without a conversation: %+v", c)
	}
	if list := cs.list(); len(list) != 2 || list[0].ID != "cli" {
		t.Errorf("list: %+v", list)
	}
}
