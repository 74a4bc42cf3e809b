package plan_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/internal/front"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/agency"
)

const (
	firstPlan = `{"steps":[` +
		`{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}},` +
		`{"agent":"HrAgent","action":"schedule_orientation","args":{"name":"Jessica Smith","date":"2025-06-02"}},` +
		`{"agent":"TechSupportAgent","action":"set_up_laptop","args":{"name":"Jessica Smith"}}],"summary":"Onboarding"}`
	revisedPlan = `{"replace_from":2,"steps":[` +
		`{"agent":"HrAgent","action":"schedule_orientation","args":{"name":"Jessica Smith","date":"2025-06-09"}},` +
		`{"agent":"HrAgent","action":"assign_buddy","args":{"name":"Jessica Smith"}},` +
		`{"agent":"TechSupportAgent","action":"set_up_laptop","args":{"name":"Jessica Smith"}}]}`
	feedback = "Orientation must be on 2025-06-09, and assign a buddy"
)

// scenarioScript is the planner's part of scenario D: the plan, and the
// revised plan after the rejection of step 2.
func scenarioScript() []openaitest.Step {
	return []openaitest.Step{
		toolCall(firstPlan), {Text: "Plan submitted."},
		toolCall(revisedPlan), {Text: "Revised."},
	}
}

// start runs D1: the task, the plan, step 1 awaiting feedback.
func start(t *testing.T, w *world) apiPlan {
	var got map[string]any
	w.must("POST", "/input_task", "u1", map[string]any{"session_id": "s1", "description": "Onboard new employee Jessica Smith"}, &got)
	if got["session_id"] != "s1" || got["description"] != "Onboard new employee Jessica Smith" || got["status"] == nil {
		t.Fatalf("input_task answered %v", got)
	}
	id, _ := got["plan_id"].(string)
	w.waitEvent("plan submitted", submitted)
	w.waitEvent("the planner's answer", said)
	p := w.plan("u1", "s1")
	if p.ID != id || p.OverallStatus != "in_progress" {
		t.Fatalf("plan %s (want %s) is %s", p.ID, id, p.OverallStatus)
	}
	if s := statuses(p.Steps); s != "1 awaiting_feedback, 2 planned, 3 planned" {
		t.Fatalf("steps: %s", s)
	}
	// The planner was asked in the plan's conversation, with the task
	// and the team's actions, and its submit_plan was accepted.
	reqs := w.pl.Requests()
	ask := reqs[0].Messages[len(reqs[0].Messages)-1].Content
	for _, want := range []string{id, "Onboard new employee Jessica Smith", "create_employee_record", "set_up_laptop"} {
		if !strings.Contains(ask, want) {
			t.Errorf("the planner's request lacks %q:\n%s", want, ask)
		}
	}
	if _, ok := reqs[0].Tool(submit); !ok {
		t.Errorf("the planner is not offered %s", submit)
	}
	if _, ok := reqs[0].Tool("HrAgent__create_employee_record"); ok {
		t.Errorf("the planner is offered the specialists' actions")
	}
	result := reqs[1].Messages[len(reqs[1].Messages)-1]
	if result.Role != "tool" || result.Content != `{"accepted":true,"steps":3}` {
		t.Errorf("submit_plan's result: %+v", result)
	}
	return p
}

// reject runs D3: step 2 rejected with feedback, the revised plan.
func reject(t *testing.T, w *world, p apiPlan) {
	s2 := p.Steps[1].ID
	w.must("POST", "/human_feedback", "u1", map[string]any{"step_id": s2, "plan_id": p.ID, "session_id": "s1",
		"approved": false, "human_feedback": feedback}, nil)
	w.waitEvent("revised plan", submitted)
	w.waitEvent("the planner's answer", said)
	var steps []apiStep
	w.must("GET", "/steps/"+p.ID, "u1", nil, &steps)
	if s := statuses(steps); s != "1 completed, 2 rejected, 3 superseded, 4 awaiting_feedback, 5 planned, 6 planned" {
		t.Fatalf("steps after the replan: %s", s)
	}
	if steps[1].HumanFeedback == nil || *steps[1].HumanFeedback != feedback {
		t.Errorf("step 2 keeps the feedback %v", steps[1].HumanFeedback)
	}
	if string(steps[3].Args) != `{"name":"Jessica Smith","date":"2025-06-09"}` {
		t.Errorf("step 4 args %s", steps[3].Args)
	}
	if got := w.plan("u1", "s1"); got.ReplanCount != 1 {
		t.Errorf("replan_count %d, want 1", got.ReplanCount)
	}
	// The planner's request carries the plan, the rejected step and the
	// feedback.
	reqs := w.pl.Requests()
	ask := reqs[2].Messages[len(reqs[2].Messages)-1].Content
	for _, want := range []string{feedback, "step 2", "replace_from 2", "[completed] HrAgent.create_employee_record", "[rejected] HrAgent.schedule_orientation"} {
		if !strings.Contains(ask, want) {
			t.Errorf("the replan request lacks %q:\n%s", want, ask)
		}
	}
}

