package planhttp

import (
	"encoding/json"
	"time"

	"github.com/seed72275b23/agency-go/actions/plan"
)

// The JSON shapes of MACAE's backend (models/messages.py of its AutoGen
// version): every field is always present, null when unset; ts is in whole
// seconds since 1970. Fields after the comment "ours" are additions.

type planJSON struct {
	ID                         string  `json:"id"`
	TS                         int64   `json:"ts"`
	DataType                   string  `json:"data_type"`
	SessionID                  string  `json:"session_id"`
	UserID                     string  `json:"user_id"`
	InitialGoal                string  `json:"initial_goal"`
	OverallStatus              string  `json:"overall_status"`
	Source                     string  `json:"source"`
	Summary                    *string `json:"summary"`
	HumanClarificationRequest  *string `json:"human_clarification_request"`
	HumanClarificationResponse *string `json:"human_clarification_response"`
	// ours
	Status      string  `json:"status"`
	ReplanCount int     `json:"replan_count"`
	Reason      *string `json:"reason"`
	UpdatedTS   int64   `json:"updated_ts"`
}

type planWithStepsJSON struct {
	planJSON
	Steps            []stepJSON `json:"steps"`
	TotalSteps       int        `json:"total_steps"`
	Planned          int        `json:"planned"`
	AwaitingFeedback int        `json:"awaiting_feedback"`
	Approved         int        `json:"approved"`
	Rejected         int        `json:"rejected"`
	ActionRequested  int        `json:"action_requested"`
	Completed        int        `json:"completed"`
	Failed           int        `json:"failed"`
	// ours
	Superseded int `json:"superseded"`
}

type stepJSON struct {
	ID                  string  `json:"id"`
	TS                  int64   `json:"ts"`
	DataType            string  `json:"data_type"`
	PlanID              string  `json:"plan_id"`
	Action              string  `json:"action"`
	Agent               string  `json:"agent"`
	Status              string  `json:"status"`
	AgentReply          *string `json:"agent_reply"`
	HumanFeedback       *string `json:"human_feedback"`
	HumanApprovalStatus *string `json:"human_approval_status"`
	UpdatedAction       *string `json:"updated_action"`
	SessionID           string  `json:"session_id"`
	UserID              string  `json:"user_id"`
	// ours
	Seq      int             `json:"seq"`
	Function string          `json:"function"`
	Args     json.RawMessage `json:"args"`
	Attempts int             `json:"attempts"`
	// AutoApproved: the coordinator's AutoApprove function approved the
	// step, not a person (human_approval_status is accepted either way).
	AutoApproved bool `json:"auto_approved"`
}

type messageJSON struct {
	ID        string  `json:"id"`
	DataType  string  `json:"data_type"`
	SessionID string  `json:"session_id"`
	UserID    string  `json:"user_id"`
	PlanID    string  `json:"plan_id"`
	Content   string  `json:"content"`
	Source    string  `json:"source"`
	TS        int64   `json:"ts"`
	StepID    *string `json:"step_id"`
}

type sessionJSON struct {
	ID            string  `json:"id"`
	DataType      string  `json:"data_type"`
	SessionID     string  `json:"session_id"`
	UserID        string  `json:"user_id"`
	CurrentStatus string  `json:"current_status"`
	MessageToUser *string `json:"message_to_user"`
	TS            int64   `json:"ts"`
}

type toolJSON struct {
	Agent       string `json:"agent"`
	Function    string `json:"function"`
	Description string `json:"description"`
	Arguments   string `json:"arguments"` // the argument schema's properties, as JSON text (MACAE: a string)
	// ours
	Args json.RawMessage `json:"args"` // the argument schema
}

func ts(t time.Time) int64 { return t.Unix() }

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// overall is MACAE's overall_status: awaiting_clarification shows as
// in_progress (its page sees the question and no answer).
func overall(s plan.PlanStatus) string {
	if s == plan.AwaitingClarification {
		return string(plan.InProgress)
	}
	return string(s)
}

func viewPlan(p *plan.Plan) planJSON {
	j := planJSON{
		ID: p.ID, TS: ts(p.Created), DataType: "plan", SessionID: p.SessionID, UserID: p.UserID,
		InitialGoal: p.Goal, OverallStatus: overall(p.Status), Source: p.Source, Summary: opt(p.Summary),
		HumanClarificationRequest: opt(p.ClarificationRequest), HumanClarificationResponse: opt(p.ClarificationResponse),
		Status: string(p.Status), ReplanCount: p.Replans, Reason: opt(p.Reason), UpdatedTS: ts(p.Updated),
	}
	if p.ClarificationRequest == "" {
		j.HumanClarificationResponse = nil
	}
	return j
}

