package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
)

// PlannerPrompt is a system prompt for the planner, an LLM agent of
// actions/openai:
//
//	planner, err := openai.New("PlannerAgent", openai.SystemPrompt(plan.PlannerPrompt))
//
// The coordinator's requests to the planner carry the rest: the task,
// the plan so far, the agents and actions a step may use, and what to do.
const PlannerPrompt = `You are the planner of a team of agents. A coordinator sends you a person's task; you turn it into a plan: a short list of steps, each one action of one agent, in the order they must run. You submit the plan by calling the coordinator's submit_plan tool, in one call.

Each step names the agent, the action, and the action's arguments as a JSON object that matches the argument schema listed for that action; "text" says in a few words what the step does, for the person who approves it. Use only the agents and actions the coordinator lists. Never call those actions yourself: each step is approved before the coordinator runs it, by a person or, for a step that needs none, by a rule of the coordinator.

If you cannot plan without information that only the person has, submit the steps you can and ask your question in clarification_request; you will get the answer.

When the person rejects a step, or a step fails, you are told which step and why: submit a revised plan whose steps replace that step and the ones after it that have not run, with replace_from set to that step's number, following the person's feedback.

After submitting, answer with one short sentence.`

// plannerText is what the coordinator says to the planner: intro, the plan
// so far, the actions a step may use and how to submit.
func (c *Coordinator) plannerText(s *state, intro string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan %s for the task: %s\n\n", s.plan.ID, s.plan.Goal)
	if intro != "" {
		b.WriteString(intro)
		b.WriteString("\n\n")
	}
	if s.plan.ClarificationResponse != "" {
		fmt.Fprintf(&b, "You asked the person: %s\nThey answered: %s\n\n", s.plan.ClarificationRequest, s.plan.ClarificationResponse)
	}
	if len(s.steps) > 0 {
		b.WriteString("The plan so far:\n")
		for _, st := range s.steps {
			if st.Status == Superseded {
				continue
			}
			fmt.Fprintf(&b, "%d. [%s] %s.%s %s", st.Seq, st.Status, st.Agent, st.Action, compactArgs(st.Args))
			if st.Text != "" {
				fmt.Fprintf(&b, " (%s)", st.Text)
			}
			if st.HumanFeedback != "" {
				fmt.Fprintf(&b, "; the person's feedback: %q", st.HumanFeedback)
			}
			if st.AgentReply != "" {
				fmt.Fprintf(&b, "; reply: %s", clip(st.AgentReply, 500))
			}
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	tools := toolList(c.tools(s.ctx, false))
	if len(tools) == 0 {
		b.WriteString("No agent of the team has answered; submit the plan with the agents and actions you know of.\n\n")
	} else {
		b.WriteString("The agents and the actions a step may use, with their arguments as JSON Schema:\n")
		for _, t := range tools {
			fmt.Fprintf(&b, "- agent %s, action %s", t.Agent, t.Action)
			if t.Description != "" {
				fmt.Fprintf(&b, ": %s", t.Description)
			}
			if len(t.Args) > 0 {
				fmt.Fprintf(&b, ". Arguments: %s", compactArgs(t.Args))
			}
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "Submit the plan with the submit_plan action of %s.", c.id)
	return b.String()
}

func compactArgs(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// conversation returns the plan id a message of the planner belongs to.
func conversation(ctx context.Context) string {
	m := agency.MessageFrom(ctx)
	if m == nil {
		return ""
	}
	s, _ := m.Meta["conversation"].(string)
	return s
}

// submitPlan takes the planner's plan or revised plan.
func (c *Coordinator) submitPlan(ctx context.Context, args SubmitPlan) (Submitted, error) {
	id := conversation(ctx)
	if id == "" {
		return Submitted{}, agency.InvalidArgsf("submit_plan must be sent in the conversation of a plan (__meta__.conversation = the plan id)")
	}
	if len(args.Steps) == 0 && args.Clarification == "" {
		return Submitted{}, agency.InvalidArgsf("steps: at least one step is required, unless you ask a clarification_request")
	}
	specs, err := c.checkSteps(ctx, args.Steps)
	if err != nil {
		return Submitted{}, err
	}
	err = c.update(ctx, id, false, func(s *state) error {
		if !s.plan.Planning {
			return agency.ActionFailedf("plan %s is not waiting for a plan now (it is %s); there is nothing to submit", id, s.plan.Status)
		}
		from, err := s.replaceFrom(args.ReplaceFrom)
		if err != nil {
			return err
		}
		for _, st := range s.steps {
			if st.Seq < from {
				continue
			}
			switch st.Status {
			case Planned, AwaitingFeedback, Approved:
				s.setStep(st, Superseded, "replaced by a revised plan")
			case Rejected, Failed:
				st.Replaced = true
				s.dirty[st] = true
			}
		}
		seq := len(s.steps)
		for _, sp := range specs {
			seq++
			st := &Step{ID: newID(), PlanID: id, SessionID: s.plan.SessionID, UserID: s.plan.UserID, Seq: seq,
				Agent: sp.Agent, Action: sp.Action, Args: sp.Args, Text: sp.Text, Status: Planned, Created: s.now}
			s.steps = append(s.steps, st)
			s.dirty[st] = true
		}
		if args.Summary != "" {
			s.plan.Summary = args.Summary
		}
		s.plan.Planning, s.plan.PlannerAsk, s.plan.Nudged, s.plan.Asks = false, "", false, 0
		s.dropLease(plannerLeaseID(id))
		s.event(PlanSubmitted, nil, string(s.plan.Status), fmt.Sprintf("%d steps from step %d", len(specs), from))
		s.note(c.cfg.planner, nil, planNote(args.Summary, s.steps[len(s.steps)-len(specs):]))
		if args.Clarification != "" {
			s.plan.ClarificationRequest, s.plan.ClarificationResponse = args.Clarification, ""
			s.setPlan(AwaitingClarification, args.Clarification)
			s.event(ClarificationAsk, nil, string(AwaitingClarification), args.Clarification)
			s.note(c.cfg.planner, nil, args.Clarification)
			return nil
		}
		s.setPlan(InProgress, "")
		s.advance()
		return nil
	})
	switch {
	case err == errPlanGone:
		return Submitted{}, agency.InvalidArgsf("there is no plan %q (the conversation's id)", id)
	case err != nil:
		return Submitted{}, err
	}
	return Submitted{Accepted: true, Steps: len(specs)}, nil
}

// planNote is the log entry of a submitted plan.
func planNote(summary string, steps []*Step) string {
	var b strings.Builder
	if summary != "" {
		b.WriteString(summary)
		b.WriteString("\n\n")
	}
	for i, st := range steps {
		fmt.Fprintf(&b, "%d. %s\n", i+1, st.Describe())
	}
	return strings.TrimSpace(b.String())
}

// replaceFrom returns the number of the first step a submitted plan
// replaces, checking the planner's choice: it may replace neither a step
// that ran or runs, nor leave a rejected or failed step unreplaced.
func (s *state) replaceFrom(asked int) (int, error) {
	first := len(s.steps) + 1 // the first step that has not run
	for _, st := range s.steps {
		if st.Status == Superseded || st.Replaced {
			continue
		}
		if st.Status != Completed && st.Status != ActionRequested {
			first = st.Seq
			break
		}
	}
	lowest := 1 // no step before it has run or runs
	for _, st := range s.steps {
		if st.Status == Completed || st.Status == ActionRequested {
			lowest = st.Seq + 1
		}
	}
	if asked == 0 {
		return max(first, lowest), nil
	}
	if asked < lowest {
		return 0, agency.InvalidArgsf("replace_from: step %d has run or is running; replace_from must be at least %d", lowest-1, lowest)
	}
	for _, st := range s.steps {
		if st.blocking() && st.Seq < asked {
			return 0, agency.InvalidArgsf("replace_from: step %d was %s and must be replaced; replace_from must be at most %d", st.Seq, st.Status, st.Seq)
		}
	}
	if asked > len(s.steps)+1 {
		return 0, agency.InvalidArgsf("replace_from: the plan has %d steps; replace_from must be at most %d", len(s.steps), len(s.steps)+1)
	}
	return asked, nil
}

// checkSteps checks the steps against the team's actions, so that the
// model learns of a wrong agent, action or argument at once.
func (c *Coordinator) checkSteps(ctx context.Context, specs []StepSpec) ([]StepSpec, error) {
	out := make([]StepSpec, len(specs))
	cat := c.tools(ctx, false)
	var problems []string
	for i, sp := range specs {
		if len(sp.Args) > 0 && !bytes.Equal(bytes.TrimSpace(sp.Args), []byte("null")) {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(sp.Args, &obj); err != nil {
				problems = append(problems, fmt.Sprintf("steps[%d].args: must be a JSON object", i))
				continue
			}
		} else {
			sp.Args = nil
		}
		if sp.Action == "say" && len(sp.Args) == 0 {
			if sp.Text == "" {
				problems = append(problems, fmt.Sprintf("steps[%d]: a say step needs its text", i))
				continue
			}
			a, _ := json.Marshal(openai.SayArgs{Content: sp.Text})
			sp.Args = a
		}
		out[i] = sp
		actions, ok := cat[sp.Agent]
		if !ok {
			cat = c.tools(ctx, true)
			actions, ok = cat[sp.Agent]
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("steps[%d].agent: there is no agent %q on the team; the agents are %s", i, sp.Agent, agentNames(cat)))
			continue
		}
		h, ok := actions[sp.Action]
		if !ok {
			problems = append(problems, fmt.Sprintf("steps[%d].action: agent %s has no action %q; its actions are %s", i, sp.Agent, sp.Action, actionNames(actions)))
			continue
		}
		problems = append(problems, checkArgs(i, h.Args, sp.Args)...)
	}
	if len(problems) > 0 {
		return nil, agency.InvalidArgsf("%s", strings.Join(problems, "; "))
	}
	return out, nil
}

// checkArgs checks args against the required and known properties of an
// action's argument schema; the agent validates them fully when the step
// runs.
func checkArgs(i int, schema, args json.RawMessage) []string {
	var sch struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &sch) != nil {
		return nil
	}
	var got map[string]json.RawMessage
	if len(args) > 0 {
		_ = json.Unmarshal(args, &got)
	}
	var out []string
	for _, r := range sch.Required {
		if _, ok := got[r]; !ok {
			out = append(out, fmt.Sprintf("steps[%d].args.%s: required", i, r))
		}
	}
	if sch.Properties != nil && (sch.AdditionalProperties == nil || !*sch.AdditionalProperties) {
		for k := range got {
			if _, ok := sch.Properties[k]; !ok {
				out = append(out, fmt.Sprintf("steps[%d].args.%s: not an argument of the action", i, k))
			}
		}
	}
	return out
}

func agentNames(cat map[string]map[string]agency.ActionHelp) string {
	var names []string
	for _, t := range toolList(cat) {
		if len(names) == 0 || names[len(names)-1] != t.Agent {
			names = append(names, t.Agent)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func actionNames(actions map[string]agency.ActionHelp) string {
	var names []string
	for _, t := range toolList(map[string]map[string]agency.ActionHelp{"": actions}) {
		names = append(names, t.Action)
	}
	return strings.Join(names, ", ")
}

// say takes what the planner answers at the end of its turn: it goes into
// the plan's log. An answer to the coordinator's latest request that comes
// while the plan still waits for its steps means the planner did not
// submit any: the planner is asked once more, and then the plan fails, with
// the planner's words as the reason.
func (c *Coordinator) say(ctx context.Context, args openai.SayArgs) (struct{}, error) {
	id := conversation(ctx)
	m := agency.MessageFrom(ctx)
	replyTo, _ := m.Meta["in_reply_to"].(string)
	err := c.update(ctx, id, false, func(s *state) error {
		s.note(m.From, nil, args.Content)
		s.event(PlannerSaid, nil, string(s.plan.Status), args.Content)
		if s.plan.Planning && replyTo != "" && replyTo == s.plan.PlannerAsk {
			if s.plan.Nudged {
				s.failPlan("the planner answered without submitting a plan: " + clip(args.Content, 1000))
				return nil
			}
			// Once: a model may answer in words the first time.
			s.plan.Nudged = true
			s.askPlanner(fmt.Sprintf("You answered %q without calling submit_plan. Call the submit_plan action of %s now, with the steps (or a clarification_request).",
				clip(args.Content, 300), c.id), "asked again: no plan was submitted")
		}
		return nil
	})
	if err == errPlanGone {
		return struct{}{}, nil // a conversation that is not a plan (any more)
	}
	return struct{}{}, err
}
