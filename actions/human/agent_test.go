package human

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// bed is a space with some agents, closed when the test ends.
type bed struct {
	t   *testing.T
	ctx context.Context
	sp  *space.Local
}

func newBed(t *testing.T) *bed {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	b := &bed{t: t, ctx: ctx, sp: space.NewLocal()}
	t.Cleanup(func() {
		if err := b.sp.Close(context.Background()); err != nil {
			t.Errorf("closing the space: %v", err)
		}
	})
	return b
}

func (b *bed) add(agents ...*agency.Agent) {
	b.t.Helper()
	for _, a := range agents {
		if err := b.sp.Add(b.ctx, a); err != nil {
			b.t.Fatal(err)
		}
	}
}

// inbox is an agent whose say records what it hears.
func inbox(id string) (*agency.Agent, chan *agency.Message) {
	got := make(chan *agency.Message, 8)
	a := agency.MustNewAgent(id)
	agency.Handle(a, "say", func(ctx context.Context, args SayArgs) (string, error) {
		got <- agency.MessageFrom(ctx)
		return "ok", nil
	})
	return a, got
}

func next(t *testing.T, ctx context.Context, ch chan *agency.Message) *agency.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-ctx.Done():
		t.Fatal("nothing heard")
		return nil
	}
}

// A person's say: they are asked, and their answer is said back (with the
// conversation and in_reply_to) and returned; a say made for a tool call
// is answered only by value.
func TestAgentSay(t *testing.T) {
	b := newBed(t)
	front := NewScript("Sure.", "No.")
	person, err := New("Human", front)
	if err != nil {
		t.Fatal(err)
	}
	asker, heard := inbox("Triage")
	b.add(person.Agent(), asker)

	m := &agency.Message{To: "Human", Action: "say", Args: SayArgs{Content: "Can you take over?"}, Meta: map[string]any{"conversation": "c1"}}
	r, err := asker.RequestMessage(b.ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := agency.Value[string](r); v != "Sure." {
		t.Errorf("value %q", v)
	}
	back := next(t, b.ctx, heard)
	if back.Args.(SayArgs).Content != "Sure." || back.Meta["conversation"] != "c1" || back.Meta["in_reply_to"] != m.ID {
		t.Errorf("said back %v with %v", back.Args, back.Meta)
	}
	if asked := front.Asked(); len(asked) != 1 || asked[0] != (Line{Conversation: "c1", Owner: "Triage", From: "Triage", Text: "Can you take over?"}) {
		t.Errorf("asked %+v", asked)
	}

	m = &agency.Message{To: "Human", Action: "say", Args: SayArgs{Content: "Quick question"}, Meta: map[string]any{"tool_call_id": "call_1"}}
	if r, err := asker.RequestMessage(b.ctx, m); err != nil {
		t.Fatal(err)
	} else if v, _ := agency.Value[string](r); v != "No." {
		t.Errorf("value %q", v)
	}
	// The person's input has ended: the say fails.
	if _, err := asker.Request(b.ctx, "Human", "say", SayArgs{Content: "still there?"}); !errors.Is(err, agency.ErrActionFailed) {
		t.Errorf("after the end of input: %v", err)
	}
	select {
	case m := <-heard:
		t.Errorf("a say back for a tool call: %v", m.Args)
	default:
	}
}

// Take shows a handed-over conversation and says the person's answer to
// the user.
func TestAgentTake(t *testing.T) {
	b := newBed(t)
	front := NewScript("Hello, this is the manager.")
	person, err := New("Human", front)
	if err != nil {
		t.Fatal(err)
	}
	user, heard := inbox("User")
	b.add(person.Agent(), user)
	history := []Line{{From: "User", Text: "I want a refund"}, {From: "Refunds", Text: "Let me transfer you."}}
	got, err := person.Take(b.ctx, Handover{Conversation: "c1", User: "User", History: history})
	if err != nil || got != "Hello, this is the manager." {
		t.Fatalf("Take: %q, %v", got, err)
	}
	m := next(t, b.ctx, heard)
	if m.From != "Human" || m.Args.(SayArgs).Content != got || m.Meta["conversation"] != "c1" {
		t.Errorf("the user heard %v from %s with %v", m.Args, m.From, m.Meta)
	}
	shown := front.Shown()
	if len(shown) != 2 || shown[0] != (Line{Conversation: "c1", Owner: "User", From: "User", Text: "I want a refund"}) {
		t.Errorf("shown %+v", shown)
	}
	if asked := front.Asked(); len(asked) != 1 || asked[0] != (Line{Conversation: "c1", Owner: "User", From: "User"}) {
		t.Errorf("asked %+v", asked)
	}
}

// sayAgent returns an agent whose say runs f.
func sayAgent(id string, f func(ctx context.Context, args SayArgs) (string, error)) *agency.Agent {
	a := agency.MustNewAgent(id)
	agency.Handle(a, "say", f)
	return a
}

// A User shows the person every answer once, whichever way it comes: a say
// back, only a value, or a say from the agent the conversation was handed
// to; the agent that answered last holds the conversation. Errors the
// person has not been shown come back from Say.
func TestUser(t *testing.T) {
	b := newBed(t)
	front := NewScript()
	u, err := NewUser("User", front, StartWith("Echo"), Conversation("c7"))
	if err != nil {
		t.Fatal(err)
	}
	tell := func(ctx context.Context, from *agency.Agent, to, text string, meta map[string]any) {
		m := agency.MessageFrom(ctx)
		mm := map[string]any{"conversation": m.Meta["conversation"], "in_reply_to": m.ID}
		for k, v := range meta {
			mm[k] = v
		}
		if _, err := from.SendMessage(ctx, &agency.Message{To: to, Action: "say", Args: SayArgs{Content: text}, Meta: mm}); err != nil {
			t.Error(err)
		}
	}
	echo := sayAgent("Echo", func(ctx context.Context, a SayArgs) (string, error) { return "echo: " + a.Content, nil })
	var talker, desk *agency.Agent
	talker = sayAgent("Talker", func(ctx context.Context, a SayArgs) (string, error) {
		tell(ctx, talker, "User", "said back: "+a.Content, nil)
		return "said back: " + a.Content, nil
	})
	desk = sayAgent("Desk", func(ctx context.Context, a SayArgs) (string, error) {
		tell(ctx, desk, "User", "Desk here", map[string]any{"final": true})
		return "Desk here", nil
	})
	var router *agency.Agent
	router = sayAgent("Router", func(ctx context.Context, a SayArgs) (string, error) {
		// Hands the conversation to Desk, which answers the user: it
		// tells the user so (a User takes the word only of the holder and
		// of those the holder names).
		tell(ctx, router, "User", "Desk will answer.", map[string]any{"handed_to": "Desk"})
		if _, err := agency.AgentFrom(ctx).Send(ctx, "Desk", "say", SayArgs{Content: a.Content}); err != nil {
			return "", err
		}
		return "", nil
	})
	broken := sayAgent("Broken", func(ctx context.Context, a SayArgs) (string, error) { return "", errors.New("out of order") })
	b.add(u.Agent(), echo, talker, router, broken)

	if err := u.Say(b.ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	u.mu.Lock()
	u.holder = "Talker"
	u.mu.Unlock()
	if err := u.Say(b.ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	want := []Line{{"c7", "User", "Echo", "echo: hi"}, {"c7", "User", "Talker", "said back: hello"}}
	if shown := front.Shown(); len(shown) != 2 || shown[0] != want[0] || shown[1] != want[1] {
		t.Fatalf("shown %+v, want %+v", shown, want)
	}

	u.mu.Lock()
	u.holder = "Broken"
	u.mu.Unlock()
	if err := u.Say(b.ctx, "x"); !errors.Is(err, agency.ErrActionFailed) {
		t.Errorf("a failing say: %v", err)
	}
	u.mu.Lock()
	u.holder = "Nobody"
	u.mu.Unlock()
	if err := u.Say(b.ctx, "x"); !errors.Is(err, agency.ErrNoRecipient) {
		t.Errorf("an absent holder: %v", err)
	}

	// Router hands on: Desk answers, holds the conversation, and ends it.
	b.add(desk)
	u.mu.Lock()
	u.holder = "Router"
	u.mu.Unlock()
	if err := u.Say(b.ctx, "help"); err != nil {
		t.Fatal(err)
	}
	if u.Holder() != "Desk" || !u.Ended() {
		t.Errorf("holder %q, ended %v", u.Holder(), u.Ended())
	}
	if shown := front.Shown(); shown[len(shown)-1] != (Line{"c7", "User", "Desk", "Desk here"}) {
		t.Errorf("shown %+v", shown)
	}
	// Porter answers and hands on (__meta__.handed_to): the answer is
	// shown, and Say waits for the new holder's.
	var porter *agency.Agent
	clerk := sayAgent("Clerk", func(ctx context.Context, a SayArgs) (string, error) { return "", nil })
	porter = sayAgent("Porter", func(ctx context.Context, a SayArgs) (string, error) {
		tell(ctx, porter, "User", "One moment.", map[string]any{"handed_to": "Clerk"})
		return "One moment.", nil
	})
	b.add(porter, clerk)
	u.mu.Lock()
	u.holder, u.final = "Porter", false
	u.mu.Unlock()
	n := len(front.Shown())
	said := make(chan error, 1)
	go func() { said <- u.Say(b.ctx, "a question") }()
	if _, err := front.WaitShown(b.ctx, n+1); err != nil {
		t.Fatal(err)
	}
	u.sync(b.ctx)
	select {
	case err := <-said:
		t.Fatalf("Say returned (%v) before the agent handed to answered", err)
	default:
	}
	if u.Holder() != "Clerk" {
		t.Errorf("holder %q", u.Holder())
	}
	if _, err := clerk.SendMessage(b.ctx, &agency.Message{To: "User", Action: "say", Args: SayArgs{Content: "Clerk here."},
		Meta: map[string]any{"conversation": "c7"}}); err != nil {
		t.Fatal(err)
	}
	if err := <-said; err != nil {
		t.Fatal(err)
	}
	if shown := front.Shown(); len(shown) != n+2 || shown[n] != (Line{"c7", "User", "Porter", "One moment."}) ||
		shown[n+1] != (Line{"c7", "User", "Clerk", "Clerk here."}) {
		t.Errorf("shown %+v", shown[n:])
	}
	if _, err := NewUser("U2", front, StartWith("a b")); !errors.Is(err, agency.ErrInvalidOption) {
		t.Errorf("a bad StartWith: %v", err)
	}
}

// Run says each line to the holder until "exit", shows errors and goes on.
func TestUserRun(t *testing.T) {
	b := newBed(t)
	front := NewScript("", "one", "two", "exit", "never")
	u, err := NewUser("User", front, StartWith("Echo"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	echo := sayAgent("Echo", func(ctx context.Context, a SayArgs) (string, error) {
		if n++; n == 2 {
			return "", errors.New("hiccup")
		}
		return "echo: " + a.Content, nil
	})
	b.add(u.Agent(), echo)
	if err := u.Run(b.ctx); err != nil {
		t.Fatal(err)
	}
	shown := front.Shown()
	if len(shown) != 2 || shown[0] != (Line{"User", "User", "Echo", "echo: one"}) || shown[1].From != "" {
		t.Errorf("shown %+v", shown)
	}
	if len(front.Asked()) != 4 {
		t.Errorf("asked %d times: exit ends the run", len(front.Asked()))
	}
}

// blindFront is a Script whose Show fails once its screen is gone.
type blindFront struct {
	*Script
	gone error
}

func (f *blindFront) Show(ctx context.Context, l Line) error {
	if f.gone != nil {
		return f.gone
	}
	return f.Script.Show(ctx, l)
}

// When the User's Front cannot show a say, the say fails with the Front's
// error, and Say and Run return it: the person was not shown the answer,
// and cannot follow the conversation any more.
func TestUserCannotShow(t *testing.T) {
	b := newBed(t)
	gone := errors.New("the screen is gone")
	front := &blindFront{Script: NewScript("hello", "again"), gone: gone}
	u, err := NewUser("User", front, StartWith("Bot"), Conversation("c1"))
	if err != nil {
		t.Fatal(err)
	}
	sayBack := make(chan error, 1)
	var bot *agency.Agent
	bot = sayAgent("Bot", func(ctx context.Context, a SayArgs) (string, error) {
		// The answer comes as a say back; the value says so.
		_, err := bot.RequestMessage(ctx, &agency.Message{To: "User", Action: "say", Args: SayArgs{Content: "hi"},
			Meta: map[string]any{"conversation": "c1"}})
		sayBack <- err
		return "", nil
	})
	b.add(u.Agent(), bot)
	if err := u.Run(b.ctx); !errors.Is(err, gone) {
		t.Errorf("Run: %v, want the Front's error", err)
	}
	if err := <-sayBack; err == nil || !strings.Contains(err.Error(), "the screen is gone") {
		t.Errorf("the say back: %v, want it failed with the Front's error", err)
	}
	if err := u.Say(b.ctx, "are you there?"); !errors.Is(err, gone) {
		t.Errorf("Say after: %v, want the Front's error", err)
	}
	if n := len(front.Asked()); n != 1 {
		t.Errorf("the person was asked %d times, want once: Run stops", n)
	}
}
