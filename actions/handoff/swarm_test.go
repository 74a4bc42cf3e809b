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
	"github.com/seed72275b23/agency-go/space"
)

// Account is the typed view of the swarm seed's variables.
type Account struct {
	LoggedIn bool   `json:"logged_in" expr:"logged_in"`
	Attempts int    `json:"attempts" expr:"attempts"`
	Passport string `json:"passport_number" expr:"passport_number"`
	Level    int    `json:"account_level" expr:"account_level"`
}

type passportArgs struct {
	Number string `json:"number" validate:"required,alphanum,max=20"`
}

type setArgs struct {
	Level  int  `json:"account_level"`
	Budget int  `json:"budget_remaining"`
	Login  bool `json:"logged_in"`
}

const agent1Cond = "(${account_level} > 2 and ${budget_remaining} > 0) or ${account_tier} == 'Gold' or len(${order_count}) > 10"

// swarm is the program of the swarm seed: five LLM agents with context
// conditions, after-work at agent and team level, a templated system
// prompt, and an Accounts agent whose tools return Replies.
type swarm struct {
	t                  *testing.T
	ctx                context.Context
	s1, s2, s3, s4, sR *openaitest.Server
	events             *recorder
	team               *Team
	sp                 *space.Local
	seen               []Account // what verify_passport read of the variables
	versions           []float64 // the context_version of its requests
}

