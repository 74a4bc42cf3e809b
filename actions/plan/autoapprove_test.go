package plan_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/agency"
)

// mixedPlan has steps a rule approves (1, 3 and 4) around one that a
// person must approve (2, the orientation date).
const mixedPlan = `{"steps":[` +
	`{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}},` +
	`{"agent":"HrAgent","action":"schedule_orientation","args":{"name":"Jessica Smith","date":"2025-06-02"}},` +
	`{"agent":"HrAgent","action":"assign_buddy","args":{"name":"Jessica Smith"}},` +
	`{"agent":"TechSupportAgent","action":"set_up_laptop","args":{"name":"Jessica Smith"}}],"summary":"Onboarding"}`

// asked records the steps an AutoApprove function was asked about.
type asked struct {
	mu    sync.Mutex
	steps []plan.Step
}

func (a *asked) seqs() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []int
	for _, s := range a.steps {
		out = append(out, s.Seq)
	}
	return out
}

// notOrientation approves every step but schedule_orientation. It
// scribbles on the step it gets, which must change nothing.
func (a *asked) notOrientation(s plan.Step) bool {
	a.mu.Lock()
	a.steps = append(a.steps, s)
	a.mu.Unlock()
	ok := s.Action != "schedule_orientation"
	for i := range s.Args {
		s.Args[i] = 'X'
	}
	s.Status, s.Agent, s.Action, s.AutoApproved = plan.Completed, "Nobody", "nothing", !ok
	return ok
}

// autoEvents returns, per step id, the statuses its step_status events
// reported, with "+auto" after an automatic approval.
func autoEvents(w *world) map[string][]string {
	out := map[string][]string{}
	for _, e := range w.history(func(e plan.Event) bool { return e.Kind == plan.StepStatusEvent }) {
		s := e.Status
		if e.AutoApproved {
			s += "+auto"
			if e.Detail != "approved automatically" {
				w.t.Errorf("the automatic approval of step %s says %q", e.StepID, e.Detail)
			}
		}
		out[e.StepID] = append(out[e.StepID], s)
	}
	return out
}

// checkMixed checks a completed mixed plan: each step ran once, in
// order, with its arguments; steps 1, 3 and 4 approved by the rule with
// no person asked, step 2 by the person; the record, the events and the
// log say which.
func checkMixed(t *testing.T, w *world, a *asked) {
	t.Helper()
	got := w.plan("u1", "s1")
	if got.OverallStatus != "completed" || statuses(got.Steps) != "1 completed, 2 completed, 3 completed, 4 completed" {
		t.Fatalf("plan %s: %s", got.OverallStatus, statuses(got.Steps))
	}
	var order []string
	for _, c := range w.runs.all() {
		order = append(order, c.Action+" "+c.Args)
	}
	want := []string{
		`create_employee_record {"name":"Jessica Smith"}`,
		`schedule_orientation {"name":"Jessica Smith","date":"2025-06-02"}`,
		`assign_buddy {"name":"Jessica Smith"}`,
		`set_up_laptop {"name":"Jessica Smith"}`,
	}
	if !slices.Equal(order, want) {
		t.Fatalf("handlers ran\n%q\nwant each once, in order\n%q", order, want)
	}
	events := autoEvents(w)
	for i, st := range got.Steps {
		if n := w.runs.count(st.Function, st.ID); n != 1 {
			t.Errorf("step %d ran %d times with its id as the key", i+1, n)
		}
		if st.HumanApprovalStatus == nil || *st.HumanApprovalStatus != "accepted" || st.HumanFeedback != nil {
			t.Errorf("step %d: human_approval_status %v, human_feedback %v", i+1, st.HumanApprovalStatus, st.HumanFeedback)
		}
		ev := strings.Join(events[st.ID], " ")
		if i == 1 {
			if st.AutoApproved || ev != "awaiting_feedback approved action_requested completed" {
				t.Errorf("step 2 (the person's): auto_approved %v, events %s", st.AutoApproved, ev)
			}
			continue
		}
		// Never awaiting_feedback: no person was asked.
		if !st.AutoApproved || ev != "approved+auto action_requested completed" {
			t.Errorf("step %d (the rule's): auto_approved %v, events %s", i+1, st.AutoApproved, ev)
		}
	}
	var msgs []apiMessage
	w.must("GET", "/agent_messages/s1", "u1", nil, &msgs)
	var auto []string
	for _, m := range msgs {
		if m.Source == coordID && strings.Contains(m.Content, "approved automatically") {
			if m.StepID == nil {
				t.Errorf("the log entry %q names no step", m.Content)
				continue
			}
			auto = append(auto, *m.StepID)
		}
	}
	if want := []string{got.Steps[0].ID, got.Steps[2].ID, got.Steps[3].ID}; !slices.Equal(auto, want) {
		t.Errorf("the log says steps %v were approved automatically, want %v", auto, want)
	}
	// The rule was asked once per step, at its turn, about the stored
	// step: its scribbles changed nothing.
	if s := a.seqs(); !slices.Equal(s, []int{1, 2, 3, 4}) {
		t.Errorf("the rule was asked about steps %v, want 1 2 3 4", s)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.steps {
		if i < len(got.Steps) && (s.ID != got.Steps[i].ID || s.Agent != got.Steps[i].Agent || s.Status != plan.Planned || s.AutoApproved) {
			t.Errorf("the rule was asked about %+v, want step %d as planned", s, i+1)
		}
	}
}

// A rule approves steps 1, 3 and 4: they run without a person; step 2
// waits for one, as without the rule.
func TestAutoApprove(t *testing.T) {
	a := &asked{}
	w := newWorld(t, []plan.Option{plan.AutoApprove(a.notOrientation)}, []planhttp.Option{planhttp.WaitFor(waitTimeout)},
		toolCall(mixedPlan), openaitest.Step{Text: "Plan submitted."})
	w.must("POST", "/input_task", "u1", map[string]any{"session_id": "s1", "description": "Onboard new employee Jessica Smith"}, nil)
	e := w.waitEvent("a step awaits a person", func(e plan.Event) bool {
		return e.Kind == plan.StepStatusEvent && e.Status == string(plan.AwaitingFeedback)
	})
	p := w.plan("u1", "s1")
	if s := statuses(p.Steps); s != "1 completed, 2 awaiting_feedback, 3 planned, 4 planned" || e.StepID != p.Steps[1].ID {
		t.Fatalf("before any person acted: %s (step %s awaits feedback)", s, e.StepID)
	}
	if st := p.Steps[0]; !st.AutoApproved || st.AgentReply == nil || *st.AgentReply != "Employee record created for Jessica Smith" {
		t.Errorf("step 1: auto_approved %v, agent_reply %v", st.AutoApproved, st.AgentReply)
	}
	if st := p.Steps[1]; st.AutoApproved || st.HumanApprovalStatus == nil || *st.HumanApprovalStatus != "requested" {
		t.Errorf("step 2: auto_approved %v, human_approval_status %v", st.AutoApproved, st.HumanApprovalStatus)
	}
	// The step the rule does not approve waits: nothing after it ran.
	if n := len(w.runs.all()); n != 1 {
		t.Fatalf("%d handlers ran while step 2 waits for a person", n)
	}
	w.must("POST", "/human_feedback", "u1", map[string]any{"step_id": p.Steps[1].ID, "plan_id": p.ID, "session_id": "s1", "approved": true}, nil)
	w.waitEvent("plan completed", planIs(plan.PlanCompleted))
	checkMixed(t, w, a)
}

// A restart in the middle of a mixed plan, at every point that matters:
// while a person's step waits; after the change that approved a rule's
// step and queued it was committed, before it was sent; after a rule's
// step's handler ran, before its answer was recorded. No person is asked
// about the rule's steps, and no step runs twice. On SQLite, and on
// PostgreSQL (pgtest's database).
func TestAutoApproveRestart(t *testing.T) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) { testAutoApproveRestart(t, nil) })
	t.Run("PostgreSQL", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		testAutoApproveRestart(t, func() (store.Store, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return pgstore.Open(ctx, dsn)
		})
	})
}

