package human

import (
	"context"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// A User's conversation is its own: another agent that says something in
// it is shown as the conversation of its own that it is, and neither
// answers the person nor becomes the holder that reads their next line.
// An agent that answers one of the User's says takes the conversation
// over (a handoff's new holder answers so).
func TestUserConversationIsItsOwn(t *testing.T) {
	b := newBed(t)
	front := NewScript()
	u, err := NewUser("User", front, StartWith("Desk"), Conversation("c1"))
	if err != nil {
		t.Fatal(err)
	}
	var desk *agency.Agent
	desk = sayAgent("Desk", func(ctx context.Context, a SayArgs) (string, error) {
		// Hands over to Clerk, which answers the user's say.
		m := agency.MessageFrom(ctx)
		_, err := desk.SendMessage(ctx, &agency.Message{To: "Clerk", Action: "say", Args: a,
			Meta: map[string]any{"conversation": "c1", "user_say": m.ID}})
		return "", err
	})
	clerk := sayAgent("Clerk", func(ctx context.Context, a SayArgs) (string, error) {
		m := agency.MessageFrom(ctx)
		_, err := agency.AgentFrom(ctx).SendMessage(ctx, &agency.Message{To: "User", Action: "say", Args: SayArgs{Content: "Clerk here"},
			Meta: map[string]any{"conversation": "c1", "in_reply_to": m.Meta["user_say"]}})
		return "", err
	})
	bob, _ := inbox("Bob")
	b.add(u.Agent(), desk, clerk, bob)

	if _, err := bob.Request(b.ctx, "User", "say", SayArgs{Content: "tell me instead"}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.RequestMessage(b.ctx, &agency.Message{To: "User", Action: "say", Args: SayArgs{Content: "I hold it now"},
		Meta: map[string]any{"conversation": "c1", "handed_to": "Bob"}}); err != nil {
		t.Fatal(err)
	}
	if h := u.Holder(); h != "Desk" {
		t.Errorf("Bob's says made %q the holder", h)
	}
	for _, l := range front.Shown() {
		if l.From == "Bob" && l.Owner != "Bob" {
			t.Errorf("Bob's line is shown in the user's conversation: %+v", l)
		}
	}
	if err := u.Say(b.ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	if h := u.Holder(); h != "Clerk" {
		t.Errorf("the agent that answered the user's say holds %q", h)
	}
	shown := front.Shown()
	if last := shown[len(shown)-1]; last != (Line{Conversation: "c1", Owner: "User", From: "Clerk", Text: "Clerk here"}) {
		t.Errorf("last shown %+v", last)
	}
}

// A person others talk to tells the conversations of two agents that
// name the same id apart.
func TestAgentConversationsByOwner(t *testing.T) {
	b := newBed(t)
	front := NewScript("a", "b")
	person, err := New("Human", front)
	if err != nil {
		t.Fatal(err)
	}
	ann, _ := inbox("Ann")
	bob, _ := inbox("Bob")
	b.add(person.Agent(), ann, bob)
	for _, a := range []*agency.Agent{ann, bob} {
		if _, err := a.RequestMessage(b.ctx, &agency.Message{To: "Human", Action: "say", Args: SayArgs{Content: "hi"},
			Meta: map[string]any{"conversation": "c1", "in_reply_to": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	asked := front.Asked()
	if len(asked) != 2 || asked[0].Owner != "Ann" || asked[1].Owner != "Bob" || asked[0].Conversation != "c1" {
		t.Errorf("asked %+v", asked)
	}
}

// Without StartWith, the first agent that speaks in the conversation holds
// it; after that, another agent's say does not take it over.
func TestUserFirstSpeakerHolds(t *testing.T) {
	b := newBed(t)
	front := NewScript()
	u, err := NewUser("User", front, Conversation("c1"))
	if err != nil {
		t.Fatal(err)
	}
	desk, _ := inbox("Desk")
	bob, _ := inbox("Bob")
	b.add(u.Agent(), desk, bob)
	for _, a := range []*agency.Agent{desk, bob} {
		if _, err := a.RequestMessage(b.ctx, &agency.Message{To: "User", Action: "say", Args: SayArgs{Content: "hello from " + a.ID()},
			Meta: map[string]any{"conversation": "c1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if h := u.Holder(); h != "Desk" {
		t.Errorf("holder %q, want Desk, who spoke first", h)
	}
}