// approval is MACAE's human_approval_status: requested while a person may
// still approve the step, accepted once approved, rejected when rejected or
// superseded (it will not run); null for an unapproved step of a plan that
// has ended.
func approval(p *plan.Plan, s *plan.Step) *string {
	var v string
	switch s.Status {
	case plan.Planned, plan.AwaitingFeedback:
		if p.Status == plan.PlanCompleted || p.Status == plan.PlanFailed {
			return nil
		}
		v = "requested"
	case plan.Rejected, plan.Superseded:
		v = "rejected"
	default:
		v = "accepted"
	}
	return &v
}

func viewStep(p *plan.Plan, s *plan.Step) stepJSON {
	args := s.Args
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	return stepJSON{
		ID: s.ID, TS: ts(s.Created), DataType: "step", PlanID: s.PlanID, Action: s.Describe(), Agent: s.Agent,
		Status: string(s.Status), AgentReply: opt(s.AgentReply), HumanFeedback: opt(s.HumanFeedback),
		HumanApprovalStatus: approval(p, s), UpdatedAction: opt(s.UpdatedAction), SessionID: s.SessionID, UserID: s.UserID,
		Seq: s.Seq, Function: s.Action, Args: args, Attempts: s.Attempts, AutoApproved: s.AutoApproved,
	}
}

func viewSteps(v *plan.View) []stepJSON {
	out := make([]stepJSON, len(v.Steps))
	for i := range v.Steps {
		out[i] = viewStep(&v.Plan, &v.Steps[i])
	}
	return out
}

// viewPlanWithSteps counts the steps by status. total_steps counts the
// steps that ran or are to run: not those a replan superseded, nor the
// rejected or failed steps it replaced.
func viewPlanWithSteps(v *plan.View) planWithStepsJSON {
	j := planWithStepsJSON{planJSON: viewPlan(&v.Plan), Steps: viewSteps(v)}
	for _, s := range v.Steps {
		switch s.Status {
		case plan.Planned:
			j.Planned++
		case plan.AwaitingFeedback:
			j.AwaitingFeedback++
		case plan.Approved:
			j.Approved++
		case plan.Rejected:
			j.Rejected++
		case plan.ActionRequested:
			j.ActionRequested++
		case plan.Completed:
			j.Completed++
		case plan.Failed:
			j.Failed++
		case plan.Superseded:
			j.Superseded++
		}
		if s.Status != plan.Superseded && !s.Replaced {
			j.TotalSteps++
		}
	}
	return j
}

func viewMessage(m *plan.Message) messageJSON {
	return messageJSON{ID: m.ID, DataType: "agent_message", SessionID: m.SessionID, UserID: m.UserID, PlanID: m.PlanID,
		Content: m.Content, Source: m.Source, TS: ts(m.Created), StepID: opt(m.StepID)}
}

func viewTool(t *plan.Tool) toolJSON {
	args := t.Args
	if len(args) == 0 {
		args = json.RawMessage(`{"type":"object"}`)
	}
	var schema struct {
		Properties json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(args, &schema)
	props := "{}"
	if len(schema.Properties) > 0 {
		props = string(schema.Properties)
	}
	return toolJSON{Agent: t.Agent, Function: t.Action, Description: t.Description, Arguments: props, Args: args}
}

// viewDocuments is every document of a user as GET /messages shows them:
// sessions, plans, steps, messages, each with its data_type.
func viewDocuments(d *plan.Documents) []any {
	status := map[string]string{}
	out := []any{}
	for i := range d.Plans {
		status[d.Plans[i].ID] = overall(d.Plans[i].Status)
	}
	for _, s := range d.Sessions {
		out = append(out, sessionJSON{ID: s.SessionID, DataType: "session", SessionID: s.SessionID, UserID: s.UserID,
			CurrentStatus: status[s.PlanID], TS: ts(s.Created)})
	}
	for i := range d.Plans {
		out = append(out, viewPlan(&d.Plans[i]))
	}
	plans := map[string]*plan.Plan{}
	for i := range d.Plans {
		plans[d.Plans[i].ID] = &d.Plans[i]
	}
	for i := range d.Steps {
		p := plans[d.Steps[i].PlanID]
		if p == nil {
			p = &plan.Plan{}
		}
		out = append(out, viewStep(p, &d.Steps[i]))
	}
	for i := range d.Messages {
		out = append(out, viewMessage(&d.Messages[i]))
	}
	return out
}
