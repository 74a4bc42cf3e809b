package plan_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

type employee struct {
	Name string `json:"name" validate:"min=1"`
}

// scriptedPlanner stands for the planner: it submits the same steps for
// every task. In a program it is an LLM agent of actions/openai with
// plan.PlannerPrompt as its system prompt.
func scriptedPlanner(id, coordinator string, steps ...plan.StepSpec) *agency.Agent {
	planner := agency.MustNewAgent(id, agency.Concurrency(2))
	agency.Handle(planner, "say", func(ctx context.Context, _ openai.SayArgs) (struct{}, error) {
		_, err := agency.AgentFrom(ctx).RequestMessage(ctx, &agency.Message{To: coordinator, Action: "submit_plan",
			Meta: map[string]any{"conversation": agency.MessageFrom(ctx).Meta["conversation"]},
			Args: plan.SubmitPlan{Steps: steps, Summary: "The same steps as ever."}})
		return struct{}{}, err
	})
	return planner
}

// events returns an Observe option and the channel it fills.
func events() (plan.Option, chan plan.Event) {
	ch := make(chan plan.Event, 64)
	return plan.Observe(func(_ context.Context, e plan.Event) {
		select {
		case ch <- e:
		default:
		}
	}), ch
}

// waitFor reads events until one of kind with status comes, and returns
// its step id.
func waitFor(events chan plan.Event, kind plan.EventKind, status string) string {
	for e := range events {
		if e.Kind == kind && e.Status == status {
			return e.StepID
		}
	}
	return ""
}

