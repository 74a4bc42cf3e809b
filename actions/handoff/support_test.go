package handoff

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
)

// The seed's transcript, step by step: triage → refunds → triage → human.
const (
	triage1  = "I can help with that! Could I ask what item you're seeking a refund for?"
	refunds1 = "I see you're looking for a refund on a pair of shoes. Can you tell me what the issue is with the shoes?"
	refunds2 = "I recommend trying a size up as a fix; would that work for you?"
	refunds5 = "Your refund has been successfully processed! If you have any other questions, feel free to ask."
	refunds6 = "I can help with that, let me transfer you to a supervisor."
	transfer = "Transferred to Refunds. Adopt persona immediately."
)

func scriptMain(s *support) {
	s.triageSrv.Add(textStep(triage1), calls1("transfer_to_issues_and_repairs", "{}"), calls1("escalate_to_human", "{}"))
	s.refundSrv.Add(textStep(refunds1), textStep(refunds2),
		calls1("Shop__look_up_item", `{"search_query":"shoes"}`),
		calls1("Shop__execute_refund", `{"item_id":"item_132612938","reason":"not provided"}`),
		textStep(refunds5), textStep(refunds6), calls1("transfer_back_to_triage", "{}"))
	s.operator = human.NewScript("Hello this is manager", "Thanks.")
}

var userLines = []string{
	"I want a refund", "A pair of shoes I bought", "The shoes are too small", "no I want a refund",
	"I want to talk to your manager", "Okay", "Hi! Thanks for your service. I give you a 5 start!",
}

