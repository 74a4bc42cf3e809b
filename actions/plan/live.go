package plan

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/seed72275b23/agency-go/actions/plan/internal/front"
	"github.com/seed72275b23/agency-go/agency"
)

// Live parts: a step is sent to its agent as a stream (agency.Agent.Stream),
// so that the parts its handler emits (agency.Emit) reach the people who
// watch the plan (watch_plan, served by planhttp as server-sent events)
// while the step runs. Parts are shown, never stored: the step's record is
// its answer, taken as before.

// Bounds of what the coordinator holds for live parts.
const (
	// maxKeptParts and maxKeptBytes bound the parts kept per running step
	// for a watcher that comes late: the newest, within both bounds.
	maxKeptParts = 256
	maxKeptBytes = 64 << 10
	// maxPartText bounds the text of one part as it is shown.
	maxPartText = 16 << 10
	// maxStreams bounds the steps followed as streams at once; a step sent
	// beyond it is sent without asking for parts, as before.
	maxStreams = 1024
	// maxWatchers bounds the watch_plan calls served at once (each holds
	// one of the coordinator's 64 handlers while it lasts).
	maxWatchers = 32
	// watcherBuffer is how many events a watcher may fall behind by
	// before it is let go (it watches again, and gets the kept parts).
	watcherBuffer = 256
)

// live is what a coordinator holds for live parts: the running steps'
// parts and the watchers of each plan.
type live struct {
	mu       sync.Mutex
	plans    map[string]*livePlan // by plan id
	streams  map[string]bool      // the dispatch message ids followed as streams
	watchers int
	closed   bool // the coordinator is leaving: no watcher is taken
}

type livePlan struct {
	steps map[string]*liveStep
	subs  map[*watcher]struct{}
}

// liveStep is the parts kept of one running step: parts[i] is part
// first+i.
type liveStep struct {
	parts []front.LiveEvent
	bytes int
}

// watcher is one watch_plan call's subscription.
type watcher struct {
	ch chan front.LiveEvent // closed when it is let go
}

func (l *live) plan(id string) *livePlan {
	if l.plans == nil {
		l.plans = map[string]*livePlan{}
	}
	p := l.plans[id]
	if p == nil {
		p = &livePlan{steps: map[string]*liveStep{}, subs: map[*watcher]struct{}{}}
		l.plans[id] = p
	}
	return p
}

// tidy forgets plan id once nothing of it is held; l.mu is held.
func (l *live) tidy(id string) {
	if p := l.plans[id]; p != nil && len(p.steps) == 0 && len(p.subs) == 0 {
		delete(l.plans, id)
	}
}

// publish sends e to the watchers of plan p; one that is full is let go.
// l.mu is held.
func (p *livePlan) publish(e front.LiveEvent) {
	for w := range p.subs {
		select {
		case w.ch <- e:
		default:
			delete(p.subs, w)
			close(w.ch)
		}
	}
}

// follow notes that message id is followed as a stream; false when it is
// already, or when too many are.
func (l *live) follow(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[id] || len(l.streams) >= maxStreams {
		return false
	}
	if l.streams == nil {
		l.streams = map[string]bool{}
	}
	l.streams[id] = true
	return true
}

// part keeps and shows part seq of step stepID of plan planID.
func (l *live) part(planID, stepID string, seq int, text string) {
	if len(text) > maxPartText {
		text = text[:maxPartText] + "…"
	}
	e := front.LiveEvent{Kind: front.LivePart, StepID: stepID, Seq: seq, Text: text}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.plan(planID)
	st := p.steps[stepID]
	if st == nil {
		st = &liveStep{}
		p.steps[stepID] = st
	}
	st.parts = append(st.parts, e)
	st.bytes += len(text)
	n := 0
	for len(st.parts)-n > maxKeptParts || (st.bytes > maxKeptBytes && len(st.parts)-n > 1) {
		st.bytes -= len(st.parts[n].Text)
		n++
	}
	if n > 0 {
		st.parts = append(st.parts[:0:0], st.parts[n:]...)
	}
	p.publish(e)
}

// end forgets the stream of message id, step stepID of plan planID: its
// parts are dropped, and the watchers told.
func (l *live) end(id, planID, stepID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.streams[id] {
		return // ended already
	}
	delete(l.streams, id)
	p := l.plans[planID]
	if p == nil {
		return
	}
	delete(p.steps, stepID)
	p.publish(front.LiveEvent{Kind: front.LiveStepEnd, StepID: stepID})
	l.tidy(planID)
}

// watch subscribes to plan id: it returns the parts kept of its running
// steps and the subscription, or nil when too many watch or the
// coordinator is leaving.
func (l *live) watch(id string) ([]front.LiveEvent, *watcher) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.watchers >= maxWatchers {
		return nil, nil
	}
	l.watchers++
	p := l.plan(id)
	var kept []front.LiveEvent
	for _, st := range p.steps {
		kept = append(kept, st.parts...)
	}
	w := &watcher{ch: make(chan front.LiveEvent, watcherBuffer)}
	p.subs[w] = struct{}{}
	return kept, w
}

// unwatch ends w's subscription to plan id.
func (l *live) unwatch(id string, w *watcher) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watchers--
	if p := l.plans[id]; p != nil {
		if _, ok := p.subs[w]; ok {
			delete(p.subs, w)
			close(w.ch)
		}
	}
	l.tidy(id)
}

// open lets watchers in (the coordinator is in a space); close lets every
// watcher go and takes no more (it is leaving).
func (l *live) open() {
	l.mu.Lock()
	l.closed = false
	l.mu.Unlock()
}

func (l *live) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for id, p := range l.plans {
		for w := range p.subs {
			delete(p.subs, w)
			close(w.ch)
		}
		l.tidy(id)
	}
}

