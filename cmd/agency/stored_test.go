package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// With --store, Studio shows who holds each conversation of a handoff
// team by the team's store, also for a conversation whose messages passed
// before it started.
func TestStudioStore(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "team.db")
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	triageID, refundsID, userID := amqptest.Name("Triage"), amqptest.Name("Refunds"), amqptest.Name("User")
	srv := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "transfer_to_refunds", Arguments: "{}"}}},
		openaitest.Step{Text: "Refunds here."})
	team := &handoff.Team{Options: []handoff.Option{handoff.WithStore(st)}, UserID: userID, LLM: []openai.Option{
		openai.BaseURL(srv.URL), openai.APIKey("test"), openai.HTTPClient(srv.Client()),
	}}
	triage, err := team.Agent(triageID, "You route customers.",
		handoff.OnLLM(handoff.To(refundsID), "For refunds.", handoff.Name("transfer_to_refunds")))
	if err != nil {
		t.Fatal(err)
	}
	refunds, err := team.Agent(refundsID, "You do refunds.")
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Add(ctx, refunds.Agent()); err != nil {
		t.Fatal(err)
	}
	if err := sp.Add(ctx, triage.Agent()); err != nil {
		t.Fatal(err)
	}
	if err := sp.Add(ctx, team.UserAgent()); err != nil {
		t.Fatal(err)
	}
	conv := amqptest.Name("conv")
	if _, err := team.Run(ctx, handoff.Start{Agent: triageID, Conversation: conv, Message: "I want a refund"}); err != nil {
		t.Fatal(err)
	}
	holder, err := team.Holder(ctx, conv)
	if err != nil || holder != refundsID {
		t.Fatalf("the team says %q holds the conversation (%v)", holder, err)
	}

	studio := startStudio(t, url, "--exchange", sp.Exchange(), "studio", "--addr", "127.0.0.1:0", "--store", path)
	var convs []conversation
	getJSON(t, studio+"studio/api/conversations", &convs)
	var got *conversation
	for i := range convs {
		if convs[i].ID == conv {
			got = &convs[i]
		}
	}
	if got == nil || got.Stored == nil {
		t.Fatalf("Studio's conversations: %+v", convs)
	}
	if got.Holder != refundsID || got.Stored.Holder != refundsID || got.Stored.User != userID ||
		len(got.Stored.Log) != 1 || got.Stored.Log[0].From != triageID || got.Stored.Log[0].To != refundsID {
		t.Errorf("Studio shows %+v, stored %+v", got, got.Stored)
	}

	r := runAgency(t, url, "--exchange", sp.Exchange(), "studio", "--store", filepath.Join(t.TempDir(), "none.db"))
	if r.code != exitUsage || !strings.Contains(r.stderr, "--store") {
		t.Errorf("studio with a missing store: exit %d, stderr %q", r.code, r.stderr)
	}
}
