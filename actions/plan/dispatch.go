package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// HandleActionValue takes a step's answer: the step is completed and the
// plan goes on.
func (h hooks) HandleActionValue(ctx context.Context, m *agency.Message) {
	c := h.c
	stepID, _, ok := parseDispatchID(m.ParentID)
	if !ok || c.halted.Load() {
		return
	}
	reply := ""
	if raw, err := agency.Value[json.RawMessage](m); err == nil {
		reply = replyText(raw)
	}
	c.answered(ctx, stepID, m.From, reply, nil)
}

// HandleActionError takes a step's error: the step failed and the planner
// is asked to revise the plan.
func (h hooks) HandleActionError(ctx context.Context, m *agency.Message, err *agency.ActionError) {
	c := h.c
	stepID, _, ok := parseDispatchID(m.ParentID)
	if !ok || c.halted.Load() {
		return
	}
	if err == nil {
		err = &agency.ActionError{Type: agency.TypeActionFailed, Text: "an error without a text"}
	}
	c.answered(ctx, stepID, m.From, "", err)
}

// replyText is what a person reads of a value: a string as it is, anything
// else as JSON.
func replyText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// answered records the answer of step stepID's agent.
func (c *Coordinator) answered(ctx context.Context, stepID, from, reply string, fail *agency.ActionError) {
	d, err := c.st.Get(ctx, kindStep, stepID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			c.log.Error("plan: a step's answer could not be read", "coordinator", c.id, "step_id", stepID, "error", err)
		}
		return
	}
	err = c.update(ctx, d.Parent, false, func(s *state) error {
		st := s.step(stepID)
		if st == nil || st.Status != ActionRequested || from != st.Agent {
			return errStale // answered already, or not by its agent
		}
		s.dropLease(st.ID)
		if fail != nil {
			st.AgentReply = fail.Error()
			s.dirty[st] = true
			s.setStep(st, Failed, fail.Error())
			s.note(st.Agent, st, "Error: "+fail.Error())
			s.replan(st, fmt.Sprintf("Step %d (%s) failed: %s", st.Seq, st.Describe(), fail.Error()))
			return nil
		}
		st.AgentReply = reply
		s.dirty[st] = true
		s.setStep(st, Completed, "")
		s.note(st.Agent, st, reply)
		s.advance()
		return nil
	})
	if err != nil && !errors.Is(err, errStale) && !errors.Is(err, errPlanGone) && !errors.Is(err, errHalted) {
		c.log.Error("plan: a step's answer could not be recorded", "coordinator", c.id, "plan_id", d.Parent, "step_id", stepID, "error", err)
	}
}

var errStale = errors.New("plan: stale answer")

// sweepEvery is how often the sweeper looks for leases that ran out:
// a quarter of the lease, within bounds.
func (c *Coordinator) sweepEvery() time.Duration {
	return min(max(c.cfg.lease/4, 20*time.Millisecond), time.Minute)
}

// sweeper sends again, until ctx ends, what was sent and not answered
// within its lease: steps to their agents (with the same idempotency key)
// and requests to the planner.
func (c *Coordinator) sweeper(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.sweep(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("plan: sweep failed", "coordinator", c.id, "error", err)
		}
		t.Reset(c.sweepEvery())
	}
}

// sweep takes up each lease that ran out.
func (c *Coordinator) sweep(ctx context.Context) error {
	docs, err := c.st.List(ctx, store.Query{Kind: kindLease, Parent: c.id})
	if err != nil {
		return err
	}
	now := time.Now()
	for _, d := range docs {
		var l leaseDoc
		if err := json.Unmarshal(d.Body, &l); err != nil {
			return err
		}
		if now.Before(l.Until) {
			continue
		}
		err := c.update(ctx, l.PlanID, false, func(s *state) error {
			cur := s.leases[d.ID]
			if cur == nil || s.now.Before(cur.Until) {
				return errStale // taken up meanwhile
			}
			if l.StepID == "" {
				if !s.plan.Planning || s.finished() {
					s.dropLease(d.ID)
					return nil
				}
				s.askPlanner("The planner did not answer in time; this is the same request again.", "asked again")
				return nil
			}
			st := s.step(l.StepID)
			if st == nil || st.Status != ActionRequested {
				s.dropLease(d.ID)
				return nil
			}
			s.dispatch(st)
			return nil
		})
		if errors.Is(err, errPlanGone) {
			// The plan was deleted: so is its lease, unless the delete
			// raced the lease's creation.
			_ = c.st.Apply(ctx, store.Changes{Delete: []store.Doc{d}})
			continue
		}
		if err != nil && !errors.Is(err, errStale) {
			return err
		}
	}
	return nil
}