func newSwarm(t *testing.T, accounts bool) *swarm {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	w := &swarm{t: t, ctx: ctx, s1: openaitest.NewServer(t), s2: openaitest.NewServer(t), s3: openaitest.NewServer(t),
		s4: openaitest.NewServer(t), sR: openaitest.NewServer(t), events: newRecorder()}
	w.team = &Team{UserID: "User", Options: []Option{DefaultAfterWork(Terminate()), Observe(w.events)}, AgentLLM: map[string][]openai.Option{
		"agent_1": llmOptions(w.s1), "agent_2": llmOptions(w.s2), "agent_3": llmOptions(w.s3), "agent_4": llmOptions(w.s4),
		"CustomerServiceRep": llmOptions(w.sR),
	}}
	a1, err := w.team.Agent("agent_1", "You route customers.",
		OnContext(To("agent_2"), agent1Cond, Available("logged_in")),
		OnLLM(To("agent_3"), "condition_2"),
		AfterWork(To("agent_4")))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := w.team.Agent("agent_2", "You serve premium customers.", AfterWork(RevertToUser()))
	if err != nil {
		t.Fatal(err)
	}
	a3, err := w.team.Agent("agent_3", "You handle condition 2.")
	if err != nil {
		t.Fatal(err)
	}
	a4, err := w.team.Agent("agent_4", "You are the fallback.")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := w.team.Agent("CustomerServiceRep", "",
		SystemTemplate("You are a customer service representative. Quote passport number '{{.passport_number}}'"))
	if err != nil {
		t.Fatal(err)
	}
	var agents []*agency.Agent
	if accounts {
		acc := agency.MustNewAgent("Accounts")
		agency.Handle(acc, "verify_passport", func(ctx context.Context, p passportArgs) (Reply, error) {
			a, err := VarsAs[Account](ctx)
			if err != nil {
				return Reply{}, err
			}
			w.seen = append(w.seen, a)
			v, _ := agency.MessageFrom(ctx).Meta[metaVersion].(int64)
			w.versions = append(w.versions, float64(v))
			if a.Attempts > 3 {
				return Reply{Value: "too many attempts", Goto: Terminate()}, nil
			}
			return Reply{Value: "verified", Goto: To("CustomerServiceRep"),
				Set: Vars{"passport_number": p.Number, "logged_in": true}}, nil
		})
		agency.Handle(acc, "upgrade", func(ctx context.Context, s setArgs) (Reply, error) {
			return Reply{Value: "upgraded", Set: Vars{"account_level": s.Level, "budget_remaining": s.Budget, "logged_in": s.Login}}, nil
		})
		agency.Handle(acc, "hold", func(ctx context.Context, _ struct{}) (Reply, error) {
			return Reply{Value: "Please hold the line.", Goto: RevertToUser()}, nil
		})
		agency.Handle(acc, "update_passport", func(ctx context.Context, p passportArgs) (Reply, error) {
			return Reply{Value: "updated", Set: Vars{"passport_number": p.Number}}, nil
		})
		// Before the LLM agents: their first turns offer what was there
		// when they joined.
		agents = append(agents, acc)
	}
	agents = append(agents, a1.Agent(), a2.Agent(), a3.Agent(), a4.Agent(), rep.Agent(), w.team.UserAgent())
	w.sp = space.NewLocal()
	t.Cleanup(func() { _ = w.sp.Close(context.Background()) })
	for _, a := range agents {
		if err := w.sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *swarm) run(s Start) Result {
	w.t.Helper()
	if s.Message == "" {
		s.Message = "Hello"
	}
	if s.Agent == "" {
		s.Agent = "agent_1"
	}
	if s.Conversation == "" {
		s.Conversation = "c1"
	}
	res, err := w.team.Run(w.ctx, s)
	if err != nil {
		w.t.Fatalf("Run: %v", err)
	}
	return res
}

func premium() Vars {
	return Vars{"logged_in": true, "account_level": 3, "budget_remaining": 5, "account_tier": "Silver", "order_count": []any{}}
}

// B1: the context condition holds: agent_2 gets the conversation without
// agent_1's model being asked, and reverts to the user.
func TestSwarmContextRouting(t *testing.T) {
	w := newSwarm(t, false)
	w.s2.Add(textStep("Welcome, valued customer."))
	res := w.run(Start{Vars: premium()})
	if n := len(w.s1.Requests()); n != 0 {
		t.Errorf("agent_1's model got %d requests", n)
	}
	acc := w.events.of(EventAccepted)
	if len(acc) != 1 || acc[0].From != "agent_1" || acc[0].To != "agent_2" || acc[0].Name != "on_context" {
		t.Fatalf("accepted: %+v", acc)
	}
	if !sameJSONText(string(canon(acc[0].Vars)), string(canon(premium()))) {
		t.Errorf("the handoff carried %v", acc[0].Vars)
	}
	if c := w.events.of(EventCondition); len(c) != 1 || c[0].Name != agent1Cond {
		t.Errorf("condition events: %+v", c)
	}
	if res.Status != RunAwaitingUser || res.Last != "agent_2" {
		t.Errorf("Run: %s, last %s", res.Status, res.Last)
	}
	if want := premium(); !sameJSONText(string(canon(res.Vars)), string(canon(want))) {
		t.Errorf("vars %v", res.Vars)
	}
	if n := len(res.History); n != 2 || res.History[1].Content != "Welcome, valued customer." {
		t.Errorf("history %+v", res.History)
	}
	// The variables travelled with the handoff: agent_2's tool requests carry them.
	if r := w.s2.Requests()[0]; len(r.Messages) != 2 || r.Messages[1].Content != "Hello" {
		t.Errorf("agent_2's request: %+v", r.Messages)
	}
}

// B2: each branch of the or.
func TestSwarmOrBranches(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars Vars
		to2  bool
	}{
		{"gold", Vars{"logged_in": true, "account_level": 1, "budget_remaining": 0, "account_tier": "Gold", "order_count": []any{}}, true},
		{"11 orders", Vars{"logged_in": true, "account_level": 1, "budget_remaining": 0, "account_tier": "Silver", "order_count": make([]any, 11)}, true},
		{"10 orders", Vars{"logged_in": true, "account_level": 1, "budget_remaining": 0, "account_tier": "Silver", "order_count": make([]any, 10)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSwarm(t, false)
			if tc.to2 {
				w.s2.Add(textStep("Welcome."))
			} else {
				w.s1.Add(textStep("Hi."))
				w.s4.Add(textStep("Done."))
			}
			res := w.run(Start{Vars: tc.vars})
			if got := len(w.s1.Requests()) == 0; got != tc.to2 {
				t.Errorf("agent_1's model asked: %v", !got)
			}
			want := "agent_2"
			if !tc.to2 {
				want = "agent_4"
			}
			if res.Last != want {
				t.Errorf("last %s, want %s", res.Last, want)
			}
		})
	}
}