// Scenario A of the study: the seed's whole conversation, with what each
// scripted model server receives, what the user, the person and the shop
// receive, and what the store holds.
func TestSupportTranscript(t *testing.T) {
	s := newSupport(t, nil, 6)
	scriptMain(s)
	s.screen = human.NewScript(append(slices.Clone(userLines), "exit")...)
	// When Refunds takes the conversation over, the store says it holds it.
	var activeAtRefunds []string
	s.events.on = func(ctx context.Context, e Event) {
		if e.Kind == EventAccepted && e.To == "Refunds" {
			c, _ := LoadConversation(ctx, s.st, "User", e.Conversation)
			activeAtRefunds = append(activeAtRefunds, c.Active)
		}
	}
	s.build("Triage")
	if err := s.user.Run(s.ctx); err != nil {
		t.Fatalf("user.Run: %v", err)
	}

	// What the user was shown, in order.
	want := []string{
		"Triage: " + triage1, "Refunds: " + refunds1, "Refunds: " + refunds2, "Refunds: " + refunds5,
		"Refunds: " + refunds6, "Human: Hello this is manager", "Human: Thanks.",
	}
	if got := shown(s.screen); !slices.Equal(got, want) {
		t.Errorf("the user was shown\n%q\nwant\n%q", got, want)
	}

	// Row 1: Triage is offered exactly its three transfers, no parallel calls.
	tr := s.triageSrv.Requests()
	if len(tr) != 3 {
		t.Fatalf("Triage's model got %d requests, want 3", len(tr))
	}
	if got := toolNames(tr[0]); !slices.Equal(got, []string{"transfer_to_issues_and_repairs", "transfer_to_sales_agent", "escalate_to_human"}) {
		t.Errorf("Triage's tools %v", got)
	}
	if tool, _ := tr[0].Tool("escalate_to_human"); tool.Description != "Only call this if explicitly asked to." {
		t.Errorf("escalate_to_human's description %q", tool.Description)
	}
	if !strings.Contains(string(tr[0].Body), `"parallel_tool_calls":false`) {
		t.Errorf("Triage's request 1 does not turn parallel tool calls off: %s", tr[0].Body)
	}

	// Row 2: the handoff to Refunds.
	acc := s.events.of(EventAccepted)
	if len(acc) != 3 {
		t.Fatalf("handoffs accepted: %+v", acc)
	}
	if h := s.events.of(EventHandoff); len(h) != 3 || h[0].From != "Triage" || h[0].To != "Refunds" || h[0].Conversation != "c1" {
		t.Errorf("the handoff events: %+v", h)
	}
	if a := acc[0]; a.From != "Triage" || a.To != "Refunds" || a.Hops != 1 || !slices.Equal(a.Path, []string{"Triage"}) ||
		a.Message != transfer || a.Name != "transfer_to_issues_and_repairs" || a.Conversation != "c1" {
		t.Errorf("the first handoff: %+v", a)
	}
	if !slices.Equal(activeAtRefunds, []string{"Refunds"}) {
		t.Errorf("the store's holder when Refunds took over: %v", activeAtRefunds)
	}
	rr := s.refundSrv.Requests()
	if len(rr) != 7 {
		t.Fatalf("Refunds' model got %d requests, want 7", len(rr))
	}
	wantR1 := []msg{
		{role: "user", name: "User", content: "I want a refund"},
		{role: "assistant", name: "Triage", content: triage1},
		{role: "user", name: "User", content: "A pair of shoes I bought"},
		{role: "assistant", name: "Triage", call: "transfer_to_issues_and_repairs"},
		{role: "tool", content: transfer, callID: "tool"},
	}
	if got := messages(rr[0]); !slices.Equal(got, wantR1) {
		t.Errorf("Refunds' request 1:\n%+v\nwant\n%+v", got, wantR1)
	}
	if got := toolNames(rr[0]); !sameSet(got, []string{"transfer_back_to_triage", "Shop__look_up_item", "Shop__execute_refund"}) {
		t.Errorf("Refunds' tools %v", got)
	}

	// Row 4: the refund ran once, in the conversation; the model read the results.
	c := s.shopCalls.get()
	if len(c) != 2 || c[1].Action != "execute_refund" || c[1].Args != `{"item_id":"item_132612938","reason":"not provided"}` ||
		c[1].Meta["conversation"] != "c1" || c[0].Action != "look_up_item" || c[0].Args != `{"search_query":"shoes"}` {
		t.Errorf("the shop's calls: %+v", c)
	}
	if m := rr[3].Messages; m[len(m)-1].Content != `"item_132612938"` {
		t.Errorf("look_up_item's result read %q", m[len(m)-1].Content)
	}
	if m := rr[4].Messages; m[len(m)-1].Content != `"success"` {
		t.Errorf("execute_refund's result read %q", m[len(m)-1].Content)
	}

	// Row 6: back to Triage without Refunds' tool calls, then to the person.
	got := messages(tr[2])
	for _, m := range got {
		if strings.HasPrefix(m.call, "Shop__") || (m.role == "tool" && (m.content == `"success"` || m.content == `"item_132612938"`)) {
			t.Errorf("Triage's request 3 holds Refunds' tool call or result %+v", m)
		}
	}
	for _, text := range []string{refunds1, refunds2, refunds5, refunds6} {
		if !slices.ContainsFunc(got, func(m msg) bool { return m.name == "Refunds" && m.content == text }) {
			t.Errorf("Triage's request 3 lacks Refunds' %q", text)
		}
	}
	if n := len(got); n < 2 || got[n-2] != (msg{role: "assistant", name: "Refunds", call: "transfer_back_to_triage"}) ||
		got[n-1] != (msg{role: "tool", content: "Transferred to Triage. Adopt persona immediately.", callID: "tool"}) {
		t.Errorf("Triage's request 3 ends with %+v", got[max(0, len(got)-2):])
	}
	if a := acc[2]; a.From != "Triage" || a.To != "Human" || a.Hops != 2 || !slices.Equal(a.Path, []string{"Refunds", "Triage"}) {
		t.Errorf("the handoff to the person: %+v", a)
	}
	// The person was shown the conversation, then asked; each user line
	// after that was a question to them.
	var lines []string
	for _, l := range s.operator.Shown() {
		if l.From != "" {
			lines = append(lines, l.From+": "+l.Text)
		}
	}
	wantLines := []string{"User: I want a refund", "Triage: " + triage1, "User: A pair of shoes I bought",
		"Refunds: " + refunds1, "User: The shoes are too small", "Refunds: " + refunds2, "User: no I want a refund",
		"Refunds: " + refunds5, "User: I want to talk to your manager", "Refunds: " + refunds6, "User: Okay"}
	if !slices.Equal(lines, wantLines) {
		t.Errorf("the person was shown\n%q\nwant\n%q", lines, wantLines)
	}
	if asked := s.operator.Asked(); len(asked) != 2 || asked[0] != (human.Line{Conversation: "c1", Owner: "User", From: "User"}) ||
		asked[1] != (human.Line{Conversation: "c1", Owner: "User", From: "User", Text: userLines[6]}) {
		t.Errorf("the person was asked %+v", asked)
	}

	// Row 8: the store's log; Sales never asked; every script used.
	log, err := Log(s.ctx, s.st, "User", "c1")
	if err != nil {
		t.Fatal(err)
	}
	var hops []string
	for _, e := range log {
		hops = append(hops, e.From+"→"+e.To)
	}
	if !slices.Equal(hops, []string{"Triage→Refunds", "Refunds→Triage", "Triage→Human"}) {
		t.Errorf("the handoff log: %v", hops)
	}
	if n := len(s.salesSrv.Requests()); n != 0 {
		t.Errorf("Sales' model got %d requests", n)
	}
	if s.triageSrv.Left()+s.refundSrv.Left() != 0 {
		t.Errorf("steps left: Triage %d, Refunds %d", s.triageSrv.Left(), s.refundSrv.Left())
	}
	if conv, _ := LoadConversation(s.ctx, s.st, "User", "c1"); conv.Active != "Human" {
		t.Errorf("the store's holder at the end: %q", conv.Active)
	}
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x string) bool { return !slices.Contains(b, x) })
}

