package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// state is a plan as one change sees it: read from the store, changed in
// memory, and written back with the messages it implies in one Apply.
type state struct {
	c      *Coordinator
	ctx    context.Context
	now    time.Time
	plan   Plan
	exists bool // the plan was read from the store (else it is being created)
	steps  []*Step
	dirty  map[*Step]bool
	leases map[string]*leaseDoc // by lease id
	docs   []store.Doc          // new documents: messages, the session
	gone   []store.Doc          // documents to delete
	sends  []store.Outgoing
	events []Event
	err    error // the first error building the change
}

// leaseDoc is the deadline of something sent and not answered yet: a step
// sent to its agent, or the planner asked for a plan. The sweeper lists
// them (they are few) rather than every plan.
type leaseDoc struct {
	ID      string    `json:"-"`
	PlanID  string    `json:"plan_id"`
	StepID  string    `json:"step_id,omitempty"` // "" for the planner's
	Until   time.Time `json:"until"`
	Version int64     `json:"-"`
	put     bool
	drop    bool
}

func plannerLeaseID(planID string) string { return planID + "/planner" }

// errPlanGone is returned by update for a plan that is not (or no longer) in
// the store.
var errPlanGone = errors.New("plan: no such plan")

// update reads plan id, lets f change it, and writes the result with its
// messages in one transaction, again from a fresh read after a conflict
// (store.ApplyRetrying). With create set, a plan that does not exist is
// created (f fills it in); otherwise it is errPlanGone. An error from f
// writes nothing.
func (c *Coordinator) update(ctx context.Context, id string, create bool, f func(s *state) error) error {
	if c.halted.Load() {
		return errHalted
	}
	unlock := c.lockPlan(id)
	defer unlock()
	var s *state
	err := store.ApplyRetrying(ctx, c.st, func(ctx context.Context) (store.Changes, error) {
		var err error
		if s, err = c.load(ctx, id); err != nil {
			return store.Changes{}, err
		}
		if !s.exists && !create {
			return store.Changes{}, errPlanGone
		}
		if err := f(s); err != nil {
			return store.Changes{}, err
		}
		if s.err != nil {
			return store.Changes{}, s.err
		}
		changes, err := s.changes()
		if err != nil {
			return store.Changes{}, err
		}
		if c.halted.Load() {
			return store.Changes{}, errHalted
		}
		return changes, nil
	})
	if err != nil {
		return err
	}
	c.committed(ctx, s)
	return nil
}

// committed reports a change that is in the store and hands its messages
// to the relay.
func (c *Coordinator) committed(ctx context.Context, s *state) {
	if h := c.afterCommit; h != nil {
		h(s.events)
	}
	if len(s.sends) > 0 {
		c.wake()
	}
	c.changed(s.plan.ID)
	for _, e := range s.events {
		attrs := [...]slog.Attr{
			slog.String("coordinator", c.id), slog.String("plan_id", e.PlanID), slog.String("conversation", e.PlanID),
			slog.String("session_id", e.SessionID), slog.String("step_id", e.StepID),
			slog.String("status", e.Status), slog.String("detail", e.Detail), slog.Bool("auto_approved", true),
		}
		n := len(attrs)
		if !e.AutoApproved {
			n-- // said only of an automatic approval
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "plan: "+string(e.Kind), attrs[:n]...)
		agency.RecordEvent(ctx, "plan."+string(e.Kind), attrs[:n]...) // a span event, when traced
		if c.cfg.observe != nil {
			c.cfg.observe(ctx, e)
		}
	}
}

