package human_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// handoffArgs is what a conversation carries from one agent to the next
// in this test: the shape of a handoff, built on the extension points.
type handoffArgs struct {
	Conversation string           `json:"conversation"`
	User         string           `json:"user"`
	History      []openai.Message `json:"history"`
	// ReplyTo is the user's say the next answer answers: the User takes
	// an answer to its own say as the word of the new holder.
	ReplyTo string `json:"reply_to"`
}

// transfers is an extension that offers one transfer tool per target; a
// call ends the turn and sends the history, its result included, to the
// target's handoff action.
func transfers(tb testing.TB, targets map[string]string) openai.Extension {
	return openai.Extension{
		Before: func(ctx context.Context, t *openai.Turn, r *openai.Request) error {
			for _, name := range slices.Sorted(maps.Keys(targets)) {
				r.Tools = append(r.Tools, openai.Tool{Name: name, Description: "Hand the conversation to " + targets[name]})
			}
			off := false
			r.Params.ParallelToolCalls = &off
			return nil
		},
		Call: func(ctx context.Context, t *openai.Turn, c openai.ToolCall) (string, error) {
			to := targets[c.Name]
			t.End(func(ctx context.Context, t *openai.Turn) {
				replyTo, _ := t.Data.(string) // a turn handed over carries it
				if m := agency.MessageFrom(ctx); replyTo == "" && m != nil {
					replyTo = m.ID // the user's say
				}
				args := handoffArgs{Conversation: t.Conversation, User: t.Partner, History: t.History, ReplyTo: replyTo}
				if _, err := t.Agent().Send(ctx, to, "handoff", args); err != nil {
					tb.Error(err)
				}
			})
			return "Transferred to " + to + ". Adopt persona immediately.", nil
		},
	}
}

func newLLM(t *testing.T, id string, srv *openaitest.Server, targets map[string]string) *openai.Agent {
	t.Helper()
	llm, err := openai.New(id, openai.APIKey("k"), openai.BaseURL(srv.URL), openai.HTTPClient(srv.Client()),
		openai.SystemPrompt("You are "+id+"."), openai.Retries(0, 0), openai.Extend(transfers(t, targets)))
	if err != nil {
		t.Fatal(err)
	}
	// The conversation comes back through handoff: the agent answers at
	// once, on the history it is handed.
	agency.Handle(llm.Agent(), "handoff", func(ctx context.Context, h handoffArgs) (string, error) {
		return llm.Continue(ctx, openai.Continuation{Conversation: h.Conversation, Partner: h.User, History: h.History,
			ReplyTo: h.ReplyTo, Data: h.ReplyTo})
	})
	return llm
}

// The conversation of the support seed, on the extension points: Triage
// hands the user to Refunds, Refunds back to Triage, Triage to a person.
// The user speaks through a User, which follows whoever holds the
// conversation; the person through a Front of their own.
func TestHandoffsToAPerson(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	triageSrv := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "transfer_to_refunds", Arguments: "{}"}}},
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "escalate_to_human", Arguments: "{}"}}},
	)
	refundsSrv := openaitest.NewServer(t,
		openaitest.Step{Text: "What is wrong with the shoes?"},
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "transfer_back_to_triage", Arguments: "{}"}}},
	)
	triage := newLLM(t, "Triage", triageSrv, map[string]string{"transfer_to_refunds": "Refunds", "escalate_to_human": "Human"})
	refunds := newLLM(t, "Refunds", refundsSrv, map[string]string{"transfer_back_to_triage": "Triage"})

	operator := human.NewScript("Hello, this is the manager.", "You are welcome.")
	person, err := human.New("Human", operator)
	if err != nil {
		t.Fatal(err)
	}
	agency.Handle(person.Agent(), "handoff", func(ctx context.Context, h handoffArgs) (string, error) {
		var lines []human.Line
		for _, m := range h.History {
			if m.Content != "" && (m.Role == openai.RoleUser || m.Role == openai.RoleAssistant) {
				lines = append(lines, human.Line{From: m.Name, Text: m.Content})
			}
		}
		return person.Take(ctx, human.Handover{Conversation: h.Conversation, User: h.User, ReplyTo: h.ReplyTo, History: lines})
	})

	screen := human.NewScript("I want a refund", "I want to talk to your manager", "Thanks!")
	user, err := human.NewUser("User", screen, human.StartWith("Triage"), human.Conversation("c1"))
	if err != nil {
		t.Fatal(err)
	}
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	for _, a := range []*agency.Agent{user.Agent(), person.Agent(), refunds.Agent(), triage.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := user.Run(ctx); err != nil {
		t.Fatal(err)
	}

	want := []human.Line{
		{Conversation: "c1", Owner: "User", From: "Refunds", Text: "What is wrong with the shoes?"},
		{Conversation: "c1", Owner: "User", From: "Human", Text: "Hello, this is the manager."},
		{Conversation: "c1", Owner: "User", From: "Human", Text: "You are welcome."},
	}
	if shown := screen.Shown(); !slices.Equal(shown, want) {
		t.Errorf("the user was shown\n %+v\nwant\n %+v", shown, want)
	}
	if got := operator.Shown(); !slices.Equal(got, []human.Line{
		{Conversation: "c1", Owner: "User", From: "User", Text: "I want a refund"},
		{Conversation: "c1", Owner: "User", From: "Refunds", Text: "What is wrong with the shoes?"},
		{Conversation: "c1", Owner: "User", From: "User", Text: "I want to talk to your manager"},
	}) {
		t.Errorf("the person was shown %+v", got)
	}
	if asked := operator.Asked(); len(asked) != 2 || asked[1] != (human.Line{Conversation: "c1", Owner: "User", From: "User", Text: "Thanks!"}) {
		t.Errorf("the person was asked %+v", asked)
	}

	// Refunds answered at once on the history Triage handed over; Triage
	// on the one Refunds handed back.
	r1 := refundsSrv.Requests()[0].Messages
	if len(r1) != 4 || r1[1].Name != "User" || r1[2].Name != "Triage" || r1[2].ToolCalls[0].Name != "transfer_to_refunds" ||
		r1[3].Content != "Transferred to Refunds. Adopt persona immediately." {
		t.Errorf("Refunds' first request: %+v", r1)
	}
	if p := refundsSrv.Requests()[0].ParallelToolCalls; p == nil || *p {
		t.Error("parallel tool calls were not turned off")
	}
	t2 := triageSrv.Requests()[1].Messages
	if last := t2[len(t2)-1]; last.Role != "tool" || last.Content != "Transferred to Triage. Adopt persona immediately." {
		t.Errorf("Triage's second request ends with %+v", last)
	}
	if !slices.ContainsFunc(t2, func(m openaitest.Message) bool {
		return m.Content == "What is wrong with the shoes?" && m.Name == "Refunds"
	}) {
		t.Errorf("Triage's second request lacks Refunds' answer: %+v", t2)
	}
	if triageSrv.Left() != 0 || refundsSrv.Left() != 0 {
		t.Errorf("steps left: %d, %d", triageSrv.Left(), refundsSrv.Left())
	}
	if user.Holder() != "Human" {
		t.Errorf("holder %q", user.Holder())
	}
}
