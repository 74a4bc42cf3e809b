package otelagency_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A traced plan: the step the coordinator's outbox sends once the person
// approves runs in the trace of the approval, and the plan's events are
// span events.
func TestTracedPlanStep(t *testing.T) {
	in, tracer, exp, _ := instrumented(t)
	hooks := agency.Hooks(in)
	st := store.NewMemory()
	done := make(chan struct{}, 1)
	coord, err := plan.NewCoordinator("Coordinator", st, plan.Planner("Planner"), plan.Approver("Front"),
		plan.AgentOptions(hooks), plan.Observe(func(_ context.Context, e plan.Event) {
			if e.Kind == plan.PlanStatusEvent && e.Status == string(plan.PlanCompleted) {
				done <- struct{}{}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	hr := agency.MustNewAgent("HR", hooks)
	agency.Handle(hr, "create_record", func(context.Context, struct {
		Name string `json:"name"`
	}) (string, error) {
		return "created", nil
	})
	planner := agency.MustNewAgent("Planner", hooks, agency.Concurrency(2))
	agency.Handle(planner, "say", func(ctx context.Context, _ openai.SayArgs) (struct{}, error) {
		_, err := agency.AgentFrom(ctx).RequestMessage(ctx, &agency.Message{To: "Coordinator", Action: "submit_plan",
			Meta: map[string]any{"conversation": agency.MessageFrom(ctx).Meta["conversation"]},
			Args: plan.SubmitPlan{Steps: []plan.StepSpec{{Agent: "HR", Action: "create_record", Args: json.RawMessage(`{"name":"J"}`)}}, Summary: "s"}})
		return struct{}{}, err
	})
	front := agency.MustNewAgent("Front", hooks)
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range []*agency.Agent{coord.Agent(), hr, planner, front} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	type receipt struct {
		PlanID string `json:"plan_id"`
	}
	r, err := agency.Call[receipt](ctx, front, "Coordinator", "input_task",
		map[string]any{"user_id": "u1", "description": "Onboard J", "wait_seconds": 10})
	if err != nil {
		t.Fatal(err)
	}
	actx, approval := tracer.Start(ctx, "approval")
	if _, err := agency.Call[receipt](actx, front, "Coordinator", "approve_step_or_steps",
		map[string]any{"user_id": "u1", "plan_id": r.PlanID, "approved": true}); err != nil {
		t.Fatal(err)
	}
	approval.End()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the plan did not complete")
	}
	spans := waitSpans(t, exp, "process HR.create_record", "process Coordinator.approve_step_or_steps")
	var stepEvent bool
	for _, s := range spans.Snapshots() {
		if s.Name() == "process HR.create_record" && s.SpanContext().TraceID() != approval.SpanContext().TraceID() {
			t.Error("the step did not run in the approval's trace")
		}
		for _, e := range s.Events() {
			if e.Name == "plan.step_status" && s.SpanContext().TraceID() == approval.SpanContext().TraceID() {
				stepEvent = true
			}
		}
	}
	if !stepEvent {
		t.Error("no span of the approval's trace has a plan.step_status event")
	}
}
