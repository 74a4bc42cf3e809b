package handoff

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

// seen is a model that answers with the user messages it was sent, joined
// by " | ", unless first, given the last one, returns another step.
func seen(first func(last string) (openaitest.Step, bool)) openaitest.Step {
	return openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		var users []string
		for _, m := range r.Messages {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		if first != nil {
			if s, ok := first(users[len(users)-1]); ok {
				return s
			}
		}
		return openaitest.Step{Text: strings.Join(users, " | ")}
	}}
}

// aSpace is what the owner scenario needs of a space.
type aSpace interface {
	Add(ctx context.Context, a *agency.Agent) error
	Close(ctx context.Context) error
}

// A conversation belongs to the user that started it, across a handoff
// and a restart on a durable store: Bob, who names the user's
// conversation id to its holder, to the agent that handed it over and to
// the user agent itself, gets a conversation of his own. He never reads
// the user's turns, the holder does not change, and the user's
// conversation goes on as if he had never spoken.
func TestConversationBelongsToItsUser(t *testing.T) {
	belongs(t, func() aSpace { return space.NewLocal() }, func(s string) string { return s })
}

// The same on amqpspace: every message crosses RabbitMQ.
func TestConversationBelongsToItsUserOnAMQP(t *testing.T) {
	ex := amqptest.Exchange(t)
	belongs(t, func() aSpace { return amqptest.NewSpace(t, amqpspace.Config{Exchange: ex}) }, amqptest.Name)
}

