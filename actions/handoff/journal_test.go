package handoff

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// heardSay is a say the user agent of these tests was told.
type heardSay struct{ text, inReplyTo, conversation string }

// journalUser returns a user agent that passes each say it is told to
// the channel.
func journalUser(heard chan<- heardSay) *agency.Agent {
	u := agency.MustNewAgent("User")
	agency.Handle(u, "say", func(ctx context.Context, a openai.SayArgs) (string, error) {
		m := agency.MessageFrom(ctx)
		r, _ := m.Meta["in_reply_to"].(string)
		c, _ := m.Meta[metaConversation].(string)
		heard <- heardSay{a.Content, r, c}
		return "ok", nil
	})
	return u
}

func waitSay(t *testing.T, heard <-chan heardSay) heardSay {
	t.Helper()
	select {
	case h := <-heard:
		return h
	case <-time.After(30 * time.Second):
		t.Fatal("nothing was said in 30s")
		return heardSay{}
	}
}

// A pending turn past its bounds (resumed too often, or too old) is not
// resumed: the asker is told, with in_reply_to the question's id, and the
// turn is forgotten; the model is never called.
func TestPendingTurnDropped(t *testing.T) {
	for name, p := range map[string]openai.PendingTurn{
		"resumes": {Resumes: openai.DefaultMaxResumes, Started: time.Now()},
		"age":     {Started: time.Now().Add(-openai.DefaultMaxTurnAge - time.Minute)},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			st := store.NewMemory()
			srv := openaitest.NewServer(t)
			p.ID, p.Owner, p.Conversation, p.Partner, p.SayBack = "q1", "User", "c1", "User", true
			p.Key = openai.ConversationKey("User", "c1")
			j := Memory(st, "Bot").(openai.Journal)
			if err := j.Begin(ctx, p, openai.Message{Role: openai.RoleUser, Name: "User", Content: "hello?"}); err != nil {
				t.Fatal(err)
			}
			team := &Team{Options: []Option{WithStore(st)}, LLM: []openai.Option{openai.BaseURL(srv.URL), openai.APIKey("test")}}
			bot, err := team.Agent("Bot", "You answer.")
			if err != nil {
				t.Fatal(err)
			}
			heard := make(chan heardSay, 4)
			sp := space.NewLocal()
			defer sp.Close(context.Background())
			if err := sp.Add(ctx, journalUser(heard)); err != nil {
				t.Fatal(err)
			}
			if err := sp.Add(ctx, bot.Agent()); err != nil {
				t.Fatal(err)
			}
			h := waitSay(t, heard)
			if h.inReplyTo != "q1" || h.conversation != "c1" || !strings.HasPrefix(h.text, "Sorry, I could not answer your message") {
				t.Errorf("the asker was told %+v", h)
			}
			noPending(t, j)
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("the model was called %d times", n)
			}
		})
	}
}

// A turn whose agent leaves its space while the model is asked stays
// pending; the agent built again on the same store takes it up when it
// joins, and the answer reaches the asker with in_reply_to the question's
// id, the question once in the history.
func TestPendingTurnResumed(t *testing.T) {
	ctx := t.Context()
	st := store.NewMemory()
	asked := make(chan struct{}, 1)
	srv := openaitest.NewServer(t,
		openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
			asked <- struct{}{}
			<-r.Context().Done()
			return openaitest.Step{Status: 500}
		}},
		openaitest.Step{Text: "Hello again."},
	)
	heard := make(chan heardSay, 4)
	user := journalUser(heard)
	build := func() (*openai.Agent, *space.Local) {
		team := &Team{Options: []Option{WithStore(st)}, LLM: []openai.Option{openai.BaseURL(srv.URL), openai.APIKey("test")}}
		bot, err := team.Agent("Bot", "You answer.")
		if err != nil {
			t.Fatal(err)
		}
		sp := space.NewLocal()
		if err := sp.Add(ctx, user); err != nil {
			t.Fatal(err)
		}
		if err := sp.Add(ctx, bot.Agent()); err != nil {
			t.Fatal(err)
		}
		return bot, sp
	}
	_, sp := build()
	id, err := user.SendMessage(ctx, &agency.Message{To: "Bot", Action: "say", Args: openai.SayArgs{Content: "hello?"},
		Meta: map[string]any{metaConversation: "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	<-asked
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // Close cancels the turn when it runs out
	_ = sp.Close(cctx)
	cancel()

	_, sp = build()
	defer sp.Close(context.Background())
	h := waitSay(t, heard)
	if h.text != "Hello again." || h.inReplyTo != id || h.conversation != "c1" {
		t.Errorf("the asker was told %+v", h)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests", len(reqs))
	}
	if err := consistent(reqs[1].Messages[1:]); err != nil {
		t.Errorf("the request after the restart: %v", err)
	}
	noPending(t, Memory(st, "Bot").(openai.Journal))
}

// A conversation handed over is written ahead with the take-over: when
// the receiver's process stops during its first model request, its
// agent built again on the same store takes the turn up and answers the
// user's question (in_reply_to its id); the agent that handed it over is
// not asked again, its turn having ended with the handoff's Apply.
func TestHandedTurnResumed(t *testing.T) {
	ctx := t.Context()
	st := store.NewMemory()
	asked := make(chan struct{}, 1)
	triageSrv := openaitest.NewServer(t, calls1("transfer_to_refunds", "{}"))
	refundSrv := openaitest.NewServer(t,
		openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
			asked <- struct{}{}
			<-r.Context().Done()
			return openaitest.Step{Status: 500}
		}},
		textStep("Refunds here."),
	)
	heard := make(chan heardSay, 4)
	user := journalUser(heard)
	build := func() *space.Local {
		team := &Team{Options: []Option{WithStore(st)}, LLM: []openai.Option{openai.APIKey("test")},
			AgentLLM: map[string][]openai.Option{"Triage": {openai.BaseURL(triageSrv.URL)}, "Refunds": {openai.BaseURL(refundSrv.URL)}}}
		triage, err := team.Agent("Triage", "You route.", OnLLM(To("Refunds"), "Refunds.", Name("transfer_to_refunds")))
		if err != nil {
			t.Fatal(err)
		}
		refunds, err := team.Agent("Refunds", "You refund.")
		if err != nil {
			t.Fatal(err)
		}
		sp := space.NewLocal()
		for _, a := range []*agency.Agent{user, triage.Agent(), refunds.Agent()} {
			if err := sp.Add(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		return sp
	}
	sp := build()
	id, err := user.SendMessage(ctx, &agency.Message{To: "Triage", Action: "say", Args: openai.SayArgs{Content: "A refund, please."},
		Meta: map[string]any{metaConversation: "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("Refunds' model was never asked")
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // Close cancels the turn when it runs out
	_ = sp.Close(cctx)
	cancel()

	sp = build()
	defer sp.Close(context.Background())
	h := waitSay(t, heard)
	if h.text != "Refunds here." || h.inReplyTo != id || h.conversation != "c1" {
		t.Errorf("the user was told %+v", h)
	}
	if n := len(triageSrv.Requests()); n != 1 {
		t.Errorf("Triage's model got %d requests, want 1", n)
	}
	reqs := refundSrv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("Refunds' model got %d requests", len(reqs))
	}
	if err := consistent(reqs[1].Messages[1:]); err != nil {
		t.Errorf("Refunds' request after the restart: %v", err)
	}
	noPending(t, Memory(st, "Refunds").(openai.Journal))
}

// noPending waits until j holds no pending turn: a turn is forgotten
// right after its answer is said.
func noPending(t *testing.T, j openai.Journal) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, err := j.Pending(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still pending: %+v", ps)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
