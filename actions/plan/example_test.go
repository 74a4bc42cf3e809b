package plan_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A rule approves the steps that only read (look_up): they run without
// a person; the step that writes waits for one.
func ExampleAutoApprove() {
	ctx := context.Background()
	st := store.NewMemory()
	readOnly := func(s plan.Step) bool { return s.Action == "look_up" }
	events := make(chan plan.Event, 64)
	coord, err := plan.NewCoordinator("Coordinator", st, plan.Planner("Planner"), plan.Approver("Front"),
		plan.AutoApprove(readOnly),
		plan.Observe(func(_ context.Context, e plan.Event) {
			select {
			case events <- e:
			default:
			}
		}))
	if err != nil {
		fmt.Println(err)
		return
	}

	type employee struct {
		Name string `json:"name" validate:"min=1"`
	}
	hr := agency.MustNewAgent("HR")
	onlyCoordinator := agency.AccessBySender(map[string]agency.Access{"Coordinator": agency.Permitted}, agency.Denied)
	agency.Handle(hr, "look_up", plan.Idempotent(st, func(ctx context.Context, p employee) (string, error) {
		return p.Name + " has no record yet", nil
	}), onlyCoordinator)
	agency.Handle(hr, "create_employee_record", plan.Idempotent(st, func(ctx context.Context, p employee) (string, error) {
		return "Record created for " + p.Name, nil
	}), onlyCoordinator)

	// A planner that submits the same plan for every task; in a program,
	// an LLM agent of actions/openai with plan.PlannerPrompt.
	planner := agency.MustNewAgent("Planner", agency.Concurrency(2))
	agency.Handle(planner, "say", func(ctx context.Context, _ plan.SayArgs) (struct{}, error) {
		steps := []plan.StepSpec{
			{Agent: "HR", Action: "look_up", Args: json.RawMessage(`{"name":"Jessica Smith"}`)},
			{Agent: "HR", Action: "create_employee_record", Args: json.RawMessage(`{"name":"Jessica Smith"}`)},
		}
		_, err := agency.AgentFrom(ctx).RequestMessage(ctx, &agency.Message{To: "Coordinator", Action: "submit_plan",
			Meta: map[string]any{"conversation": agency.MessageFrom(ctx).Meta["conversation"]},
			Args: plan.SubmitPlan{Steps: steps}})
		return struct{}{}, err
	})

	front := agency.MustNewAgent("Front") // speaks for people, as planhttp's gateway does
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range []*agency.Agent{coord.Agent(), hr, planner, front} {
		if err := sp.Add(ctx, a); err != nil {
			fmt.Println(err)
			return
		}
	}
	client := plan.Client{From: front, Coordinator: "Coordinator"}
	show := func(planID string) {
		views, err := client.Plans(ctx, plan.PlanQuery{UserID: "u1", PlanID: planID})
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, s := range views[0].Steps {
			by := "a person"
			if s.AutoApproved {
				by = "the rule"
			}
			if s.Status == plan.AwaitingFeedback {
				by = "nobody yet"
			}
			fmt.Printf("%d %s: %s, approved by %s\n", s.Seq, s.Action, s.Status, by)
		}
	}
	waitFor := func(kind plan.EventKind, status string) string {
		for e := range events {
			if e.Kind == kind && e.Status == status {
				return e.StepID
			}
		}
		return ""
	}

	r, err := client.InputTask(ctx, plan.InputTask{UserID: "u1", Description: "Onboard Jessica Smith"})
	if err != nil {
		fmt.Println(err)
		return
	}
	step2 := waitFor(plan.StepStatusEvent, string(plan.AwaitingFeedback)) // step 1 ran; step 2 waits for a person
	show(r.PlanID)
	if _, err := client.HumanFeedback(ctx, plan.Feedback{UserID: "u1", PlanID: r.PlanID, StepID: step2, Approved: true}); err != nil {
		fmt.Println(err)
		return
	}
	waitFor(plan.PlanStatusEvent, string(plan.PlanCompleted))
	show(r.PlanID)
	// Output:
	// 1 look_up: completed, approved by the rule
	// 2 create_employee_record: awaiting_feedback, approved by nobody yet
	// 1 look_up: completed, approved by the rule
	// 2 create_employee_record: completed, approved by a person
}
