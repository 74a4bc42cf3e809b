package handoff

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

// A handoff to an agent that is not there (a tool's Reply names one that
// never joined) goes back to the agent that made it after a bounded wait:
// the store names it the holder again, an event says why (no_recipient),
// and the user is told, so Run returns instead of waiting for ever.
func TestHandoffToAbsentAgent(t *testing.T) {
	absent(t, func() aSpace { return space.NewLocal() }, func(s string) string { return s })
}

// The same on amqpspace, where the broker tells that nobody is there.
func TestHandoffToAbsentAgentOnAMQP(t *testing.T) {
	absent(t, func() aSpace { return amqptest.NewSpace(t, amqpspace.Config{}) }, amqptest.Name)
}

func absent(t *testing.T, newSpace func() aSpace, name func(string) string) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	triageID, lookupID, ghostID := name("Triage"), name("Lookup"), name("Ghost")
	srv := openaitest.NewServer(t, calls1(lookupID+"__find", "{}"))
	rec := newRecorder()
	team := &Team{UserID: name("User"), LLM: llmOptions(srv), Options: []Option{Observe(rec), AbsentWait(200 * time.Millisecond)}}
	triage, err := team.Agent(triageID, "You route.")
	if err != nil {
		t.Fatal(err)
	}
	lookup := agency.MustNewAgent(lookupID)
	agency.Handle(lookup, "find", func(context.Context, struct{}) (Reply, error) {
		return Reply{Value: "found it", Goto: To(ghostID)}, nil
	}, agency.Describe("Finds the right agent"))
	sp := newSpace()
	defer sp.Close(context.Background())
	for _, a := range []*agency.Agent{lookup, triage.Agent(), team.UserAgent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithTimeout(ctx, safety/2)
	defer stop()
	res, err := team.Run(runCtx, Start{Agent: triageID, Message: "help", Conversation: "c1"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Last != triageID || len(res.History) == 0 {
		t.Errorf("Run ended with %s, history %+v", res.Last, res.History)
	}
	if last := res.History[len(res.History)-1].Content; !strings.Contains(last, ghostID) || !strings.Contains(last, "no_recipient") {
		t.Errorf("the user was told %q", last)
	}
	if h, _ := team.Holder(ctx, "c1"); h != triageID {
		t.Errorf("the store names %q the holder", h)
	}
	ev := rec.of(EventReturned)
	if len(ev) != 1 || ev[0].To != ghostID || !errors.Is(ev[0].Err, ErrNoRecipient) {
		t.Errorf("returned events %+v", ev)
	}
}

// A static target that names no member of the team is refused when the
// team is complete: Run does not start, and Check says which.
func TestTeamRefusesUnknownTarget(t *testing.T) {
	srv := openaitest.NewServer(t)
	team := &Team{LLM: llmOptions(srv)}
	if _, err := team.Agent("Triage", "You route.", OnLLM(To("Refundz"), "Use for refunds.")); err != nil {
		t.Fatal(err)
	}
	if _, err := team.Agent("Refunds", "You refund.", OnLLM(To("Triage"), "Use for the rest.")); err != nil {
		t.Fatal(err)
	}
	err := team.Check()
	if err == nil || !strings.Contains(err.Error(), `"Refundz"`) || !strings.Contains(err.Error(), "Triage") {
		t.Errorf("Check: %v", err)
	}
	if _, err := team.Run(context.Background(), Start{Agent: "Triage", Message: "hi"}); err == nil || !strings.Contains(err.Error(), "Refundz") {
		t.Errorf("Run: %v", err)
	}
	ok := &Team{LLM: llmOptions(srv), Members: []string{"Remote"}}
	if _, err := ok.Agent("A", "a", OnLLM(To("Remote"), "remote"), OnContext(To("B"), "x == 1"), AfterWork(Back())); err != nil {
		t.Fatal(err)
	}
	if _, err := ok.Agent("B", "b", OnLLM(To("A"), "a")); err != nil {
		t.Fatal(err)
	}
	if err := ok.Check(); err != nil {
		t.Errorf("Check of a team whose targets are all members: %v", err)
	}
}
