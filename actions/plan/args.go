package plan

import "encoding/json"

// The arguments and results of the coordinator's actions for the planner:
// submit_plan (and say, whose arguments are openai.SayArgs). Those of the
// front actions, for the approvers, are the business of package planhttp
// (and of any agent that calls them, by the schemas help gives).

// SubmitPlan is the planner's plan (submit_plan), sent in the plan's
// conversation (__meta__.conversation is the plan id).
type SubmitPlan struct {
	Steps []StepSpec `json:"steps" validate:"max=50,dive" jsonschema:"description=the steps in the order they are to run"`
	// ReplaceFrom is the number of the first step this plan replaces: the
	// steps from it on that have not run are superseded, and the new
	// steps follow. 0 means from the first step that has not run.
	ReplaceFrom int    `json:"replace_from,omitempty" validate:"min=0" jsonschema:"description=number of the first step this plan replaces; after a rejection or failure the number of that step"`
	Summary     string `json:"summary,omitempty" validate:"max=4096" jsonschema:"description=the plan in one or two sentences"`
	// Clarification asks the person a question before the plan goes on.
	Clarification string `json:"clarification_request,omitempty" validate:"max=4096" jsonschema:"description=a question for the person; the plan waits for the answer"`
}

// StepSpec is one step of a submitted plan.
type StepSpec struct {
	Agent  string          `json:"agent" validate:"min=1,max=255" jsonschema:"description=the agent that does the step"`
	Action string          `json:"action" validate:"min=1,max=255" jsonschema:"description=the action of that agent"`
	Args   json.RawMessage `json:"args,omitempty" jsonschema:"type=object,description=the action's arguments: a JSON object matching its schema"`
	Text   string          `json:"text,omitempty" validate:"max=4096" jsonschema:"description=what the step does in words for the person who approves it; for the action say the text to say"`
}

// Submitted is submit_plan's answer to the planner.
type Submitted struct {
	Accepted bool `json:"accepted"`
	Steps    int  `json:"steps"`
}