// finish runs D4: every step approved at once, run in order, each once.
func finish(t *testing.T, w *world, p apiPlan) {
	w.must("POST", "/approve_step_or_steps", "u1", map[string]any{"plan_id": p.ID, "session_id": "s1", "approved": true}, nil)
	w.waitEvent("plan completed", planIs(plan.PlanCompleted))
	got := w.plan("u1", "s1")
	if got.OverallStatus != "completed" || got.TotalSteps != 4 || got.Completed != 4 {
		t.Fatalf("plan %s, %d of %d steps: %s", got.OverallStatus, got.Completed, got.TotalSteps, statuses(got.Steps))
	}
	var order []string
	for _, c := range w.runs.all() {
		order = append(order, c.Action)
	}
	want := []string{"create_employee_record", "schedule_orientation", "assign_buddy", "set_up_laptop"}
	if !slices.Equal(order, want) {
		t.Fatalf("handlers ran %v, want each once in order %v", order, want)
	}
	for i, st := range got.Steps {
		if st.Status == "completed" && w.runs.count(st.Function, st.ID) != 1 {
			t.Errorf("step %d (%s) ran %d times with its id as the key", i+1, st.Function, w.runs.count(st.Function, st.ID))
		}
	}
	if c := w.runs.all()[1]; c.Args != `{"name":"Jessica Smith","date":"2025-06-09"}` {
		t.Errorf("schedule_orientation ran with %s", c.Args)
	}
	var msgs []apiMessage
	w.must("GET", "/agent_messages/s1", "u1", nil, &msgs)
	var seq []string
	for _, m := range msgs {
		switch {
		case m.Source == plannerID:
			seq = append(seq, "planner")
		case m.Source == humanID && m.Content == feedback:
			if m.StepID == nil || *m.StepID != got.Steps[1].ID {
				t.Errorf("the feedback's message names step %v, want %s", m.StepID, got.Steps[1].ID)
			}
			seq = append(seq, "feedback")
		case m.Source == "HrAgent" || m.Source == "TechSupportAgent":
			seq = append(seq, m.Content)
		}
	}
	want = []string{"planner", "planner", "Employee record created for Jessica Smith", "feedback", "planner", "planner",
		"Orientation for Jessica Smith on 2025-06-09", "Buddy assigned to Jessica Smith", "Laptop ready for Jessica Smith"}
	if !slices.Equal(seq, want) {
		t.Errorf("agent messages:\n%q\nwant\n%q", seq, want)
	}
	if w.pl.Left() != 0 {
		t.Errorf("%d planner steps unused", w.pl.Left())
	}
}