func testAutoApproveRestart(t *testing.T, open func() (store.Store, error)) {
	a := &asked{}
	w := newWorldOn(t, open, []plan.Option{plan.AutoApprove(a.notOrientation), plan.Lease(time.Second)},
		[]planhttp.Option{planhttp.WaitFor(waitTimeout)}, toolCall(mixedPlan), openaitest.Step{Text: "Plan submitted."})
	w.must("POST", "/input_task", "u1", map[string]any{"session_id": "s1", "description": "Onboard new employee Jessica Smith"}, nil)
	w.waitEvent("a step awaits a person", func(e plan.Event) bool {
		return e.Kind == plan.StepStatusEvent && e.Status == string(plan.AwaitingFeedback)
	})
	w.waitSeen("the planner's answer", said)

	// 1. The process restarts while step 2 waits for a person: it still
	// waits, and step 1 does not run again.
	w.rebuild()
	p := w.plan("u1", "s1")
	if s := statuses(p.Steps); s != "1 completed, 2 awaiting_feedback, 3 planned, 4 planned" {
		t.Fatalf("after the first restart: %s", s)
	}
	s3, s4 := p.Steps[2].ID, p.Steps[3].ID

	// 2. The person approves step 2; it runs, and the change that records
	// its answer approves step 3 by the rule and queues it. The process
	// dies right after that commit, before step 3 is sent.
	plan.AfterCommit(w.coord, func(events []plan.Event) {
		for _, e := range events {
			if e.Kind == plan.StepDispatched && e.StepID == s3 {
				plan.Halt(w.current())
			}
		}
	})
	w.must("POST", "/human_feedback", "u1", map[string]any{"step_id": p.Steps[1].ID, "plan_id": p.ID, "session_id": "s1", "approved": true}, nil)
	w.waitEvent("step 3 approved by the rule", func(e plan.Event) bool {
		return e.Kind == plan.StepDispatched && e.StepID == s3
	})
	if n := w.runs.count("assign_buddy", s3); n != 0 {
		t.Fatalf("step 3 ran %d times before the restart", n)
	}

	// 3. After the restart step 3 is sent without a person; step 4 is
	// approved by the rule and sent; the process dies after its handler
	// ran, before its answer is recorded.
	w.runs.mu.Lock()
	w.runs.after = func(action, key string) {
		if key == s4 {
			plan.Halt(w.current())
		}
	}
	w.runs.mu.Unlock()
	w.rebuild()
	w.waitEvent("step 3 completed after the restart", stepIs(s3, plan.Completed))
	deadline := time.Now().Add(waitTimeout)
	for w.runs.count("set_up_laptop", s4) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("step 4 never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var again sync.WaitGroup
	again.Add(1)
	var once sync.Once
	w.runs.mu.Lock()
	w.runs.after = func(action, key string) {
		if key == s4 {
			once.Do(again.Done)
		}
	}
	w.runs.mu.Unlock()

	// 4. After the last restart step 4 is delivered again with the same
	// key (by the relay, when its message was not marked sent, or by the
	// sweeper once its lease runs out), Idempotent answers from its
	// record, and the plan completes.
	w.rebuild()
	w.waitEvent("plan completed", planIs(plan.PlanCompleted))
	again.Wait()
	checkMixed(t, w, a)
}

// waitSeen waits until an event that match accepts has come, whether or
// not waitEvent went past it.
func (w *world) waitSeen(what string, match func(plan.Event) bool) {
	w.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for len(w.history(match)) == 0 {
		if time.Now().After(deadline) {
			w.t.Fatalf("no event: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a log's destination that the coordinator's goroutines
// and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A rule that panics approves nothing: the step waits for a person, the
// panic is logged with the step's id and reported in the event, and the
// coordinator goes on.
func TestAutoApprovePanic(t *testing.T) {
	var logs syncBuffer
	rule := func(s plan.Step) bool {
		if s.Action == "schedule_orientation" {
			panic("no calendar for " + s.Agent)
		}
		return true
	}
	plan2 := `{"steps":[` +
		`{"agent":"HrAgent","action":"schedule_orientation","args":{"name":"Jessica Smith","date":"2025-06-02"}},` +
		`{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}}]}`
	w := newWorld(t, []plan.Option{plan.AutoApprove(rule), plan.Logger(slog.New(slog.NewTextHandler(&logs, nil)))},
		[]planhttp.Option{planhttp.WaitFor(waitTimeout)}, toolCall(plan2), openaitest.Step{Text: "Plan submitted."})
	w.must("POST", "/input_task", "u1", map[string]any{"session_id": "s1", "description": "Onboard new employee Jessica Smith"}, nil)
	e := w.waitEvent("step 1 awaits a person", func(e plan.Event) bool {
		return e.Kind == plan.StepStatusEvent && e.Status == string(plan.AwaitingFeedback)
	})
	if e.AutoApproved || !strings.Contains(e.Detail, "AutoApprove function panicked (no calendar for HrAgent)") {
		t.Errorf("the event of step 1's awaiting_feedback: %+v", e)
	}
	p := w.plan("u1", "s1")
	if s := statuses(p.Steps); s != "1 awaiting_feedback, 2 planned" || p.Steps[0].ID != e.StepID {
		t.Fatalf("steps: %s", s)
	}
	log := logs.String()
	for _, want := range []string{"level=ERROR", "AutoApprove function panicked", "step_id=" + e.StepID, "no calendar for HrAgent", "plan_id=" + p.ID} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if n := len(w.runs.all()); n != 0 {
		t.Fatalf("%d handlers ran before the person approved", n)
	}
	// The person approves step 1; step 2 is the rule's again.
	w.must("POST", "/human_feedback", "u1", map[string]any{"step_id": p.Steps[0].ID, "plan_id": p.ID, "session_id": "s1", "approved": true}, nil)
	w.waitEvent("plan completed", planIs(plan.PlanCompleted))
	got := w.plan("u1", "s1")
	if got.Steps[0].AutoApproved || !got.Steps[1].AutoApproved || statuses(got.Steps) != "1 completed, 2 completed" {
		t.Errorf("steps %s, auto_approved %v %v", statuses(got.Steps), got.Steps[0].AutoApproved, got.Steps[1].AutoApproved)
	}
}

// AutoApprove with a nil function, or given twice, is an error of
// NewCoordinator.
func TestAutoApproveOption(t *testing.T) {
	st := store.NewMemory()
	yes := func(plan.Step) bool { return true }
	for _, c := range []struct {
		name string
		opts []plan.Option
		want string
	}{
		{"nil", []plan.Option{plan.AutoApprove(nil)}, "plan.AutoApprove: nil function"},
		{"twice", []plan.Option{plan.AutoApprove(yes), plan.AutoApprove(yes)}, "plan.AutoApprove given twice"},
	} {
		_, err := plan.NewCoordinator(coordID, st, c.opts...)
		if !errors.Is(err, agency.ErrInvalidOption) || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want agency.ErrInvalidOption saying %q", c.name, err, c.want)
		}
	}
	if _, err := plan.NewCoordinator(coordID, st, plan.AutoApprove(yes)); err != nil {
		t.Errorf("a function: %v", err)
	}
}
