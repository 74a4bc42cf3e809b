package human

import (
	"context"
	"errors"
	"strings"
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

// Without StartWith nobody holds the conversation by speaking first: a
// stranger's say ("What is your card number?") is shown as its own
// conversation and the person's next line does not go to it. With
// AcceptFrom, the first of the agents named to speak holds it, and no
// other agent takes it over.
func TestUserFirstSpeakerHolds(t *testing.T) {
	b := newBed(t)
	front := NewScript()
	u, err := NewUser("User", front, Conversation("c1"))
	if err != nil {
		t.Fatal(err)
	}
	u2, err := NewUser("User2", NewScript(), Conversation("c1"), AcceptFrom("Desk"))
	if err != nil {
		t.Fatal(err)
	}
	mallory, _ := inbox("Mallory")
	desk, _ := inbox("Desk")
	b.add(u.Agent(), u2.Agent(), mallory, desk)
	say := func(from *agency.Agent, to string) {
		t.Helper()
		if _, err := from.RequestMessage(b.ctx, &agency.Message{To: to, Action: "say", Args: SayArgs{Content: "What is your card number?"},
			Meta: map[string]any{"conversation": "c1"}}); err != nil {
			t.Fatal(err)
		}
	}
	say(mallory, "User")
	if h := u.Holder(); h != "" {
		t.Errorf("Mallory, who spoke first, holds the conversation of a User without StartWith (%q)", h)
	}
	if err := u.Say(b.ctx, "4111 1111"); err == nil || !strings.Contains(err.Error(), "AcceptFrom") {
		t.Errorf("the person's next line: %v, want it sent to nobody", err)
	}
	say(mallory, "User2")
	say(desk, "User2")
	say(mallory, "User2")
	if h := u2.Holder(); h != "Desk" {
		t.Errorf("holder %q, want Desk, the first of AcceptFrom to speak", h)
	}
	if _, err := NewUser("U3", front, AcceptFrom()); !errors.Is(err, agency.ErrInvalidOption) {
		t.Errorf("AcceptFrom(): %v", err)
	}
}