// relaySend is the relay's RelayConfig.Send: a step goes to its agent as a
// stream, followed by a goroutine of its own that shows its parts and
// records its answer; anything else (the planner's messages), a step
// already followed, or one beyond maxStreams is forwarded as before.
//
// The send returns once the space has taken the step (or refused it, as
// Forward would), so that the outbox marks it sent as before. The
// stream's context is not the relay's: stopping the relay (the
// coordinator leaving) does not stop the step's handler; the stream ends
// with its answer, or when the coordinator's agent leaves the space.
func (c *Coordinator) relaySend(ctx context.Context, a *agency.Agent, m *agency.Message) error {
	stepID, _, ok := parseDispatchID(m.ID)
	planID, _ := m.Meta["conversation"].(string)
	if !ok || planID == "" || m.NoReply || !c.live.follow(m.ID) {
		_, err := a.Forward(ctx, m)
		return err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The relay stops before the step has gone: so does the stream.
	stopEarly := context.AfterFunc(ctx, cancel)
	sent := make(chan error, 1)
	go c.followStep(sctx, cancel, a, m, planID, stepID, func(err error) {
		if err == nil {
			stopEarly()
		}
		sent <- err
	})
	return <-sent
}

// followStep reads the stream of step stepID sent as m: its parts go to
// the plan's watchers, its answer is recorded as the hooks record an
// answer that was not streamed. Any other end (the coordinator leaving,
// the agent's process gone, a lost part) records nothing: the step's lease
// runs out and it is sent again, as when an answer is lost.
func (c *Coordinator) followStep(ctx context.Context, cancel context.CancelFunc, a *agency.Agent, m *agency.Message, planID, stepID string, sent func(error)) {
	defer cancel()
	defer c.live.end(m.ID, planID, stepID)
	to := m.To
	// The step runs whatever becomes of this stream, as a step forwarded
	// did: its stream ends with the coordinator, and its answer then goes
	// to the hooks (of the coordinator that is back, say).
	for r, err := range a.StreamMessage(ctx, m, agency.StreamSent(sent), agency.StreamCancel(false)) {
		if err != nil {
			var ae *agency.ActionError
			if errors.As(err, &ae) && ctx.Err() == nil && !c.halted.Load() {
				c.live.end(m.ID, planID, stepID)
				c.answered(ctx, stepID, to, "", ae)
			}
			return
		}
		raw, verr := agency.Value[json.RawMessage](r)
		text := ""
		if verr == nil {
			text = replyText(raw)
		}
		if r.Action == agency.PartAction {
			c.live.part(planID, stepID, int(r.Seq), text)
			continue
		}
		// The watchers hear that the stream ended before the plan
		// changes with the answer.
		c.live.end(m.ID, planID, stepID)
		if !c.halted.Load() {
			c.answered(ctx, stepID, r.From, text, nil)
		}
	}
}

// watchPlan emits the parts of the plan's running steps as they come,
// after those kept of them, until the plan is finished or the caller
// stops reading. Only an approver may call it, for a plan of the user it
// names: the rule of plans.
func (c *Coordinator) watchPlan(ctx context.Context, q front.Watch) (front.Receipt, error) {
	if c.halted.Load() {
		return front.Receipt{}, errHalted
	}
	id, err := c.find(ctx, q.UserID, q.PlanID, q.PlanID)
	if err != nil {
		return receipt(err)
	}
	finished := func() (bool, error) {
		d, err := c.st.Get(ctx, kindPlan, id)
		if err != nil {
			return false, err
		}
		var p Plan
		if err := json.Unmarshal(d.Body, &p); err != nil {
			return false, err
		}
		return p.Status == PlanCompleted || p.Status == PlanFailed, nil
	}
	changed := c.changes(id)
	if fin, err := finished(); err != nil {
		return receipt(err)
	} else if fin {
		return front.Receipt{Status: front.WatchFinished, PlanID: id}, nil
	}
	kept, w := c.live.watch(id)
	if w == nil {
		return front.Receipt{Status: "too many people watch plans now; try again later", Refused: front.RefusedBusy}, nil
	}
	defer c.live.unwatch(id, w)
	if err := agency.Emit(ctx, front.LiveEvent{Kind: front.LiveOpen, PlanID: id}); err != nil {
		return front.Receipt{}, err
	}
	for _, e := range kept {
		if err := agency.Emit(ctx, e); err != nil {
			return front.Receipt{}, err
		}
	}
	// pass emits e, the next event from w; done when w was dropped (its
	// watcher fell behind) or the caller stopped reading, with what to
	// return then.
	pass := func(e front.LiveEvent, ok bool) (r front.Receipt, done bool, err error) {
		if !ok {
			return front.Receipt{Status: front.WatchAgain, PlanID: id}, true, nil
		}
		if err := agency.Emit(ctx, e); err != nil {
			return front.Receipt{}, true, err
		}
		return front.Receipt{}, false, nil
	}
	// The plan is read again at each change made here, and every second
	// for a change made by another replica.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case e, ok := <-w.ch:
			if r, done, err := pass(e, ok); done {
				return r, err
			}
			continue
		case <-changed:
			changed = c.changes(id)
		case <-tick.C:
		case <-ctx.Done():
			return front.Receipt{}, ctx.Err()
		}
		if fin, err := finished(); err != nil {
			return receipt(err)
		} else if fin {
			for { // what came before the end
				select {
				case e, ok := <-w.ch:
					if r, done, err := pass(e, ok); done {
						return r, err
					}
				default:
					return front.Receipt{Status: front.WatchFinished, PlanID: id}, nil
				}
			}
		}
	}
}
