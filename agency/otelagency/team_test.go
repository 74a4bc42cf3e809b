package otelagency_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
)

// A traced Team.Run is one trace: the user's say, both agents' model
// calls, the handoff and the answer, every span with the caller's trace
// id, and the handoff's event on the span where it happened.
func TestTracedTeamRun(t *testing.T) {
	spaces(t, func(t *testing.T, add func(*agency.Agent), name func(string) string) {
		in, tracer, exp, _ := instrumented(t)
		srv := openaitest.NewServer(t,
			openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "transfer_to_refunds", Arguments: "{}"}}}, // Triage
			openaitest.Step{Text: "Which item?"}, // Refunds
		)
		triageID, refundsID := name("Triage"), name("Refunds")
		team := &handoff.Team{UserID: name("User"), Hooks: []any{in},
			LLM: []openai.Option{openai.APIKey("k"), openai.BaseURL(srv.URL), openai.HTTPClient(srv.Client()), openai.Model("m")}}
		triage, err := team.Agent(triageID, "You route customers.",
			handoff.OnLLM(handoff.To(refundsID), "Use for refunds.", handoff.Name("transfer_to_refunds")))
		if err != nil {
			t.Fatal(err)
		}
		refunds, err := team.Agent(refundsID, "You handle refunds.")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []*agency.Agent{team.UserAgent(), triage.Agent(), refunds.Agent()} {
			add(a)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		ctx, root := tracer.Start(ctx, "root")
		res, err := team.Run(ctx, handoff.Start{Agent: triageID, Message: "I want a refund"})
		root.End()
		if err != nil {
			t.Fatal(err)
		}
		if last := res.History[len(res.History)-1]; last.Content != "Which item?" {
			t.Fatalf("last answer %+v", last)
		}
		spans := waitSpans(t, exp, "request "+triageID+".say", "process "+triageID+".say", "chat m",
			"process "+refundsID+".handoff", "process "+team.UserID+".say")
		var handoffEvent bool
		n := 0
		for _, s := range spans.Snapshots() {
			if s.StartTime().Before(start) || attrs(s)["agency.action"] == "help" {
				continue // the surveys of the LLM agents joining
			}
			n++
			if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
				t.Errorf("span %q (%v) is not in the caller's trace", s.Name(), attrs(s))
			}
			for _, e := range s.Events() {
				if e.Name == "handoff.handoff" {
					handoffEvent = true
				}
			}
		}
		if n < 8 {
			t.Errorf("only %d spans", n)
		}
		if !handoffEvent {
			t.Error("no span has the handoff event")
		}
	})
}