// A-forged: an agent outside the team cannot hand a conversation over,
// nor see that it could.
func TestSupportForged(t *testing.T) {
	s := newSupport(t, nil, 0)
	s.build("Triage")
	mallory := agency.MustNewAgent("Mallory")
	if err := s.sp.Add(s.ctx, mallory); err != nil {
		t.Fatal(err)
	}
	_, err := mallory.Request(s.ctx, "Refunds", Action, Transfer{Conversation: "c1", User: "User"})
	if !isPermissionDenied(err) {
		t.Errorf("Mallory's handoff: %v, want permission_denied", err)
	}
	help, err := agency.Call[map[string]agency.ActionHelp](s.ctx, mallory, "Refunds", agency.HelpAction, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := help[Action]; ok {
		t.Errorf("Refunds' help to Mallory lists handoff")
	}
	// The user is no member either; a member sees the action.
	if help, err := agency.Call[map[string]agency.ActionHelp](s.ctx, s.user.Agent(), "Refunds", agency.HelpAction, nil); err != nil {
		t.Fatal(err)
	} else if _, ok := help[Action]; ok {
		t.Errorf("Refunds' help to the user lists handoff")
	}
	if help, err := agency.Call[map[string]agency.ActionHelp](s.ctx, s.triage.Agent(), "Refunds", agency.HelpAction, nil); err != nil {
		t.Fatal(err)
	} else if _, ok := help[Action]; !ok {
		t.Errorf("Refunds' help to Triage lacks handoff: %v", help)
	}
	if n := len(s.refundSrv.Requests()); n != 0 {
		t.Errorf("Refunds' model was asked %d times", n)
	}
}

func isPermissionDenied(err error) bool {
	ae, ok := err.(*agency.ActionError)
	return ok && ae.Type == agency.TypePermissionDenied
}

// A-parallel: two transfers in one reply make one handoff; the second
// reads an error.
func TestSupportParallel(t *testing.T) {
	s := newSupport(t, nil, 0)
	s.triageSrv.Add(openaitest.Step{ToolCalls: []openaitest.ToolCall{
		{Name: "transfer_to_issues_and_repairs", Arguments: "{}"}, {Name: "transfer_to_sales_agent", Arguments: "{}"},
	}})
	s.refundSrv.Add(textStep(refunds1))
	s.build("Triage")
	s.say("A pair of shoes I bought")
	if got := shown(s.screen); !slices.Equal(got, []string{"Refunds: " + refunds1}) {
		t.Errorf("the user was shown %q", got)
	}
	h, err := Memory(s.st, "Triage").Load(s.ctx, openai.ConversationKey("User", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if last := h[len(h)-1]; last.Content != "error: only one handoff per reply; transfer_to_sales_agent was not made" {
		t.Errorf("the second transfer's result: %q", last.Content)
	}
	if n := len(s.salesSrv.Requests()); n != 0 {
		t.Errorf("Sales was asked %d times", n)
	}
	if acc := s.events.of(EventAccepted); len(acc) != 1 || acc[0].To != "Refunds" {
		t.Errorf("handoffs accepted: %+v", acc)
	}
	// Refunds keeps only the call that handed it the conversation.
	if got := messages(s.refundSrv.Requests()[0]); len(got) != 3 || got[1].call != "transfer_to_issues_and_repairs" {
		t.Errorf("Refunds' request: %+v", got)
	}
}