// B3: a rule's availability: while logged_in is false the condition is
// not tried; the model gets exactly the one transfer tool; agent_3 has no
// after-work of its own, so the team's Terminate ends the conversation.
func TestSwarmAvailability(t *testing.T) {
	w := newSwarm(t, false)
	vars := premium()
	vars["logged_in"] = false
	w.s1.Add(calls1("transfer_to_agent_3", "{}"))
	w.s3.Add(textStep("Handled."))
	res := w.run(Start{Vars: vars})
	r := w.s1.Requests()[0]
	if got := toolNames(r); !slices.Equal(got, []string{"transfer_to_agent_3"}) {
		t.Errorf("agent_1's tools %v", got)
	}
	if tool, _ := r.Tool("transfer_to_agent_3"); tool.Description != "condition_2" {
		t.Errorf("description %q", tool.Description)
	}
	if res.Status != RunTerminated || res.Last != "agent_3" {
		t.Errorf("Run: %s, last %s", res.Status, res.Last)
	}
	if c, _ := LoadConversation(w.ctx, w.team.Store(), "User", "c1"); c.Status != StatusTerminated {
		t.Errorf("the conversation's status %q", c.Status)
	}
}

// B4: agent_1's own after-work (to agent_4) beats the team's Terminate;
// agent_4 continues on a history that ends with agent_1's answer.
func TestSwarmAfterWork(t *testing.T) {
	w := newSwarm(t, false)
	w.s1.Add(textStep("Let me think."))
	w.s4.Add(textStep("Done."))
	user := human.NewScript("exit")
	res := w.run(Start{Vars: Vars{"logged_in": true, "account_level": 0, "budget_remaining": 0, "account_tier": "Silver", "order_count": []any{}}, User: user})
	if got := shown(user); !slices.Equal(got, []string{"agent_1: Let me think.", "agent_4: Done."}) {
		t.Errorf("the user was shown %q", got)
	}
	m := w.s4.Requests()[0].Messages
	if last := m[len(m)-1]; last.Role != "assistant" || last.Name != "agent_1" || last.Content != "Let me think." {
		t.Errorf("agent_4's history ends with %+v", last)
	}
	if res.Status != RunTerminated || res.Last != "agent_4" {
		t.Errorf("Run: %s, last %s", res.Status, res.Last)
	}
	if aw := w.events.of(EventAfterWork); len(aw) != 2 || aw[0].To != "agent_4" || aw[1].Name != string(KindTerminate) {
		t.Errorf("after-work events: %+v", aw)
	}
	if n := len(user.Asked()); n != 0 {
		t.Errorf("the user was asked %d times after the end", n)
	}
}

// B5: revert to user, then go on with the user's next message, until
// they say exit.
func TestSwarmRevertToUser(t *testing.T) {
	w := newSwarm(t, false)
	w.s2.Add(textStep("Hi."), textStep("Your order shipped."))
	user := human.NewScript("And my order?", "exit")
	res := w.run(Start{Agent: "agent_2", User: user, Vars: Vars{}})
	r := messages(w.s2.Requests()[1])
	want := []msg{{role: "user", name: "User", content: "Hello"}, {role: "assistant", name: "agent_2", content: "Hi."},
		{role: "user", name: "User", content: "And my order?"}}
	if !slices.Equal(r, want) {
		t.Errorf("agent_2's second request %+v", r)
	}
	if res.Status != RunTerminated || res.Last != "agent_2" {
		t.Errorf("Run: %s, last %s", res.Status, res.Last)
	}
	if got := shown(user); !slices.Equal(got, []string{"agent_2: Hi.", "agent_2: Your order shipped."}) {
		t.Errorf("shown %q", got)
	}
}

