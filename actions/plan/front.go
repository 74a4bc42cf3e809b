package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/plan/internal/front"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

func sender(ctx context.Context) string {
	if m := agency.MessageFrom(ctx); m != nil {
		return m.From
	}
	return ""
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// sessionKey is the id of the session document of a user's session: the
// same session id of two users is two sessions.
func sessionKey(user, session string) string {
	h := sha256.Sum256([]byte(user + "\x00" + session))
	return hex.EncodeToString(h[:16])
}

// refusal is a Receipt.Refused raised inside a change.
type refusal struct{ r front.Receipt }

func (e *refusal) Error() string { return e.r.Status }

func notFound(what string) error {
	return &refusal{front.Receipt{Status: what + " not found", Refused: front.RefusedNotFound}}
}

func conflict(format string, args ...any) error {
	return &refusal{front.Receipt{Status: fmt.Sprintf(format, args...), Refused: front.RefusedConflict}}
}

// receipt turns an error of a change into the receipt or the error the
// caller gets.
func receipt(err error) (front.Receipt, error) {
	var r *refusal
	if errors.As(err, &r) {
		return r.r, nil
	}
	if errors.Is(err, errPlanGone) {
		return front.Receipt{Status: "Plan not found", Refused: front.RefusedNotFound}, nil
	}
	return front.Receipt{}, err
}

func (c *Coordinator) inputTask(ctx context.Context, args front.InputTask) (front.Receipt, error) {
	session := args.SessionID
	if session == "" {
		session = newID()
	}
	id := newID()
	key := sessionKey(args.UserID, session)
	err := c.update(ctx, id, true, func(s *state) error {
		if _, err := c.st.Get(ctx, kindSession, key); err == nil {
			return conflict("session %s already has a plan; start a new session for a new task", session)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		s.plan = Plan{ID: id, SessionID: session, UserID: args.UserID, Goal: args.Description, Status: InProgress,
			Source: c.cfg.planner, Created: s.now}
		body, err := json.Marshal(Session{SessionID: session, UserID: args.UserID, PlanID: id, Created: s.now})
		if err != nil {
			return err
		}
		s.docs = append(s.docs, store.Doc{Kind: kindSession, ID: key, Parent: id, Session: session, User: args.UserID, Body: body})
		s.note(sender(ctx), nil, args.Description)
		s.event(PlanCreated, nil, string(InProgress), args.Description)
		s.askPlanner("Make a plan for this task.", "plan")
		return nil
	})
	if err != nil {
		return receipt(err)
	}
	c.waitFor(ctx, id, seconds(args.Wait), func(v View) bool { return !v.Plan.Planning })
	r := front.Receipt{Status: "Plan requested", SessionID: session, PlanID: id, Description: args.Description}
	if args.Wait > 0 {
		if v, err := c.view(ctx, id); err == nil {
			switch {
			case v.Plan.Status == PlanFailed:
				r.Status = "Plan not created"
			case !v.Plan.Planning:
				r.Status = "Plan created:\n " + v.Plan.Summary
			}
		}
	}
	return r, nil
}

// find returns the id of the user's plan that a request names: by plan id,
// by a session id given as the plan id (as MACAE's page does), or by
// session id.
func (c *Coordinator) find(ctx context.Context, user, planID, session string) (string, error) {
	if planID != "" {
		d, err := c.st.Get(ctx, kindPlan, planID)
		switch {
		case err == nil && d.User == user:
			return planID, nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return "", err
		}
		if session == "" {
			session = planID
		}
	}
	if session != "" {
		d, err := c.st.Get(ctx, kindSession, sessionKey(user, session))
		switch {
		case err == nil && d.User == user:
			return d.Parent, nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return "", err
		}
	}
	return "", notFound("Plan")
}

func (c *Coordinator) humanFeedback(ctx context.Context, args front.Feedback) (front.Receipt, error) {
	if args.StepID == "" {
		return front.Receipt{}, agency.InvalidArgsf("step_id: required for human_feedback (approve_step_or_steps takes every step)")
	}
	r, err := c.feedback(ctx, args)
	if err == nil && r.Refused == "" {
		r.Status = "Feedback received"
	}
	return r, err
}

func (c *Coordinator) approve(ctx context.Context, args front.Feedback) (front.Receipt, error) {
	r, err := c.feedback(ctx, args)
	if err == nil && r.Refused == "" {
		switch {
		case args.StepID != "":
			r.Status = fmt.Sprintf("Step %s - Approval:%s.", args.StepID, map[bool]string{true: "True", false: "False"}[args.Approved])
		case args.Approved:
			r.Status = "All steps approved"
		default:
			r.Status = "All steps rejected"
		}
	}
	return r, err
}

// feedback approves or rejects one step or every step that has not run.
func (c *Coordinator) feedback(ctx context.Context, args front.Feedback) (front.Receipt, error) {
	if args.StepID == "" && args.UpdatedAction != "" {
		return front.Receipt{}, agency.InvalidArgsf("updated_action: needs a step_id: it replaces what one step does")
	}
	id, err := c.find(ctx, args.UserID, args.PlanID, args.SessionID)
	if err != nil {
		return receipt(err)
	}
	who := sender(ctx)
	var approved []string
	var session string
	err = c.update(ctx, id, false, func(s *state) error {
		session = s.plan.SessionID
		switch {
		case s.finished():
			return conflict("the plan is %s", s.plan.Status)
		case s.plan.Status == AwaitingClarification:
			return conflict("the plan waits for the answer to the planner's question: %s", s.plan.ClarificationRequest)
		case s.plan.Planning:
			return conflict("the planner is revising the plan; approve or reject its steps once it has")
		}
		if args.StepID != "" {
			st := s.step(args.StepID)
			if st == nil {
				return notFound("Step")
			}
			if st.Status != Planned && st.Status != AwaitingFeedback {
				return conflict("step %d is %s: only a step that is planned or awaiting feedback can be approved or rejected", st.Seq, st.Status)
			}
			if args.Approved {
				if err := update(st, args.UpdatedAction); err != nil {
					return err
				}
				s.approveStep(st, args.HumanFeedback, who)
				approved = append(approved, st.ID)
			} else {
				s.rejectStep(st, args.HumanFeedback, who)
				s.replan(st, rejection(st, args.HumanFeedback))
			}
			s.advance()
			return nil
		}
		var open []*Step
		for _, st := range s.steps {
			if st.Status == Planned || st.Status == AwaitingFeedback {
				open = append(open, st)
			}
		}
		if len(open) == 0 {
			return conflict("no step of the plan waits for approval")
		}
		if args.Approved {
			for _, st := range open {
				s.approveStep(st, args.HumanFeedback, "")
				approved = append(approved, st.ID)
			}
			if args.HumanFeedback != "" {
				s.note(who, nil, args.HumanFeedback)
			}
			s.advance()
			return nil
		}
		for _, st := range open {
			s.rejectStep(st, args.HumanFeedback, "")
		}
		reason := "every step was rejected"
		if args.HumanFeedback != "" {
			reason += ": " + args.HumanFeedback
		}
		s.note(who, nil, orDefault(args.HumanFeedback, "Rejected every step."))
		s.failPlan(reason)
		return nil
	})
	if err != nil {
		return receipt(err)
	}
	if len(approved) > 0 {
		c.waitFor(ctx, id, seconds(args.Wait), func(v View) bool {
			if v.Plan.Status != InProgress || v.Plan.Planning {
				return true
			}
			for _, st := range v.Steps {
				if slices.Contains(approved, st.ID) && (st.Status == Approved || st.Status == ActionRequested) {
					return false
				}
			}
			return true
		})
	}
	return front.Receipt{SessionID: session, PlanID: id, StepID: args.StepID}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// update applies a person's updated_action to a step: the arguments of
// its action, or the text of a say.
func update(st *Step, action string) error {
	if action == "" {
		return nil
	}
	if st.Action == "say" {
		a, _ := json.Marshal(openai.SayArgs{Content: action})
		st.Args, st.Text, st.UpdatedAction = a, action, action
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(action), &obj); err != nil {
		return agency.InvalidArgsf("updated_action: for the action %s of %s it must be a JSON object of the action's arguments", st.Action, st.Agent)
	}
	st.Args, st.UpdatedAction = json.RawMessage(action), action
	return nil
}

func (s *state) approveStep(st *Step, feedback, who string) {
	st.HumanFeedback = feedback
	s.dirty[st] = true
	s.setStep(st, Approved, feedback)
	if feedback != "" && who != "" {
		s.note(who, st, feedback)
	}
}

func (s *state) rejectStep(st *Step, feedback, who string) {
	st.HumanFeedback = feedback
	s.dirty[st] = true
	s.setStep(st, Rejected, feedback)
	if who != "" {
		s.note(who, st, orDefault(feedback, "Rejected: "+st.Describe()))
	}
}

func rejection(st *Step, feedback string) string {
	if feedback == "" {
		return fmt.Sprintf("The person rejected step %d (%s) without a comment", st.Seq, st.Describe())
	}
	return fmt.Sprintf("The person rejected step %d (%s) with this feedback: %q", st.Seq, st.Describe(), feedback)
}

func (c *Coordinator) clarify(ctx context.Context, args front.Clarification) (front.Receipt, error) {
	id, err := c.find(ctx, args.UserID, args.PlanID, args.SessionID)
	if err != nil {
		return receipt(err)
	}
	who := sender(ctx)
	var session string
	err = c.update(ctx, id, false, func(s *state) error {
		session = s.plan.SessionID
		if s.plan.Status != AwaitingClarification {
			return conflict("the plan has no question waiting for an answer (it is %s)", s.plan.Status)
		}
		s.plan.ClarificationResponse = args.HumanClarification
		s.note(who, nil, args.HumanClarification)
		s.event(Clarified, nil, string(InProgress), args.HumanClarification)
		s.setPlan(InProgress, "")
		s.askPlanner("The person answered your question. Submit the plan again, taking the answer into account.", "clarified")
		return nil
	})
	if err != nil {
		return receipt(err)
	}
	c.waitFor(ctx, id, seconds(args.Wait), func(v View) bool { return !v.Plan.Planning })
	return front.Receipt{Status: "Clarification received", SessionID: session, PlanID: id}, nil
}

// view reads a plan and its steps.
func (c *Coordinator) view(ctx context.Context, id string) (View, error) {
	s, err := c.load(ctx, id)
	if err != nil {
		return View{}, err
	}
	if !s.exists {
		return View{}, errPlanGone
	}
	v := View{Plan: s.plan, Steps: make([]Step, len(s.steps))}
	for i, st := range s.steps {
		v.Steps[i] = *st
	}
	return v, nil
}

func (c *Coordinator) plans(ctx context.Context, q front.PlanQuery) ([]View, error) {
	if c.halted.Load() {
		return nil, errHalted
	}
	var ids []string
	if q.PlanID != "" || q.SessionID != "" {
		id, err := c.find(ctx, q.UserID, q.PlanID, q.SessionID)
		var r *refusal
		if errors.As(err, &r) {
			return []View{}, nil
		}
		if err != nil {
			return nil, err
		}
		ids = []string{id}
	} else {
		docs, err := c.st.List(ctx, store.Query{Kind: kindPlan, User: q.UserID, Newest: true, Limit: q.Limit})
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			ids = append(ids, d.ID)
		}
	}
	out := make([]View, 0, len(ids))
	for _, id := range ids {
		v, err := c.view(ctx, id)
		if errors.Is(err, errPlanGone) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// messageList is agent_messages' answer: a session's log, oldest first;
// Found is false when the person has no plan in that session.
type messageList struct {
	Found    bool      `json:"found"`
	Messages []Message `json:"messages"`
}

func (c *Coordinator) agentMessages(ctx context.Context, q front.MessageQuery) (messageList, error) {
	if c.halted.Load() {
		return messageList{}, errHalted
	}
	out := messageList{Messages: []Message{}}
	if _, err := c.st.Get(ctx, kindSession, sessionKey(q.UserID, q.SessionID)); errors.Is(err, store.ErrNotFound) {
		return out, nil
	} else if err != nil {
		return out, err
	}
	out.Found = true
	docs, err := c.st.List(ctx, store.Query{Kind: kindMessage, Session: q.SessionID, User: q.UserID})
	if err != nil {
		return out, err
	}
	for _, d := range docs {
		var m Message
		if err := json.Unmarshal(d.Body, &m); err != nil {
			return out, err
		}
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}

func listAs[T any](ctx context.Context, st store.Store, kind, user string) ([]T, []store.Doc, error) {
	docs, err := st.List(ctx, store.Query{Kind: kind, User: user})
	if err != nil {
		return nil, nil, err
	}
	out := make([]T, 0, len(docs))
	for _, d := range docs {
		var v T
		if err := json.Unmarshal(d.Body, &v); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", kind, d.ID, err)
		}
		out = append(out, v)
	}
	return out, docs, nil
}

func (c *Coordinator) documents(ctx context.Context, q front.UserQuery) (Documents, error) {
	var d Documents
	var err error
	if d.Sessions, _, err = listAs[Session](ctx, c.st, kindSession, q.UserID); err != nil {
		return d, err
	}
	if d.Plans, _, err = listAs[Plan](ctx, c.st, kindPlan, q.UserID); err != nil {
		return d, err
	}
	if d.Steps, _, err = listAs[Step](ctx, c.st, kindStep, q.UserID); err != nil {
		return d, err
	}
	if d.Messages, _, err = listAs[Message](ctx, c.st, kindMessage, q.UserID); err != nil {
		return d, err
	}
	return d, nil
}

// deleteDocuments deletes every document of the user in one transaction,
// read again after a conflict with a change under way.
func (c *Coordinator) deleteDocuments(ctx context.Context, q front.UserQuery) (front.Deleted, error) {
	if c.halted.Load() {
		return front.Deleted{}, errHalted
	}
	var gone []store.Doc
	err := store.ApplyRetrying(ctx, c.st, func(ctx context.Context) (store.Changes, error) {
		gone = gone[:0]
		for _, kind := range []string{kindSession, kindPlan, kindStep, kindMessage, kindLease} {
			docs, err := c.st.List(ctx, store.Query{Kind: kind, User: q.UserID})
			if err != nil {
				return store.Changes{}, err
			}
			gone = append(gone, docs...)
		}
		return store.Changes{Delete: gone}, nil
	})
	if err != nil || len(gone) == 0 {
		return front.Deleted{}, err
	}
	plans := map[string]bool{}
	for _, d := range gone {
		if d.Kind == kindPlan {
			plans[d.ID] = true
		}
	}
	for id := range plans {
		c.changed(id)
	}
	e := Event{Kind: PlansDeleted, UserID: q.UserID, Detail: fmt.Sprintf("%d documents", len(gone)), Time: time.Now().UTC()}
	c.log.Info("plan: "+string(e.Kind), "coordinator", c.id, "user_id", q.UserID, "detail", e.Detail)
	if c.cfg.observe != nil {
		c.cfg.observe(ctx, e)
	}
	return front.Deleted{Documents: len(gone)}, nil
}

func (c *Coordinator) agentTools(ctx context.Context, q front.UserQuery) ([]Tool, error) {
	tools := toolList(c.tools(ctx, false))
	if tools == nil {
		tools = []Tool{}
	}
	return tools, nil
}