// Scenario D: plan, approve step 1, restart after the approval was
// committed and before it was sent, reject step 2 with feedback, replan,
// approve the rest; every handler runs once.
func TestScenarioD(t *testing.T) {
	w := newWorld(t, nil, []planhttp.Option{planhttp.WaitFor(waitTimeout)}, scenarioScript()...)
	p := start(t, w)
	s1 := p.Steps[0].ID

	// D2: the approval is committed; the process dies before the
	// dispatch is sent.
	plan.AfterCommit(w.coord, func(events []plan.Event) {
		for _, e := range events {
			if e.Kind == plan.StepDispatched && e.StepID == s1 {
				plan.Halt(w.coord)
			}
		}
	})
	w.must("POST", "/human_feedback", "u1", map[string]any{"step_id": s1, "plan_id": p.ID, "session_id": "s1", "approved": true}, nil)
	if n := len(w.runs.all()); n != 0 {
		t.Fatalf("%d handlers ran before the restart", n)
	}
	w.rebuild()
	w.waitEvent("step 1 completed after the restart", stepIs(s1, plan.Completed))
	got := w.plan("u1", "s1")
	if s := statuses(got.Steps); s != "1 completed, 2 awaiting_feedback, 3 planned" {
		t.Fatalf("steps after the restart: %s", s)
	}
	if r := got.Steps[0].AgentReply; r == nil || *r != "Employee record created for Jessica Smith" {
		t.Errorf("step 1 agent_reply %v", r)
	}
	if c := w.runs.all(); len(c) != 1 || c[0] != (call{"create_employee_record", `{"name":"Jessica Smith"}`, s1}) {
		t.Fatalf("after the restart the handlers ran %+v", c)
	}

	// D2, variant: the coordinator alone leaves the space: 503 with
	// Retry-After, and the plan goes on once it is back.
	if err := w.sp.Remove(t.Context(), coordID); err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	code, h := w.do("POST", "/human_feedback", "u1", map[string]any{"step_id": got.Steps[1].ID, "plan_id": p.ID, "session_id": "s1", "approved": true}, &e)
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || e["detail"] == nil {
		t.Fatalf("without the coordinator: %d %v Retry-After %q", code, e, h.Get("Retry-After"))
	}
	if err := w.sp.Add(t.Context(), w.coord.Agent()); err != nil {
		t.Fatal(err)
	}

	reject(t, w, got)
	finish(t, w, got)
}

// Scenario D, step 5: the process dies after a handler returned and before
// the step's completion was written; after the restart the step is sent
// again with the same key, the wrapper answers from its record, and the
// handler does not run again.
func TestScenarioDCrashAfterHandler(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []plan.Option{plan.Lease(time.Second)}, []planhttp.Option{planhttp.WaitFor(waitTimeout)}, scenarioScript()...)
	p := start(t, w)
	w.must("POST", "/approve_step_or_steps", "u1", map[string]any{"step_id": p.Steps[0].ID, "plan_id": p.ID, "session_id": "s1", "approved": true}, nil)
	reject(t, w, w.plan("u1", "s1"))
	p = w.plan("u1", "s1")
	s4 := p.Steps[3].ID

	w.runs.mu.Lock()
	w.runs.after = func(action, key string) {
		if key == s4 {
			plan.Halt(w.coord) // the answer is never recorded
		}
	}
	w.runs.mu.Unlock()
	w.must("POST", "/approve_step_or_steps", "u1", map[string]any{"plan_id": p.ID, "session_id": "s1", "approved": true}, nil)
	if n := w.runs.count("schedule_orientation", s4); n != 1 {
		t.Fatalf("step 4 ran %d times before the restart", n)
	}
	// After the restart step 4 is delivered again with the same key: by
	// the sweeper once its lease runs out ("attempt 2"), or by the relay
	// when the crash came before its message was marked sent. Either way
	// Idempotent answers from its record and the plan completes.
	var again atomic.Int32
	w.runs.mu.Lock()
	w.runs.after = func(action, key string) {
		if key == s4 {
			again.Add(1)
		}
	}
	w.runs.mu.Unlock()
	w.rebuild()
	finishAfterCrash(t, w, p, s4)
	if again.Load() == 0 {
		t.Error("step 4 was not delivered again after the restart")
	}
}

func finishAfterCrash(t *testing.T, w *world, p apiPlan, s4 string) {
	w.waitEvent("plan completed", planIs(plan.PlanCompleted))
	got := w.plan("u1", "s1")
	if s := statuses(got.Steps); s != "1 completed, 2 rejected, 3 superseded, 4 completed, 5 completed, 6 completed" {
		t.Fatalf("steps: %s", s)
	}
	if n := w.runs.count("schedule_orientation", s4); n != 1 {
		t.Errorf("step 4's handler ran %d times", n)
	}
	if len(w.runs.all()) != 4 {
		t.Errorf("handlers ran %+v", w.runs.all())
	}
	if r := got.Steps[3].AgentReply; r == nil || *r != "Orientation for Jessica Smith on 2025-06-09" {
		t.Errorf("step 4 agent_reply %v", r)
	}
}