// B6: a tool's Reply (SwarmResult): it reads the variables, sets two, and
// names the next agent; the version grows by one; the next agent's system
// prompt follows the variables.
func TestSwarmReply(t *testing.T) {
	w := newSwarm(t, true)
	w.s1.Add(calls1("Accounts__verify_passport", `{"number":"P123"}`))
	w.sR.Add(textStep("Your passport P123 is verified."))
	vars := Vars{"logged_in": false, "attempts": 0, "account_level": 1, "budget_remaining": 0, "account_tier": "Silver", "order_count": []any{}}
	res := w.run(Start{Vars: vars})
	if len(w.seen) != 1 || w.seen[0].Attempts != 0 || w.seen[0].LoggedIn {
		t.Fatalf("verify_passport read %+v", w.seen)
	}
	if n := len(w.s1.Requests()); n != 1 {
		t.Errorf("agent_1's model got %d requests", n)
	}
	acc := w.events.of(EventAccepted)
	if len(acc) != 1 || acc[0].To != "CustomerServiceRep" || acc[0].Name != "Accounts__verify_passport" {
		t.Fatalf("accepted %+v", acc)
	}
	if v := w.events.of(EventVars); len(v) != 1 || v[0].Vars["passport_number"] != "P123" || v[0].Conversation != "c1" {
		t.Errorf("the Reply's vars event: %+v", v)
	}
	if h := w.events.of(EventHandoff); len(h) != 1 || h[0].To != "CustomerServiceRep" || h[0].Vars["passport_number"] != "P123" {
		t.Errorf("the handoff event: %+v", h)
	}
	log, _ := Log(w.ctx, w.team.Store(), "User", "c1")
	if len(log) != 1 || float64(log[0].Version) != w.versions[0]+1 {
		t.Errorf("the handoff's version %d; the tool saw %v", log[0].Version, w.versions)
	}
	sys := w.sR.Requests()[0].Messages[0]
	if sys.Role != "system" || !strings.HasPrefix(sys.Content, "You are a customer service representative. Quote passport number 'P123'") {
		t.Errorf("the rep's system message %+v", sys)
	}
	if res.Last != "CustomerServiceRep" || res.Status != RunTerminated || res.Vars["passport_number"] != "P123" || res.Vars["logged_in"] != true {
		t.Errorf("Run: %+v", res)
	}
	// The model read the Reply's value, not the Reply.
	h, _ := Memory(w.team.Store(), "agent_1").Load(w.ctx, openai.ConversationKey("User", "c1"))
	if last := h[len(h)-1]; last.Content != `"verified"` {
		t.Errorf("agent_1 read %q", last.Content)
	}
}

// B7: the conditions are tried before every model call: a tool that sets
// variables without naming a target moves the conversation before the
// model is asked again.
func TestSwarmRecheck(t *testing.T) {
	w := newSwarm(t, true)
	w.s1.Add(calls1("Accounts__upgrade", `{"account_level":5,"budget_remaining":10,"logged_in":true}`))
	w.s2.Add(textStep("Welcome, valued customer."))
	vars := Vars{"logged_in": false, "account_level": 1, "budget_remaining": 0, "account_tier": "Silver", "order_count": []any{}}
	res := w.run(Start{Vars: vars})
	if n := len(w.s1.Requests()); n != 1 {
		t.Errorf("agent_1's model got %d requests", n)
	}
	if res.Last != "agent_2" || len(w.events.of(EventCondition)) != 1 {
		t.Errorf("Run: %+v; conditions %+v", res, w.events.of(EventCondition))
	}
}

// B8: mistakes in conditions are found when the program starts; a
// variable missing at run time makes the rule not fire, and says so.
func TestSwarmConditionErrors(t *testing.T) {
	_, err := NewPolicy("agent_1", []Rule{OnContext(To("agent_2"), "(account_level > 2")})
	if err == nil || !strings.Contains(err.Error(), "(1:18)") {
		t.Errorf("a syntax error: %v", err)
	}
	_, err = NewPolicy("agent_1", []Rule{OnContext(To("agent_2"), "acount_level > 2")}, Env(Account{}))
	if err == nil || !strings.Contains(err.Error(), "unknown name acount_level (1:1)") {
		t.Errorf("a typo: %v", err)
	}
	_, err = NewPolicy("agent_1", []Rule{OnContext(To("agent_2"), "attempts == 'three'")}, Env(Account{}))
	if err == nil || !strings.Contains(err.Error(), "mismatched types int and string) (1:10)") {
		t.Errorf("a type error: %v", err)
	}

	w := newSwarm(t, false)
	w.s1.Add(textStep("Hi."))
	w.s4.Add(textStep("Done."))
	vars := Vars{"logged_in": true, "account_level": 3, "account_tier": "Silver", "order_count": []any{}} // no budget_remaining
	w.run(Start{Vars: vars})
	if n := len(w.s1.Requests()); n != 1 {
		t.Errorf("agent_1's model got %d requests", n)
	}
	ce := w.events.of(EventConditionError)
	if len(ce) == 0 || !strings.Contains(ce[0].Err.Error(), `no variable "budget_remaining"`) || ce[0].Name != agent1Cond {
		t.Errorf("condition errors %+v", ce)
	}
	if c := w.events.of(EventCondition); len(c) != 0 {
		t.Errorf("the rule fired: %+v", c)
	}
}