// load reads plan id, its steps and its leases.
func (c *Coordinator) load(ctx context.Context, id string) (*state, error) {
	s := &state{c: c, ctx: ctx, now: time.Now().UTC(), dirty: map[*Step]bool{}, leases: map[string]*leaseDoc{}}
	s.plan.ID = id
	d, err := c.st.Get(ctx, kindPlan, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s, nil
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(d.Body, &s.plan); err != nil {
		return nil, fmt.Errorf("plan %s: %w", id, err)
	}
	s.plan.Version, s.exists = d.Version, true
	steps, err := c.st.List(ctx, store.Query{Kind: kindStep, Parent: id})
	if err != nil {
		return nil, err
	}
	for _, d := range steps {
		st := new(Step)
		if err := json.Unmarshal(d.Body, st); err != nil {
			return nil, fmt.Errorf("step %s: %w", d.ID, err)
		}
		st.Version = d.Version
		s.steps = append(s.steps, st)
	}
	leases, err := c.st.List(ctx, store.Query{Kind: kindLease, Session: id})
	if err != nil {
		return nil, err
	}
	for _, d := range leases {
		l := &leaseDoc{ID: d.ID, Version: d.Version}
		if err := json.Unmarshal(d.Body, l); err != nil {
			return nil, fmt.Errorf("lease %s: %w", d.ID, err)
		}
		s.leases[d.ID] = l
	}
	return s, nil
}

// changes is what s writes: the plan (always, so that concurrent changes of
// one plan conflict), the steps it changed, its new documents, leases and
// messages.
func (s *state) changes() (store.Changes, error) {
	var ch store.Changes
	s.plan.Updated = s.now
	body, err := json.Marshal(&s.plan)
	if err != nil {
		return ch, err
	}
	ch.Put = append(ch.Put, store.Doc{Kind: kindPlan, ID: s.plan.ID, Session: s.plan.SessionID, User: s.plan.UserID, Version: s.plan.Version, Body: body})
	for _, st := range s.steps {
		if !s.dirty[st] {
			continue
		}
		st.Updated = s.now
		body, err := json.Marshal(st)
		if err != nil {
			return ch, err
		}
		ch.Put = append(ch.Put, store.Doc{Kind: kindStep, ID: st.ID, Parent: st.PlanID, Session: st.SessionID, User: st.UserID, Version: st.Version, Body: body})
	}
	ch.Put = append(ch.Put, s.docs...)
	for _, l := range s.leases {
		doc := store.Doc{Kind: kindLease, ID: l.ID, Parent: s.c.id, Session: l.PlanID, User: s.plan.UserID, Version: l.Version}
		switch {
		case l.drop && l.Version > 0:
			ch.Delete = append(ch.Delete, doc)
		case l.put && !l.drop:
			body, err := json.Marshal(l)
			if err != nil {
				return ch, err
			}
			doc.Body = body
			ch.Put = append(ch.Put, doc)
		}
	}
	ch.Delete = append(ch.Delete, s.gone...)
	ch.Send = s.sends
	return ch, nil
}

// event records an event for after the commit.
func (s *state) event(kind EventKind, step *Step, status, detail string) {
	e := Event{Kind: kind, PlanID: s.plan.ID, SessionID: s.plan.SessionID, UserID: s.plan.UserID, Status: status, Detail: detail, Time: s.now}
	if step != nil {
		e.StepID = step.ID
	}
	s.events = append(s.events, e)
}

// note adds an entry to the plan's log.
func (s *state) note(source string, step *Step, content string) {
	m := Message{ID: newID(), SessionID: s.plan.SessionID, UserID: s.plan.UserID, PlanID: s.plan.ID,
		Source: source, Content: content, Created: s.now}
	if step != nil {
		m.StepID = step.ID
	}
	body, err := json.Marshal(&m)
	if err != nil {
		s.fail(err)
		return
	}
	s.docs = append(s.docs, store.Doc{Kind: kindMessage, ID: m.ID, Parent: s.plan.ID, Session: m.SessionID, User: m.UserID, Body: body})
}

// fail keeps the first error that makes the change impossible to write.
func (s *state) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// send queues a message from the coordinator, sent after the commit.
func (s *state) send(m *agency.Message) {
	if s.ctx != nil {
		agency.CarryTrace(s.ctx, m) // the relay sends it in the trace of the change that made it
	}
	out, err := store.NewOutgoing(s.c.id, m)
	if err != nil {
		s.fail(err)
		return
	}
	s.sends = append(s.sends, out)
}

func (s *state) setStep(st *Step, status StepStatus, detail string) {
	if st.Status == status {
		return
	}
	st.Status = status
	s.dirty[st] = true
	s.event(StepStatusEvent, st, string(status), detail)
}

func (s *state) setPlan(status PlanStatus, detail string) {
	if s.plan.Status == status {
		return
	}
	s.plan.Status = status
	s.event(PlanStatusEvent, nil, string(status), detail)
}

func (s *state) lease(id, stepID string, d time.Duration) *leaseDoc {
	l := s.leases[id]
	if l == nil {
		l = &leaseDoc{ID: id, PlanID: s.plan.ID, StepID: stepID}
		s.leases[id] = l
	}
	l.Until, l.put, l.drop = s.now.Add(d), true, false
	return l
}

func (s *state) dropLease(id string) {
	if l := s.leases[id]; l != nil {
		l.drop = true
	}
}

func (s *state) step(id string) *Step {
	for _, st := range s.steps {
		if st.ID == id {
			return st
		}
	}
	return nil
}

// finished reports whether the plan will not change any more.
func (s *state) finished() bool {
	return s.plan.Status == PlanCompleted || s.plan.Status == PlanFailed
}

// advance moves the plan on after a change: it sends the next approved
// step to its agent, asks for the approval of the next planned one (or,
// when the AutoApprove function approves it, approves and sends it), or
// completes the plan when no step is left.
func (s *state) advance() {
	if s.finished() || s.plan.Status == AwaitingClarification {
		return
	}
	for _, st := range s.steps {
		switch {
		case st.Status == Completed || st.Status == Superseded || ((st.Status == Rejected || st.Status == Failed) && st.Replaced):
			continue
		case st.Status == Approved:
			s.dispatch(st)
			return
		case st.Status == Planned:
			ok, why := s.c.autoApproves(s, st)
			if !ok {
				s.setStep(st, AwaitingFeedback, why)
				return
			}
			s.autoApprove(st)
			s.dispatch(st)
			return
		default: // running, awaiting feedback, or rejected or failed and not replaced yet
			return
		}
	}
	if s.plan.Planning || len(s.steps) == 0 {
		return
	}
	s.setPlan(PlanCompleted, "")
	s.note(s.c.id, nil, "All steps of the plan are completed.")
}

// autoApproves asks the AutoApprove function, if any, about st. It gets a
// copy of the step; a panic counts as false, and why says so for the
// event of the step's awaiting_feedback.
func (c *Coordinator) autoApproves(s *state, st *Step) (ok bool, why string) {
	if c.cfg.auto == nil {
		return false, ""
	}
	cp := *st
	cp.Args = bytes.Clone(st.Args)
	defer func() {
		if r := recover(); r != nil {
			ok, why = false, fmt.Sprintf("the AutoApprove function panicked (%v): a person is asked", r)
			c.log.LogAttrs(s.ctx, slog.LevelError, "plan: the AutoApprove function panicked; the step waits for a person",
				slog.String("coordinator", c.id), slog.String("plan_id", s.plan.ID), slog.String("conversation", s.plan.ID),
				slog.String("session_id", s.plan.SessionID), slog.String("step_id", st.ID),
				slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	return c.cfg.auto(cp), ""
}

// autoApprove approves st in the coordinator's name: no person did.
func (s *state) autoApprove(st *Step) {
	st.AutoApproved = true
	s.dirty[st] = true
	n := len(s.events)
	s.setStep(st, Approved, "approved automatically")
	for i := n; i < len(s.events); i++ {
		s.events[i].AutoApproved = true
	}
	s.note(s.c.id, st, fmt.Sprintf("Step %d approved automatically (no person was asked): %s", st.Seq, st.Describe()))
}

// dispatchID is the message id of the attempt'th sending of step id, so
// that an answer names its step and a resend of one attempt keeps its id.
func dispatchID(stepID string, attempt int) string {
	return stepID + "/" + strconv.Itoa(attempt)
}

// parseDispatchID is the inverse of dispatchID.
func parseDispatchID(id string) (stepID string, attempt int, ok bool) {
	i := strings.LastIndexByte(id, '/')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 1 {
		return "", 0, false
	}
	return id[:i], n, true
}

// dispatch sends st to its agent, with its id as the idempotency key.
func (s *state) dispatch(st *Step) {
	st.Attempts++
	s.dirty[st] = true
	args := st.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	s.send(&agency.Message{
		ID: dispatchID(st.ID, st.Attempts), To: st.Agent, Action: st.Action, Args: args,
		Meta: map[string]any{"idempotency_key": st.ID, "conversation": s.plan.ID},
	})
	s.lease(st.ID, st.ID, s.c.cfg.lease)
	if st.Status != ActionRequested {
		s.setStep(st, ActionRequested, "")
		s.note(s.c.id, st, fmt.Sprintf("Requesting %s to perform action: %s", spaced(st.Agent), st.Describe()))
	}
	s.event(StepDispatched, st, string(ActionRequested), "attempt "+strconv.Itoa(st.Attempts))
}

// spaced writes an agent id as MACAE's page does: "HrAgent" as "Hr Agent".
func spaced(id string) string {
	var b strings.Builder
	for i, r := range id {
		if i > 0 && r >= 'A' && r <= 'Z' {
			p := id[i-1]
			if p >= 'a' && p <= 'z' {
				b.WriteByte(' ')
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// finishPlan fails the plan with a reason.
func (s *state) failPlan(reason string) {
	s.plan.Reason = reason
	s.plan.Planning = false
	s.dropLease(plannerLeaseID(s.plan.ID))
	s.setPlan(PlanFailed, reason)
	s.note(s.c.id, nil, "The plan failed: "+reason)
}

// replan asks the planner to revise the plan from step st, which a person
// rejected or its agent failed, or fails the plan once the replans are
// used up.
func (s *state) replan(st *Step, why string) {
	if s.plan.Replans >= s.c.cfg.maxReplans {
		s.failPlan(fmt.Sprintf("%s, and the plan was revised %d times already (the limit)", why, s.plan.Replans))
		return
	}
	s.plan.Replans++
	s.askPlanner(fmt.Sprintf("%s.\nRevise the plan from step %d on: submit the new steps with replace_from %d.", why, st.Seq, st.Seq), "replan")
}

// askPlanner says text to the planner in the plan's conversation, and
// waits (without blocking) for its submit_plan.
func (s *state) askPlanner(intro, why string) {
	text := s.c.plannerText(s, intro)
	id := newID()
	s.plan.Planning, s.plan.PlannerAsk = true, id
	s.send(&agency.Message{ID: id, To: s.c.cfg.planner, Action: "say", NoReply: true,
		Args: openai.SayArgs{Content: text}, Meta: map[string]any{"conversation": s.plan.ID}})
	// A planner that is slow rather than gone has each request waiting
	// behind the last: ask again later each time.
	s.lease(plannerLeaseID(s.plan.ID), "", s.c.cfg.lease<<min(s.plan.Asks, 4))
	s.plan.Asks++
	s.event(PlannerAsked, nil, string(s.plan.Status), why)
}