// Scenario D, step 6: the planner asks a question first.
func TestScenarioDClarification(t *testing.T) {
	question := "What is Jessica's start date?"
	w := newWorld(t, nil, nil,
		toolCall(`{"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}}],"clarification_request":"`+question+`"}`),
		openaitest.Step{Text: "I asked for the start date."},
		openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
			if !strings.Contains(r.Messages[len(r.Messages)-1].Content, "2025-06-02") {
				t.Errorf("the planner's request lacks the answer: %s", r.Messages[len(r.Messages)-1].Content)
			}
			return toolCall(`{"steps":[{"agent":"HrAgent","action":"schedule_orientation","args":{"name":"Jessica Smith","date":"2025-06-02"}}]}`)
		}},
		openaitest.Step{Text: "Done."},
	)
	var got map[string]any
	w.must("POST", "/input_task", "u1", map[string]any{"session_id": "s1", "description": "Onboard Jessica Smith"}, &got)
	w.waitEvent("question", func(e plan.Event) bool { return e.Kind == plan.ClarificationAsk })
	w.waitEvent("the planner's answer", said)
	p := w.plan("u1", "s1")
	if p.Status != "awaiting_clarification" || p.OverallStatus != "in_progress" || p.HumanClarificationRequest == nil ||
		*p.HumanClarificationRequest != question || p.HumanClarificationResponse != nil {
		t.Fatalf("plan: %+v", p)
	}
	if s := statuses(p.Steps); s != "1 planned" {
		t.Fatalf("steps: %s", s)
	}
	// Approving now is a conflict: the plan waits for the answer.
	code, _ := w.do("POST", "/approve_step_or_steps", "u1", map[string]any{"plan_id": p.ID, "session_id": "s1", "approved": true}, nil)
	if code != http.StatusConflict {
		t.Errorf("approval during a clarification: %d, want 409", code)
	}
	// MACAE's page sends the session id as plan_id.
	w.must("POST", "/human_clarification_on_plan", "u1", map[string]any{"plan_id": "s1", "session_id": "s1", "human_clarification": "2025-06-02"}, nil)
	w.waitEvent("plan submitted again", submitted)
	p = w.plan("u1", "s1")
	if s := statuses(p.Steps); s != "1 superseded, 2 awaiting_feedback" {
		t.Fatalf("steps after the answer: %s", s)
	}
	if p.Status != "in_progress" || p.HumanClarificationResponse == nil || *p.HumanClarificationResponse != "2025-06-02" {
		t.Fatalf("plan after the answer: %+v", p)
	}
}

