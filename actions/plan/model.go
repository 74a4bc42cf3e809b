package plan

import (
	"encoding/json"
	"time"
)

// PlanStatus is the status of a plan as a whole.
type PlanStatus string

// The statuses of a plan. MACAE's page knows in_progress, completed and
// failed; awaiting_clarification is ours (package planhttp shows it to that
// page as in_progress with a clarification request and no response).
const (
	InProgress            PlanStatus = "in_progress"            // planning, waiting for people, or running
	AwaitingClarification PlanStatus = "awaiting_clarification" // the planner asked the person a question
	PlanCompleted         PlanStatus = "completed"              // every step that was to run has run
	PlanFailed            PlanStatus = "failed"                 // given up; Plan.Reason says why
)

// StepStatus is the status of one step.
type StepStatus string

// The statuses of a step, with MACAE's names; Superseded is ours.
const (
	Planned          StepStatus = "planned"           // waiting for its turn
	AwaitingFeedback StepStatus = "awaiting_feedback" // its turn: a person is to approve or reject it
	Approved         StepStatus = "approved"          // approved (by a person, or by AutoApprove), waiting for the steps before it
	Rejected         StepStatus = "rejected"          // a person rejected it; the planner is asked to replan
	ActionRequested  StepStatus = "action_requested"  // sent to its agent, not answered yet
	Completed        StepStatus = "completed"         // its agent answered; AgentReply holds the answer
	Failed           StepStatus = "failed"            // its agent answered with an error; the planner is asked to replan
	Superseded       StepStatus = "superseded"        // a replan replaced it before it ran
)

// Settled reports whether a step in status s will not change again.
func (s StepStatus) Settled() bool {
	return s == Completed || s == Superseded || s == Rejected || s == Failed
}

// Plan is a task, its goal and where it stands. Its steps are Step
// documents of their own.
type Plan struct {
	ID        string     `json:"id"`
	SessionID string     `json:"session_id"`
	UserID    string     `json:"user_id"`
	Goal      string     `json:"initial_goal"`
	Status    PlanStatus `json:"status"`
	Source    string     `json:"source"` // the planner's id
	Summary   string     `json:"summary,omitempty"`
	// ClarificationRequest is the planner's question to the person;
	// ClarificationResponse their answer ("" while unanswered).
	ClarificationRequest  string `json:"human_clarification_request,omitempty"`
	ClarificationResponse string `json:"human_clarification_response,omitempty"`
	Replans               int    `json:"replan_count"`     // how often the planner was asked to revise the plan
	Reason                string `json:"reason,omitempty"` // why the plan failed
	// Planning is set while the coordinator waits for the planner's
	// submit_plan; PlannerAsk is the id of the message that asked it.
	Planning   bool      `json:"planning,omitempty"`
	PlannerAsk string    `json:"planner_ask,omitempty"`
	Nudged     bool      `json:"nudged,omitempty"` // asked again after an answer without a plan
	Asks       int       `json:"asks,omitempty"`   // requests to the planner since its last plan
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`

	Version int64 `json:"-"` // the store's version of the document
}

// Step is one action of one agent in a plan.
type Step struct {
	ID        string `json:"id"`
	PlanID    string `json:"plan_id"`
	SessionID string `json:"session_id"`
	UserID    string `json:"user_id"`
	Seq       int    `json:"seq"` // 1, 2, … in the order the planner submitted the steps, across replans

	Agent  string          `json:"agent"`
	Action string          `json:"action"`         // an action of Agent, "say" included
	Args   json.RawMessage `json:"args,omitempty"` // its arguments, a JSON object
	Text   string          `json:"text,omitempty"` // what a person reads about the step

	Status        StepStatus `json:"status"`
	HumanFeedback string     `json:"human_feedback,omitempty"`
	UpdatedAction string     `json:"updated_action,omitempty"`
	AgentReply    string     `json:"agent_reply,omitempty"` // the agent's answer, or its error for a failed step
	// AutoApproved is set on a step the coordinator approved by its
	// AutoApprove function, without asking a person; it stays set in the
	// statuses that follow. A step a person approved (through an approver)
	// has it false.
	AutoApproved bool `json:"auto_approved,omitempty"`
	// Replaced is set on a rejected or failed step once a replan has
	// replaced it: the plan goes on past it.
	Replaced bool      `json:"replaced,omitempty"`
	Attempts int       `json:"attempts,omitempty"` // how often it was sent to its agent
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`

	Version int64 `json:"-"`
}

// Describe returns what a person reads about the step: its text, or the
// action and its arguments.
func (s *Step) Describe() string {
	if s.Text != "" {
		return s.Text
	}
	if len(s.Args) == 0 || string(s.Args) == "{}" {
		return s.Agent + "." + s.Action
	}
	return s.Agent + "." + s.Action + " " + string(s.Args)
}

// blocking reports whether the step stops the plan from going past it
// until a replan replaces it.
func (s *Step) blocking() bool {
	return (s.Status == Rejected || s.Status == Failed) && !s.Replaced
}

// Message is an entry of a plan's log, MACAE's agent message: what the
// person, the planner, the coordinator and the agents said, oldest first.
type Message struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	UserID    string    `json:"user_id"`
	PlanID    string    `json:"plan_id"`
	StepID    string    `json:"step_id,omitempty"`
	Source    string    `json:"source"` // the id of the agent that said it
	Content   string    `json:"content"`
	Created   time.Time `json:"created"`
}

// Session ties a person's session id to their plan: a session has one
// plan.
type Session struct {
	SessionID string    `json:"session_id"`
	UserID    string    `json:"user_id"`
	PlanID    string    `json:"plan_id"`
	Created   time.Time `json:"created"`
}

// View is a plan with its steps, in order.
type View struct {
	Plan  Plan   `json:"plan"`
	Steps []Step `json:"steps"`
}

// Tool is one action a step may use: an action of a team member as its
// help describes it.
type Tool struct {
	Agent       string          `json:"agent"`
	Action      string          `json:"action"`
	Description string          `json:"description,omitempty"`
	Args        json.RawMessage `json:"args,omitempty"` // JSON Schema of the arguments
}

// Documents is everything a store holds of one person's plans.
type Documents struct {
	Sessions []Session `json:"sessions"`
	Plans    []Plan    `json:"plans"`
	Steps    []Step    `json:"steps"`
	Messages []Message `json:"messages"`
}

// The kinds of the documents the coordinator keeps in its store.
const (
	kindPlan    = "plan"
	kindStep    = "plan_step"
	kindMessage = "plan_message"
	kindSession = "plan_session"
	kindLease   = "plan_lease"
	kindIdem    = "plan_idempotency"
)
