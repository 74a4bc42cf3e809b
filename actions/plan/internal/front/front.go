// Package front holds the arguments and results of the front actions of
// plan's coordinator (input_task, human_feedback, approve_step_or_steps,
// human_clarification_on_plan and the reads): what the coordinator takes
// and what package planhttp sends, defined once for both. An agent
// outside the module calls the same actions with the schemas their help
// gives.
package front

// The words of Receipt.Refused.
const (
	RefusedNotFound = "not_found"
	RefusedConflict = "conflict"
	RefusedBusy     = "busy" // too many watchers: try again later
)

// InputTask asks for a plan for a task (input_task).
type InputTask struct {
	UserID      string `json:"user_id" validate:"min=1,max=255" jsonschema:"description=the person the plan is for"`
	SessionID   string `json:"session_id,omitempty" validate:"max=255" jsonschema:"description=the person's session; a new one when empty. A session has one plan"`
	Description string `json:"description" validate:"min=1,max=65536" jsonschema:"description=the task"`
	// Wait makes the action wait, up to this many seconds, for the
	// planner's plan (or its question) before it answers.
	Wait float64 `json:"wait_seconds,omitempty" validate:"min=0,max=3600" jsonschema:"description=wait up to this many seconds for the plan"`
}

// Feedback approves or rejects a step, or with no StepID every step that
// has not run (human_feedback, approve_step_or_steps). The plan is named
// by PlanID or, failing that, by SessionID.
type Feedback struct {
	UserID        string `json:"user_id" validate:"min=1,max=255"`
	PlanID        string `json:"plan_id,omitempty" validate:"max=255" jsonschema:"description=the plan; or its session id"`
	SessionID     string `json:"session_id,omitempty" validate:"max=255"`
	StepID        string `json:"step_id,omitempty" validate:"max=255" jsonschema:"description=the step; every step that has not run when empty"`
	Approved      bool   `json:"approved"`
	HumanFeedback string `json:"human_feedback,omitempty" validate:"max=65536" jsonschema:"description=the person's comment; for a rejection what to change"`
	// UpdatedAction replaces what an approved step does: the arguments of
	// its action as a JSON object, or for a say the text to say.
	UpdatedAction string `json:"updated_action,omitempty" validate:"max=65536"`
	// Wait makes an approval wait, up to this many seconds, until the
	// steps it approved have run (or the plan cannot go on without a
	// person) before it answers.
	Wait float64 `json:"wait_seconds,omitempty" validate:"min=0,max=3600"`
}

// Clarification answers the planner's question about a plan
// (human_clarification_on_plan). PlanID may hold the session id, as MACAE's
// page sends it.
type Clarification struct {
	UserID             string  `json:"user_id" validate:"min=1,max=255"`
	PlanID             string  `json:"plan_id,omitempty" validate:"max=255"`
	SessionID          string  `json:"session_id,omitempty" validate:"max=255"`
	HumanClarification string  `json:"human_clarification" validate:"min=1,max=65536"`
	Wait               float64 `json:"wait_seconds,omitempty" validate:"min=0,max=3600"`
}

// Receipt is what a front action did.
type Receipt struct {
	// Status says what happened, in words for a person.
	Status string `json:"status"`
	// Refused is set when nothing happened: "not_found" (no such plan or
	// step for this user) or "conflict" (the plan or step is not in a
	// state that allows it); Status says more.
	Refused     string `json:"refused,omitempty"`
	SessionID   string `json:"session_id,omitempty"`
	PlanID      string `json:"plan_id,omitempty"`
	StepID      string `json:"step_id,omitempty"`
	Description string `json:"description,omitempty"`
}

// PlanQuery selects a person's plans (plans): one by id or by session,
// or all of them, newest first.
type PlanQuery struct {
	UserID    string `json:"user_id" validate:"min=1,max=255"`
	PlanID    string `json:"plan_id,omitempty" validate:"max=255"`
	SessionID string `json:"session_id,omitempty" validate:"max=255"`
	Limit     int    `json:"limit,omitempty" validate:"min=0,max=10000" jsonschema:"description=at most this many plans; 0 for all"`
}

// MessageQuery selects the log of a person's session (agent_messages).
type MessageQuery struct {
	UserID    string `json:"user_id" validate:"min=1,max=255"`
	SessionID string `json:"session_id" validate:"min=1,max=255"`
}

// UserQuery names a person (documents, delete_documents, agent_tools).
type UserQuery struct {
	UserID string `json:"user_id" validate:"min=1,max=255"`
}

// Deleted counts the documents delete_documents removed.
type Deleted struct {
	Documents int `json:"documents"`
}

// Watch asks for the parts of the answers of a plan's steps while they
// run (watch_plan): the coordinator emits LiveEvents until the plan is
// finished or the caller stops reading.
type Watch struct {
	UserID string `json:"user_id" validate:"min=1,max=255"`
	PlanID string `json:"plan_id" validate:"min=1,max=255" jsonschema:"description=the plan; or its session id"`
}

// The kinds of LiveEvent.
const (
	LiveOpen    = "open"     // the first: the plan is the user's, and is watched
	LivePart    = "part"     // a part of a running step's answer
	LiveStepEnd = "step_end" // the step's stream ended: its answer came (or the step is sent again)
)

// LiveEvent is a part of watch_plan's answer.
type LiveEvent struct {
	Kind   string `json:"kind"`
	PlanID string `json:"plan_id,omitempty"` // on open
	StepID string `json:"step_id,omitempty"`
	Seq    int    `json:"seq,omitempty"`  // the part's number in its step's stream, from 1
	Text   string `json:"text,omitempty"` // the part: a string as it is, any other value as JSON
}

// The Status of watch_plan's answer (a Receipt, unless refused).
const (
	WatchFinished = "finished" // the plan is completed or failed: nothing more will come
	WatchAgain    = "again"    // the watch ended early (the caller fell behind, the coordinator is leaving): watch again
)
