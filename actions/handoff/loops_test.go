package handoff

import (
	"errors"
	"slices"
	"testing"
)

// A-sales: Triage hands a buyer to Sales, who follows the seed's routine
// and orders once.
func TestSupportSales(t *testing.T) {
	s := newSupport(t, nil, 6)
	s.triageSrv.Add(calls1("transfer_to_sales_agent", "{}"))
	s.salesSrv.Add(
		textStep("Are roadrunners giving you trouble?"),
		textStep("ACME Rocket Skates could help you with that."),
		textStep("They are yours for just $1500. Deal?"),
		calls1("Shop__execute_order", `{"product":"Rocket Skates","price":1500}`),
		textStep("Done! One caveat: they only go forward."),
	)
	s.build("Triage")
	for _, line := range []string{"I need something to catch roadrunners", "Yes, they are too fast", "Tell me more", "yes"} {
		s.say(line)
	}
	want := []string{"Sales: Are roadrunners giving you trouble?", "Sales: ACME Rocket Skates could help you with that.",
		"Sales: They are yours for just $1500. Deal?", "Sales: Done! One caveat: they only go forward."}
	if got := shown(s.screen); !slices.Equal(got, want) {
		t.Errorf("the user was shown %q", got)
	}
	c := s.shopCalls.get()
	if len(c) != 1 || c[0].Action != "execute_order" || c[0].Args != `{"product":"Rocket Skates","price":1500}` || c[0].Meta["conversation"] != "c1" {
		t.Errorf("the shop's calls: %+v", c)
	}
	sr := s.salesSrv.Requests()
	if got := toolNames(sr[0]); !sameSet(got, []string{"transfer_back_to_triage", "Shop__execute_order"}) {
		t.Errorf("Sales' tools %v", got)
	}
	if tool, _ := sr[0].Tool("Shop__execute_order"); !sameJSONText(string(tool.Parameters),
		`{"type":"object","properties":{"product":{"type":"string"},"price":{"type":"integer","minimum":0}},"required":["product","price"],"additionalProperties":false}`) {
		t.Errorf("execute_order's parameters %s", tool.Parameters)
	}
	if m := sr[4].Messages; m[len(m)-1].Content != `"Success"` {
		t.Errorf("the order's result read %q", m[len(m)-1].Content)
	}
	if s.salesSrv.Left() != 0 || len(s.refundSrv.Requests()) != 0 {
		t.Errorf("Sales' steps left %d; Refunds asked %d times", s.salesSrv.Left(), len(s.refundSrv.Requests()))
	}
}

// A-bounce: two agents that keep handing the conversation to each other
// make four handoffs; the fifth is refused with an error the model reads,
// and the model answers the user instead.
func TestSupportBounce(t *testing.T) {
	s := newSupport(t, nil, 6)
	for range 3 {
		s.triageSrv.Add(calls1("transfer_to_sales_agent", "{}"))
	}
	s.triageSrv.Add(textStep("Let me help you directly."))
	s.salesSrv.Add(calls1("transfer_back_to_triage", "{}"), calls1("transfer_back_to_triage", "{}"))
	s.build("Triage")
	s.say("I need something")
	if got := shown(s.screen); !slices.Equal(got, []string{"Triage: Let me help you directly."}) {
		t.Errorf("the user was shown %q", got)
	}
	log, _ := Log(s.ctx, s.st, "User", "c1")
	var hops []string
	for _, e := range log {
		hops = append(hops, e.From+"→"+e.To)
	}
	if !slices.Equal(hops, []string{"Triage→Sales", "Sales→Triage", "Triage→Sales", "Sales→Triage"}) {
		t.Errorf("handoffs made: %v", hops)
	}
	tr := s.triageSrv.Requests()
	last := tr[len(tr)-1].Messages
	want := "error: loop_limit: Triage and Sales handed this conversation back and forth 4 times since the user's last message; answer the user instead"
	if got := last[len(last)-1].Content; got != want {
		t.Errorf("Triage's last transfer read %q", got)
	}
	if ll := s.events.of(EventLoopLimit); len(ll) != 1 || ll[0].Agent != "Triage" || ll[0].To != "Sales" || ll[0].Err.Error() != want[len("error: "):] || !errors.Is(ll[0].Err, ErrLoopLimit) {
		t.Errorf("loop_limit events: %+v", ll)
	}
	if s.triageSrv.Left()+s.salesSrv.Left() != 0 {
		t.Errorf("steps left")
	}
	// The user's next message starts the count again.
	s.triageSrv.Add(calls1("transfer_to_sales_agent", "{}"))
	s.salesSrv.Add(textStep("Sales here."))
	s.say("Then sell me something")
	if got := shown(s.screen); got[len(got)-1] != "Sales: Sales here." {
		t.Errorf("after the user's next message: %q", got)
	}
}

// A-hops: with a hop budget of 1, Refunds → Triage is made, and Triage's
// escalation is refused; the person receives nothing.
func TestSupportHops(t *testing.T) {
	s := newSupport(t, nil, 1)
	scriptMain(s)
	s.triageSrv.Add(textStep("I cannot escalate this right now."))
	s.build("Triage")
	for _, line := range userLines[:6] {
		s.say(line)
	}
	tr := s.triageSrv.Requests()
	if len(tr) != 4 {
		t.Fatalf("Triage's model got %d requests", len(tr))
	}
	m := tr[3].Messages
	want := "error: loop_limit: 1 handoff since the user's last message (Refunds→Triage); answer the user instead"
	if got := m[len(m)-1].Content; got != want {
		t.Errorf("escalate_to_human read %q", got)
	}
	if got := shown(s.screen); got[len(got)-1] != "Triage: I cannot escalate this right now." {
		t.Errorf("the user was shown %q", got)
	}
	if n := len(s.operator.Shown()) + len(s.operator.Asked()); n != 0 {
		t.Errorf("the person was reached %d times", n)
	}
	if acc := s.events.of(EventAccepted); len(acc) != 2 || acc[1].To != "Triage" {
		t.Errorf("accepted: %+v", acc)
	}
}

// sameJSONText compares two JSON texts by value.
func sameJSONText(a, b string) bool {
	var x, y any
	if jsonUnmarshal(a, &x) != nil || jsonUnmarshal(b, &y) != nil {
		return false
	}
	return slices.Equal(canon(x), canon(y))
}