// Scenario D, step 7: other users, other agents, and the replan budget.
func TestScenarioDAuthorization(t *testing.T) {
	var script []openaitest.Step
	script = append(script, toolCall(firstPlan), openaitest.Step{Text: "ok"})
	for i := 0; i < 3; i++ {
		script = append(script, toolCall(`{"replace_from":1,"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}}]}`), openaitest.Step{Text: "ok"})
	}
	w := newWorld(t, []plan.Option{plan.MaxReplans(3)}, nil, script...)
	p := start(t, w)

	// Another user sees none of it.
	for _, r := range []struct{ method, path string }{
		{"GET", "/plans?session_id=s1"}, {"GET", "/steps/" + p.ID}, {"GET", "/agent_messages/s1"},
	} {
		var e map[string]any
		if code, _ := w.do(r.method, r.path, "u2", nil, &e); code != http.StatusNotFound || e["detail"] == nil {
			t.Errorf("u2 %s %s: %d %v", r.method, r.path, code, e)
		}
	}
	for _, r := range []struct {
		path string
		body map[string]any
	}{
		{"/human_feedback", map[string]any{"step_id": p.Steps[0].ID, "plan_id": p.ID, "session_id": "s1", "approved": true}},
		{"/approve_step_or_steps", map[string]any{"plan_id": p.ID, "session_id": "s1", "approved": true}},
		{"/human_clarification_on_plan", map[string]any{"plan_id": p.ID, "session_id": "s1", "human_clarification": "x"}},
	} {
		var e map[string]any
		if code, _ := w.do("POST", r.path, "u2", r.body, &e); code != http.StatusNotFound || e["detail"] != "Plan not found" {
			t.Errorf("u2 POST %s: %d %v", r.path, code, e)
		}
	}
	var all []apiPlan
	w.must("GET", "/plans", "u2", nil, &all)
	if len(all) != 0 {
		t.Errorf("u2 sees %d plans", len(all))
	}

	// Only the approvers may give feedback, only the planner submit.
	ctx := t.Context()
	intruder := agency.MustNewAgent("Intruder")
	if err := w.sp.Add(ctx, intruder); err != nil {
		t.Fatal(err)
	}
	_, err := intruder.Request(ctx, coordID, "human_feedback", front.Feedback{UserID: "u1", PlanID: p.ID, StepID: p.Steps[0].ID, Approved: true})
	if !isDenied(err) {
		t.Errorf("human_feedback from another agent: %v", err)
	}
	m := &agency.Message{To: coordID, Action: "submit_plan", Meta: map[string]any{"conversation": p.ID},
		Args: json.RawMessage(firstPlan)}
	if _, err := intruder.RequestMessage(ctx, m); !isDenied(err) {
		t.Errorf("submit_plan from another agent: %v", err)
	}
	if _, err := w.gw.RequestMessage(ctx, &agency.Message{To: coordID, Action: "submit_plan", Meta: map[string]any{"conversation": p.ID},
		Args: json.RawMessage(firstPlan)}); !isDenied(err) {
		t.Errorf("submit_plan from the approver: %v", err)
	}

	// Three rejections are replanned; the fourth fails the plan.
	for i := 0; i < 4; i++ {
		cur := w.plan("u1", "s1")
		var open *apiStep
		for j := range cur.Steps {
			if cur.Steps[j].Status == "awaiting_feedback" {
				open = &cur.Steps[j]
			}
		}
		if open == nil {
			t.Fatalf("rejection %d: no step awaits feedback: %s", i+1, statuses(cur.Steps))
		}
		w.must("POST", "/human_feedback", "u1", map[string]any{"step_id": open.ID, "plan_id": p.ID, "session_id": "s1",
			"approved": false, "human_feedback": "no"}, nil)
		if i < 3 {
			w.waitEvent("replanned", submitted)
			w.waitEvent("the planner's answer", said)
		}
	}
	w.waitEvent("plan failed", planIs(plan.PlanFailed))
	got := w.plan("u1", "s1")
	if got.OverallStatus != "failed" || got.Reason == nil || !strings.Contains(*got.Reason, "revised 3 times") {
		t.Fatalf("plan %s, reason %v", got.OverallStatus, got.Reason)
	}
	if len(w.runs.all()) != 0 {
		t.Errorf("handlers ran: %+v", w.runs.all())
	}
}

func isDenied(err error) bool {
	ae, ok := err.(*agency.ActionError)
	return ok && ae.Type == agency.TypePermissionDenied
}

// A planner that never answers a request (its process died during the
// turn) is asked again once the lease runs out; the plan goes on from its
// answer to the second request.
func TestPlannerAskedAgain(t *testing.T) {
	w := newWorld(t, []plan.Option{plan.Lease(300 * time.Millisecond)}, nil)
	if err := w.sp.Remove(t.Context(), plannerID); err != nil {
		t.Fatal(err)
	}
	// A planner that drops the first request and plans on the second.
	asked := make(chan string, 4)
	fake := agency.MustNewAgent(plannerID, agency.Concurrency(4))
	agency.Handle(fake, "say", func(ctx context.Context, args openai.SayArgs) (string, error) {
		m := agency.MessageFrom(ctx)
		asked <- m.ID
		if len(asked) == 1 {
			return "", nil // lost: no plan, no answer
		}
		sub := &agency.Message{To: coordID, Action: "submit_plan", Meta: map[string]any{"conversation": m.Meta["conversation"]},
			Args: json.RawMessage(firstPlan)}
		_, err := agency.AgentFrom(ctx).RequestMessage(ctx, sub)
		return "", err
	})
	if err := w.sp.Add(t.Context(), fake); err != nil {
		t.Fatal(err)
	}
	w.must("POST", "/input_task", "u1", map[string]any{"session_id": "s1", "description": "Onboard new employee Jessica Smith"}, nil)
	w.waitEvent("asked again", func(e plan.Event) bool { return e.Kind == plan.PlannerAsked && e.Detail == "asked again" })
	w.waitEvent("plan submitted", submitted)
	if s := statuses(w.plan("u1", "s1").Steps); s != "1 awaiting_feedback, 2 planned, 3 planned" {
		t.Fatalf("steps: %s", s)
	}
	if first, second := <-asked, <-asked; first == second {
		t.Errorf("the second request has the first one's id %s", first)
	}
}