// A person's task becomes a plan, the person approves its steps, and the
// steps run. The front agent speaks for the person, as planhttp's gateway
// does, by the coordinator's front actions (their schemas are in its
// help).
func ExampleNewCoordinator() {
	ctx := context.Background()
	st := store.NewMemory()
	observe, evs := events()
	coord, err := plan.NewCoordinator("Coordinator", st, plan.Planner("Planner"), plan.Approver("Front"), observe)
	if err != nil {
		fmt.Println(err)
		return
	}
	hr := agency.MustNewAgent("HR")
	onlyCoordinator := agency.AccessBySender(map[string]agency.Access{"Coordinator": agency.Permitted}, agency.Denied)
	agency.Handle(hr, "create_employee_record", plan.Idempotent(st, func(ctx context.Context, p employee) (string, error) {
		return "Record created for " + p.Name, nil
	}), onlyCoordinator)
	planner := scriptedPlanner("Planner", "Coordinator",
		plan.StepSpec{Agent: "HR", Action: "create_employee_record", Args: json.RawMessage(`{"name":"Jessica Smith"}`)})
	front := agency.MustNewAgent("Front")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range []*agency.Agent{coord.Agent(), hr, planner, front} {
		if err := sp.Add(ctx, a); err != nil {
			fmt.Println(err)
			return
		}
	}

	type receipt struct {
		Status string `json:"status"`
		PlanID string `json:"plan_id"`
	}
	r, err := agency.Call[receipt](ctx, front, "Coordinator", "input_task",
		map[string]any{"user_id": "u1", "description": "Onboard Jessica Smith", "wait_seconds": 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Status)
	if _, err := agency.Call[receipt](ctx, front, "Coordinator", "approve_step_or_steps",
		map[string]any{"user_id": "u1", "plan_id": r.PlanID, "approved": true}); err != nil {
		fmt.Println(err)
		return
	}
	waitFor(evs, plan.PlanStatusEvent, string(plan.PlanCompleted))
	views, err := agency.Call[[]plan.View](ctx, front, "Coordinator", "plans", map[string]any{"user_id": "u1", "plan_id": r.PlanID})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range views[0].Steps {
		fmt.Printf("%d %s: %s: %s\n", s.Seq, s.Action, s.Status, s.AgentReply)
	}
	fmt.Println("plan:", views[0].Plan.Status)
	// Output:
	// Plan created:
	//  The same steps as ever.
	// 1 create_employee_record: completed: Record created for Jessica Smith
	// plan: completed
}

// A rule approves the steps that only read (look_up): they run without
// a person; the step that writes waits for one.
func ExampleAutoApprove() {
	ctx := context.Background()
	st := store.NewMemory()
	readOnly := func(s plan.Step) bool { return s.Action == "look_up" }
	observe, evs := events()
	coord, err := plan.NewCoordinator("Coordinator", st, plan.Planner("Planner"), plan.Approver("Front"),
		plan.AutoApprove(readOnly), observe)
	if err != nil {
		fmt.Println(err)
		return
	}
	hr := agency.MustNewAgent("HR")
	onlyCoordinator := agency.AccessBySender(map[string]agency.Access{"Coordinator": agency.Permitted}, agency.Denied)
	agency.Handle(hr, "look_up", plan.Idempotent(st, func(ctx context.Context, p employee) (string, error) {
		return p.Name + " has no record yet", nil
	}), onlyCoordinator)
	agency.Handle(hr, "create_employee_record", plan.Idempotent(st, func(ctx context.Context, p employee) (string, error) {
		return "Record created for " + p.Name, nil
	}), onlyCoordinator)
	planner := scriptedPlanner("Planner", "Coordinator",
		plan.StepSpec{Agent: "HR", Action: "look_up", Args: json.RawMessage(`{"name":"Jessica Smith"}`)},
		plan.StepSpec{Agent: "HR", Action: "create_employee_record", Args: json.RawMessage(`{"name":"Jessica Smith"}`)})
	front := agency.MustNewAgent("Front") // speaks for people, as planhttp's gateway does
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range []*agency.Agent{coord.Agent(), hr, planner, front} {
		if err := sp.Add(ctx, a); err != nil {
			fmt.Println(err)
			return
		}
	}
	show := func(planID string) {
		views, err := agency.Call[[]plan.View](ctx, front, "Coordinator", "plans", map[string]any{"user_id": "u1", "plan_id": planID})
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

	r, err := agency.Call[struct {
		PlanID string `json:"plan_id"`
	}](ctx, front, "Coordinator", "input_task", map[string]any{"user_id": "u1", "description": "Onboard Jessica Smith"})
	if err != nil {
		fmt.Println(err)
		return
	}
	step2 := waitFor(evs, plan.StepStatusEvent, string(plan.AwaitingFeedback)) // step 1 ran; step 2 waits for a person
	show(r.PlanID)
	if _, err := agency.Call[json.RawMessage](ctx, front, "Coordinator", "human_feedback",
		map[string]any{"user_id": "u1", "plan_id": r.PlanID, "step_id": step2, "approved": true}); err != nil {
		fmt.Println(err)
		return
	}
	waitFor(evs, plan.PlanStatusEvent, string(plan.PlanCompleted))
	show(r.PlanID)
	// Output:
	// 1 look_up: completed, approved by the rule
	// 2 create_employee_record: awaiting_feedback, approved by nobody yet
	// 1 look_up: completed, approved by the rule
	// 2 create_employee_record: completed, approved by a person
}

// A step's effect written with plan.Effect is in the store once however
// often the step comes: here the same step (one idempotency key) is
// delivered twice, as the coordinator does after a restart.
func ExampleEffect() {
	ctx := context.Background()
	st := store.NewMemory()
	hr := agency.MustNewAgent("HR")
	agency.Handle(hr, "create_employee_record", plan.Idempotent(st, func(ctx context.Context, p employee) (string, error) {
		fmt.Println("running create_employee_record")
		row := store.Doc{Kind: "employee", ID: agency.NewID(), Body: json.RawMessage(fmt.Sprintf("%q", p.Name))}
		return "Record created for " + p.Name, plan.Effect(ctx, store.Changes{Put: []store.Doc{row}})
	}))
	coord := agency.MustNewAgent("Coordinator")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range []*agency.Agent{hr, coord} {
		if err := sp.Add(ctx, a); err != nil {
			fmt.Println(err)
			return
		}
	}
	for range 2 {
		m := &agency.Message{To: "HR", Action: "create_employee_record", Args: employee{Name: "Jessica Smith"},
			Meta: map[string]any{plan.IdempotencyKey: "step-1"}}
		r, err := coord.RequestMessage(ctx, m)
		if err != nil {
			fmt.Println(err)
			return
		}
		v, _ := agency.Value[string](r)
		fmt.Println(v)
	}
	rows, _ := st.List(ctx, store.Query{Kind: "employee"})
	fmt.Println("records:", len(rows))
	// Output:
	// running create_employee_record
	// Record created for Jessica Smith
	// Record created for Jessica Smith
	// records: 1
}
