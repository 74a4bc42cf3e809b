package plan

import "time"

// Event is one change of a plan or step, reported after it is committed.
type Event struct {
	Kind      EventKind
	PlanID    string
	SessionID string
	UserID    string
	StepID    string // for step events
	Status    string // the plan's or step's status after the change
	Detail    string // what a person reads: the feedback, the reason, the error
	Time      time.Time
	// AutoApproved is set on the step_status event of an approval made
	// by the AutoApprove function, not by a person.
	AutoApproved bool
}

// EventKind says what an Event reports.
type EventKind string

// The kinds of events.
const (
	PlanCreated      EventKind = "plan_created"      // a task came in; the planner is asked
	PlanSubmitted    EventKind = "plan_submitted"    // the planner submitted steps
	PlannerAsked     EventKind = "planner_asked"     // the planner is asked to plan, replan or plan again
	PlannerSaid      EventKind = "planner_said"      // the planner ended its turn with these words
	PlanStatusEvent  EventKind = "plan_status"       // the plan's status changed
	StepStatusEvent  EventKind = "step_status"       // a step's status changed
	StepDispatched   EventKind = "step_dispatched"   // a step was sent to its agent (again, after a lease ran out)
	ClarificationAsk EventKind = "clarification"     // the planner asked the person a question
	Clarified        EventKind = "clarified"         // the person answered it
	PlansDeleted     EventKind = "documents_deleted" // a person's documents were deleted
)
