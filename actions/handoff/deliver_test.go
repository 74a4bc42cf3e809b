package handoff

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

// A handoff to an agent that is there but never answers it (stuck in its
// handoff action) goes back to the agent that made it after the same
// bounded wait as one to an absent agent: the timeouts of its deliveries
// count toward AbsentWait, never an endless wait.
func TestHandoffToStuckAgent(t *testing.T) {
	stuck(t, func() aSpace { return space.NewLocal() }, func(s string) string { return s })
}

// The same on amqpspace, where the broker knows the receiver is there.
func TestHandoffToStuckAgentOnAMQP(t *testing.T) {
	stuck(t, func() aSpace { return amqptest.NewSpace(t, amqpspace.Config{}) }, amqptest.Name)
}

func stuck(t *testing.T, newSpace func() aSpace, name func(string) string) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	triageID, lookupID, stuckID := name("Triage"), name("Lookup"), name("Stuck")
	srv := openaitest.NewServer(t, calls1(lookupID+"__find", "{}"))
	rec := newRecorder()
	team := &Team{UserID: name("User"), LLM: llmOptions(srv), Options: []Option{
		Observe(rec), AbsentWait(300 * time.Millisecond),
		// Each delivery waits for an answer half a Lease.
		Relay(store.RelayConfig{Lease: time.Second, Poll: 100 * time.Millisecond}),
	}}
	triage, err := team.Agent(triageID, "You route.")
	if err != nil {
		t.Fatal(err)
	}
	lookup := agency.MustNewAgent(lookupID)
	agency.Handle(lookup, "find", func(context.Context, struct{}) (Reply, error) {
		return Reply{Value: "found it", Goto: To(stuckID)}, nil
	}, agency.Describe("Finds the right agent"))
	release := make(chan struct{})
	taken := make(chan struct{}, 100)
	stuckAgent := agency.MustNewAgent(stuckID, agency.Concurrency(4))
	agency.Handle(stuckAgent, Action, func(context.Context, Transfer) (string, error) {
		taken <- struct{}{}
		<-release // never answers while the test runs
		return "", nil
	})
	sp := newSpace()
	defer sp.Close(context.Background())
	defer close(release) // before the space closes, which waits for the action
	for _, a := range []*agency.Agent{lookup, stuckAgent, triage.Agent(), team.UserAgent()} {
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
	if len(taken) == 0 {
		t.Error("the stuck agent never got the handoff")
	}
	if res.Last != triageID || len(res.History) == 0 {
		t.Fatalf("Run ended with %s, history %+v", res.Last, res.History)
	}
	if last := res.History[len(res.History)-1].Content; !strings.Contains(last, stuckID) || !strings.Contains(last, "no_recipient") || !strings.Contains(last, "did not take") {
		t.Errorf("the user was told %q", last)
	}
	if h, _ := team.Holder(ctx, "c1"); h != triageID {
		t.Errorf("the store names %q the holder", h)
	}
	ev := rec.of(EventReturned)
	if len(ev) != 1 || ev[0].To != stuckID || !errors.Is(ev[0].Err, ErrNoRecipient) {
		t.Errorf("returned events %+v", ev)
	}
}