// B9: a value is data: AG2's injection payload compares as a string.
func TestSwarmValuesAreData(t *testing.T) {
	w := newSwarm(t, false)
	w.s1.Add(textStep("Hi."))
	w.s4.Add(textStep("Done."))
	vars := Vars{"logged_in": true, "account_level": 1, "budget_remaining": 0, "account_tier": "' or true or '", "order_count": []any{}}
	res := w.run(Start{Vars: vars})
	if len(w.events.of(EventCondition)) != 0 || len(w.s1.Requests()) != 1 || res.Last != "agent_4" {
		t.Errorf("the payload routed the conversation: %+v", res)
	}
	c, err := compile("${account_tier} == 'Gold'", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.eval(vars); ok || err != nil {
		t.Errorf("Eval: %v, %v", ok, err)
	}
}

// B10: the system prompt follows the variables within a turn.
func TestSwarmSystemTemplate(t *testing.T) {
	w := newSwarm(t, true)
	w.sR.Add(calls1("Accounts__update_passport", `{"number":"P456"}`), textStep("Updated."))
	w.run(Start{Agent: "CustomerServiceRep", Vars: Vars{"passport_number": "P123"}})
	r := w.sR.Requests()
	if len(r) != 2 {
		t.Fatalf("the rep's model got %d requests", len(r))
	}
	if s := r[0].Messages[0].Content; !strings.Contains(s, "'P123'") {
		t.Errorf("first system message %q", s)
	}
	if s := r[1].Messages[0].Content; !strings.Contains(s, "'P456'") {
		t.Errorf("second system message %q", s)
	}
}

// A tool's Reply that goes to the user (RevertToUser) or ends the
// conversation (Terminate): its value is said to the user, and it ends
// the agent's history as the agent's answer, so that the model reads it
// on the next turn.
func TestSwarmReplyToUser(t *testing.T) {
	for _, tc := range []struct {
		name, call, args, said, status string
	}{
		{"revert to user", "Accounts__hold", "{}", "Please hold the line.", RunAwaitingUser},
		{"terminate", "Accounts__verify_passport", `{"number":"P123"}`, "too many attempts", RunTerminated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSwarm(t, true)
			w.s1.Add(calls1(tc.call, tc.args))
			vars := Vars{"logged_in": false, "attempts": 4, "account_level": 1, "budget_remaining": 0, "account_tier": "Silver", "order_count": []any{}}
			res := w.run(Start{Vars: vars})
			if res.Status != tc.status || res.Last != "agent_1" {
				t.Errorf("Run: %s, last %s; want %s, agent_1", res.Status, res.Last, tc.status)
			}
			h, err := Memory(w.team.Store(), "agent_1").Load(w.ctx, openai.ConversationKey("User", "c1"))
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != 4 {
				t.Fatalf("agent_1's history has %d messages, want the user's, the call, its result and the answer: %+v", len(h), h)
			}
			if last := h[3]; last.Role != openai.RoleAssistant || last.Name != "agent_1" || last.Content != tc.said {
				t.Errorf("agent_1's history ends with %+v, want its answer %q", last, tc.said)
			}
			if got := res.History; len(got) != 4 || got[3].Content != tc.said {
				t.Errorf("Run's history %+v", got)
			}
		})
	}
}