func belongs(t *testing.T, newSpace func() aSpace, name func(string) string) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	triageID, refundsID, userID, bobID := name("Triage"), name("Refunds"), name("User"), name("Bob")
	path := filepath.Join(t.TempDir(), "owner.db")
	triageSrv := openaitest.NewServer(t)
	refundSrv := openaitest.NewServer(t)
	for range 8 {
		triageSrv.Add(seen(func(last string) (openaitest.Step, bool) {
			return calls1("transfer_to_refunds", "{}"), last == "I want a refund"
		}))
		refundSrv.Add(seen(nil))
	}
	screen := human.NewScript()
	var team *Team
	var user *human.User
	build := func() aSpace {
		team = &Team{UserID: userID, Options: []Option{WithStore(openSQLite(t, ctx, path))}, AgentLLM: map[string][]openai.Option{
			triageID: llmOptions(triageSrv), refundsID: llmOptions(refundSrv)}}
		triage, err := team.Agent(triageID, "triage", OnLLM(To(refundsID), "Use for refunds.", Name("transfer_to_refunds")))
		if err != nil {
			t.Fatal(err)
		}
		refunds, err := team.Agent(refundsID, "refunds", OnLLM(To(triageID), "Use for the rest."))
		if err != nil {
			t.Fatal(err)
		}
		start, err := team.Holder(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if start == "" {
			start = triageID
		}
		user, err = human.NewUser(userID, screen, human.StartWith(start), human.Conversation("c1"))
		if err != nil {
			t.Fatal(err)
		}
		sp := newSpace()
		t.Cleanup(func() { _ = sp.Close(context.Background()) })
		for _, a := range []*agency.Agent{triage.Agent(), refunds.Agent(), user.Agent()} {
			if err := sp.Add(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		return sp
	}
	sp := build()
	bob := newListenerAgent(bobID)
	if err := sp.Add(ctx, bob.Agent); err != nil {
		t.Fatal(err)
	}
	bobSays := func(to, text string) string {
		t.Helper()
		r, err := bob.RequestMessage(ctx, &agency.Message{To: to, Action: "say", Args: openai.SayArgs{Content: text},
			Meta: map[string]any{"conversation": "c1"}})
		if err != nil {
			t.Fatalf("Bob's say to %s: %v", to, err)
		}
		v, _ := agency.Value[string](r)
		return v
	}
	if err := user.Say(ctx, "I want a refund"); err != nil {
		t.Fatal(err)
	}
	if h, _ := team.Holder(ctx, "c1"); h != refundsID {
		t.Fatalf("after the handoff the store names %q", h)
	}
	if got := bobSays(refundsID, "Bob to Refunds"); got != "Bob to Refunds" {
		t.Errorf("Bob naming the user's conversation to its holder read %q", got)
	}
	if got := bobSays(triageID, "Bob to Triage"); got != "Bob to Triage" {
		t.Errorf("Bob naming the user's conversation to Triage read %q", got)
	}
	if h, _ := team.Holder(ctx, "c1"); h != refundsID {
		t.Errorf("Bob's says moved the user's conversation to %q", h)
	}
	if _, err := bob.RequestMessage(ctx, &agency.Message{To: userID, Action: "say", Args: openai.SayArgs{Content: "talk to me instead"},
		Meta: map[string]any{"conversation": "c1"}}); err != nil {
		t.Logf("Bob's say to the user: %v", err)
	}
	if h := user.Holder(); h != refundsID {
		t.Errorf("Bob's say to the user agent made %q its holder", h)
	}
	if err := user.Say(ctx, "more"); err != nil {
		t.Fatal(err)
	}
	if got := screen.Shown(); len(got) == 0 || got[len(got)-1].Text != "I want a refund | more" {
		t.Errorf("the user's conversation after Bob named it: %+v", got)
	}

	// After a restart on the same file, from durable memory.
	if err := sp.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sp = build()
	if err := sp.Add(ctx, bob.Agent); err != nil {
		t.Fatal(err)
	}
	if got := bobSays(refundsID, "Bob again"); got != "Bob to Refunds | Bob again" {
		t.Errorf("after a restart Bob read %q", got)
	}
	if h, _ := team.Holder(ctx, "c1"); h != refundsID {
		t.Errorf("after a restart the store names %q", h)
	}
	for _, r := range append(refundSrv.Requests(), triageSrv.Requests()...) {
		var users []string
		for _, m := range r.Messages {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		if strings.HasPrefix(users[len(users)-1], "Bob") {
			for _, u := range users {
				if !strings.HasPrefix(u, "Bob") {
					t.Errorf("a model request for Bob carries the user's %q", u)
				}
			}
		}
	}
}

// listenerAgent is an agent whose say records nothing and answers "heard".
type listenerAgent struct{ *agency.Agent }

func newListenerAgent(id string) listenerAgent {
	a := agency.MustNewAgent(id)
	agency.Handle(a, "say", func(context.Context, openai.SayArgs) (string, error) { return "heard", nil })
	return listenerAgent{a}
}

// A trusted relay (a web front) speaks for Ann: her conversation is
// hers across a handoff, kept under her id, and the answers go to the
// relay.
func TestRelayedConversationAcrossHandoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	srv := openaitest.NewServer(t, calls1("transfer_to_refunds", "{}"), seen(nil))
	team := &Team{LLM: append(llmOptions(srv), openai.Relays("Web"))}
	triage, err := team.Agent("Triage", "triage", OnLLM(To("Refunds"), "Use for refunds.", Name("transfer_to_refunds")))
	if err != nil {
		t.Fatal(err)
	}
	refunds, err := team.Agent("Refunds", "refunds")
	if err != nil {
		t.Fatal(err)
	}
	web := agency.MustNewAgent("Web")
	heard := make(chan *agency.Message, 4)
	agency.Handle(web, "say", func(ctx context.Context, a openai.SayArgs) (string, error) {
		heard <- agency.MessageFrom(ctx)
		return "shown", nil
	})
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	for _, a := range []*agency.Agent{triage.Agent(), refunds.Agent(), web} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := web.RequestMessage(ctx, &agency.Message{To: "Triage", Action: "say", Args: openai.SayArgs{Content: "Ann wants a refund"},
		Meta: map[string]any{"conversation": "c1", openai.MetaOnBehalfOf: "Ann"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-heard:
		if m.From != "Refunds" || m.Meta["conversation"] != "c1" {
			t.Errorf("the relay heard %v from %s", m.Meta, m.From)
		}
	case <-ctx.Done():
		t.Fatal("the relay heard nothing")
	}
	c, err := LoadConversation(ctx, team.Store(), "Ann", "c1")
	if err != nil || c.Active != "Refunds" || c.User != "Web" || c.Owner != "Ann" {
		t.Errorf("Ann's conversation %+v, %v", c, err)
	}
	if h, _ := Holder(ctx, team.Store(), "Web", "c1"); h != "" {
		t.Errorf("the relay has a conversation c1 of its own, held by %q", h)
	}
	h, err := Memory(team.Store(), "Refunds").Load(ctx, openai.ConversationKey("Ann", "c1"))
	if err != nil || len(h) == 0 || h[0].Content != "Ann wants a refund" {
		t.Errorf("Refunds' history of Ann's c1: %+v, %v", h, err)
	}
}
