// Package plan runs plans approved by people: a coordinator agent turns a
// person's task into steps through a planner (an LLM agent of
// actions/openai), asks the person to approve or reject each step, runs the
// approved steps on the agents they name, and has the planner revise the
// plan from a rejected or failed step with the person's comment. It is the
// engine of Microsoft's Multi-Agent Custom Automation Engine (MACAE),
// rebuilt on agents and a durable store.
//
//	st, err := sqlitestore.Open(ctx, "plans.db")
//	coord, err := plan.NewCoordinator("GroupChatManager", st, plan.Planner("PlannerAgent"), plan.Approver("HumanAgent"))
//	planner, err := openai.New("PlannerAgent", openai.SystemPrompt(plan.PlannerPrompt))
//	agency.Handle(hr, "create_employee_record", plan.Idempotent(st, createEmployeeRecord),
//		agency.AccessBySender(map[string]agency.Access{"GroupChatManager": agency.Permitted}, agency.Denied))
//	// add coord.Agent(), planner.Agent(), hr and the approver to a space;
//	// package planhttp serves MACAE's HTTP API and a web page through the approver.
//
// Steps that need no person (a look-up, a read) can be approved by a
// rule: with AutoApprove(f), a step for which f returns true is approved
// and run without asking anyone, and is marked Step.AutoApproved; the
// others wait for a person.
//
// Plans, steps and their log are documents in an actions/store Store, and
// every change is one transaction with the messages it implies (an
// outbox), so that a plan survives a restart at any point and waits for a
// person without a time limit. Sending a step to its agent is at least
// once; wrapped by Idempotent, its handler's effect written through the
// store with Effect is exactly once, and an effect outside the store gets
// the step's id as its idempotency key (at least once, with a key).
//
// A step goes to its agent as a stream (agency.Agent.StreamMessage): the
// parts its handler emits with agency.Emit reach the people who watch the
// plan while the step runs (the coordinator's watch_plan action; planhttp
// serves them as server-sent events). Parts are shown, never stored, and
// what is kept of them for late watchers is bounded; the step's result is
// its answer, recorded as before.
//
// docs/plans.md in the repository describes the flow, the statuses, the
// HTTP API and the guarantees.
package plan
