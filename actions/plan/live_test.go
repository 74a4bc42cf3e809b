package plan_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A step whose agent emits nothing is not stopped when the coordinator
// leaves while it runs, as before steps were sent as streams: its answer
// reaches the coordinator that comes back, which records it.
func TestStepWithoutPartsOutlivesItsCoordinator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	st := store.NewMemory()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	done := make(chan plan.Event, 16)
	newCoord := func() *plan.Coordinator {
		c, err := plan.NewCoordinator(coordID, st, plan.AutoApprove(func(plan.Step) bool { return true }),
			plan.Observe(func(_ context.Context, e plan.Event) {
				if e.Kind == plan.PlanStatusEvent {
					done <- e
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	coord := newCoord()
	planner := agency.MustNewAgent(plannerID, agency.Concurrency(2))
	agency.Handle(planner, "say", func(ctx context.Context, _ openai.SayArgs) (struct{}, error) {
		_, err := agency.AgentFrom(ctx).RequestMessage(ctx, &agency.Message{To: coordID, Action: "submit_plan",
			Meta: map[string]any{"conversation": agency.MessageFrom(ctx).Meta["conversation"]},
			Args: plan.SubmitPlan{Steps: []plan.StepSpec{{Agent: "WriterAgent", Action: "write", Args: json.RawMessage(`{"name":"J"}`)}}, Summary: "s"}})
		return struct{}{}, err
	})
	started, release := make(chan struct{}), make(chan struct{})
	writer := agency.MustNewAgent("WriterAgent")
	var once sync.Once
	agency.Handle(writer, "write", func(ctx context.Context, _ Person) (string, error) {
		once.Do(func() { close(started) })
		<-release
		if err := ctx.Err(); err != nil {
			return "", err // stopped: the step would fail
		}
		return "written", nil
	})
	front := agency.MustNewAgent(humanID)
	for _, a := range []*agency.Agent{coord.Agent(), planner, writer, front} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	type receipt struct {
		PlanID string `json:"plan_id"`
	}
	r, err := agency.Call[receipt](ctx, front, coordID, "input_task", map[string]any{"user_id": "u1", "description": "Write"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the step did not start")
	}
	if err := sp.Remove(ctx, coordID); err != nil {
		t.Fatal(err)
	}
	// The stream of the step has ended with its coordinator (and said
	// whatever it says when it ends).
	for plan.Followed(coord) > 0 {
		if ctx.Err() != nil {
			t.Fatal("the step's stream did not end with its coordinator")
		}
		time.Sleep(5 * time.Millisecond)
	}
	again := newCoord()
	if err := sp.Add(ctx, again.Agent()); err != nil {
		t.Fatal(err)
	}
	close(release)
	select {
	case e := <-done:
		for e.Status == string(plan.InProgress) {
			e = <-done
		}
		if e.Status != string(plan.PlanCompleted) {
			t.Fatalf("the plan is %s: %s", e.Status, e.Detail)
		}
	case <-ctx.Done():
		t.Fatal("the plan did not complete")
	}
	views, err := agency.Call[[]plan.View](ctx, front, coordID, "plans", map[string]any{"user_id": "u1", "plan_id": r.PlanID})
	if err != nil || len(views) != 1 {
		t.Fatal(views, err)
	}
	if s := views[0].Steps[0]; s.Status != plan.Completed || s.AgentReply != "written" || s.Attempts != 1 {
		t.Errorf("the step: %s %q after %d attempts", s.Status, s.AgentReply, s.Attempts)
	}
}
