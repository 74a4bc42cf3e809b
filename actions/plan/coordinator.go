package plan

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// Coordinator is the agent that runs plans: MACAE's group chat manager.
// It takes tasks from the agents that speak for people, has the planner
// turn each into steps, asks for each step's approval, sends approved steps
// to their agents one after the other, and has the planner revise the plan
// when a person rejects a step or a step fails.
//
// Every change of a plan is one store transaction together with the
// messages it implies (an outbox), so a plan survives a restart at any
// point: what was committed but not sent is sent when the coordinator is
// back in a space, and a step sent but not answered within its lease is sent
// again with the same idempotency key (see Idempotent). A plan waits for a
// person without a time limit.
//
// Its actions:
//
//   - input_task, human_feedback, approve_step_or_steps,
//     human_clarification_on_plan, plans, watch_plan, agent_messages,
//     documents, delete_documents, agent_tools: for the approvers (see Approver),
//     which name the user in each call; hidden from everyone else;
//   - submit_plan and say: for the planner (see Planner).
//
// Several coordinators may share a store (with different ids), and
// replicas of one coordinator may run against one PostgreSQL store:
// each change is a compare-and-set on the plan's document.
type Coordinator struct {
	id    string
	st    store.Store
	cfg   config
	agent *agency.Agent
	log   *slog.Logger

	mu      sync.Mutex
	locks   map[string]*planLock     // per plan, so that one process does not race itself
	watch   map[string]chan struct{} // closed when the plan changes
	relay   *store.Relay             // while in a space
	stop    context.CancelFunc       // stops the sweeper
	swept   chan struct{}            // closed when the sweeper has stopped
	catalog map[string]map[string]agency.ActionHelp
	caught  time.Time // when catalog was surveyed
	live    live      // the parts of running steps, for watch_plan

	halted atomic.Bool
	// afterCommit, for tests, runs after each committed change, before
	// its messages are handed to the relay.
	afterCommit func(events []Event)
}

type planLock struct {
	mu sync.Mutex
	n  int
}

// catalogTTL is how long a survey of the team's actions is used.
const catalogTTL = 10 * time.Second

// NewCoordinator returns a coordinator with the given id (MACAE's is
// "GroupChatManager") that keeps its plans in st. Add its Agent to a space
// with the planner, the approvers and the team.
func NewCoordinator(id string, st store.Store, opts ...Option) (*Coordinator, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: plan: nil store", agency.ErrInvalidOption)
	}
	cfg := config{set: map[string]bool{}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: plan: nil option", agency.ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.planner == "" {
		cfg.planner = DefaultPlanner
	}
	if cfg.approvers == nil {
		cfg.approvers = []string{DefaultApprover}
	}
	if !cfg.set["MaxReplans"] {
		cfg.maxReplans = DefaultMaxReplans
	}
	if cfg.lease == 0 {
		cfg.lease = DefaultLease
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	if slices.Contains(cfg.approvers, cfg.planner) || cfg.planner == id || slices.Contains(cfg.approvers, id) {
		return nil, fmt.Errorf("%w: plan: the coordinator, the planner and the approvers need ids of their own", agency.ErrInvalidOption)
	}
	c := &Coordinator{
		id: id, st: st, cfg: cfg, log: cfg.logger,
		locks: map[string]*planLock{}, watch: map[string]chan struct{}{},
	}
	a, err := agency.NewAgent(id, append([]agency.Option{agency.Concurrency(64), agency.Hooks(hooks{c}), agency.Logger(cfg.logger)}, cfg.agentOpts...)...)
	if err != nil {
		return nil, err
	}
	c.agent = a

	approvers := map[string]agency.Access{}
	for _, id := range cfg.approvers {
		approvers[id] = agency.Permitted
	}
	front := agency.AccessBySender(approvers, agency.Denied)
	planner := agency.AccessBySender(map[string]agency.Access{cfg.planner: agency.Permitted}, agency.Denied)
	regs := []error{
		agency.Register(a, "input_task", c.inputTask, front,
			agency.Describe("Make a plan for a person's task: the planner is asked, and each step waits for the person's approval"),
			agency.Returns("what was done, with the plan's and the session's ids")),
		agency.Register(a, "human_feedback", c.humanFeedback, front,
			agency.Describe("Approve or reject a step of a plan, with the person's comment; a rejection has the planner revise the plan")),
		agency.Register(a, "approve_step_or_steps", c.approve, front,
			agency.Describe("Approve or reject a step, or without step_id every step that has not run (a rejection of all fails the plan)")),
		agency.Register(a, "human_clarification_on_plan", c.clarify, front,
			agency.Describe("Answer the planner's question about a plan")),
		agency.Register(a, "plans", c.plans, front,
			agency.Describe("A person's plans with their steps: one by plan or session id, or all, newest first")),
		agency.Register(a, "agent_messages", c.agentMessages, front,
			agency.Describe("The log of a person's session, oldest first")),
		agency.Register(a, "documents", c.documents, front,
			agency.Describe("Every document of a person: sessions, plans, steps, messages")),
		agency.Register(a, "delete_documents", c.deleteDocuments, front,
			agency.Describe("Delete every document of a person")),
		agency.Register(a, "watch_plan", c.watchPlan, front,
			agency.Describe("Watch a person's plan: the parts of the answers of its steps as they run (ask for them with a stream), until the plan is finished"),
			agency.Returns("why the watch ended: finished, or again (watch again)")),
		agency.Register(a, "agent_tools", c.agentTools, front,
			agency.Describe("The actions steps may use, as their agents' help describes them")),
		agency.Register(a, "submit_plan", c.submitPlan, planner,
			agency.Describe("Submit the plan for the task you were given, or a revised plan: the steps, each one action of one agent with its arguments. "+
				"Call it in the conversation of the plan. Each step is approved (by a person, or by a rule for a step that needs none) before it runs."),
			agency.Returns("accepted, and the number of steps"),
			agency.Example(SubmitPlan{Steps: []StepSpec{{Agent: "HrAgent", Action: "create_employee_record", Args: []byte(`{"name":"Jessica Smith"}`)}}, Summary: "Onboard Jessica Smith"})),
		agency.Register(a, "say", c.say, planner,
			agency.Describe("Tell the coordinator something about the plan of this conversation")),
	}
	if err := errors.Join(regs...); err != nil {
		return nil, err
	}
	return c, nil
}

// Agent returns the agent to add to a space.
func (c *Coordinator) Agent() *agency.Agent { return c.agent }

// hooks holds the coordinator's hook methods, so that they are no part of
// the Coordinator's API.
type hooks struct{ c *Coordinator }

// AfterAdd starts the relay of the outbox, which sends what was committed
// and not sent (after a restart, too), and the sweeper, which sends again
// what went unanswered for a lease.
func (h hooks) AfterAdd(ctx context.Context) {
	c := h.c
	relay := store.NewRelay(c.st, c.agent, store.RelayConfig{Logger: c.log, Lease: min(c.cfg.lease, 10*time.Second), Send: c.relaySend})
	c.live.open()
	runCtx, stop := context.WithCancel(context.Background())
	swept := make(chan struct{})
	c.mu.Lock()
	c.relay, c.stop, c.swept = relay, stop, swept
	c.mu.Unlock()
	relay.Start()
	go c.sweeper(runCtx, swept)
}

// BeforeRemove stops the relay and the sweeper.
func (h hooks) BeforeRemove(ctx context.Context) {
	c := h.c
	c.mu.Lock()
	relay, stop, swept := c.relay, c.stop, c.swept
	c.relay, c.stop, c.swept = nil, nil, nil
	c.mu.Unlock()
	c.live.close()
	if stop != nil {
		stop()
		<-swept
	}
	if relay != nil {
		relay.Stop()
	}
}

// halt makes the coordinator act as if its process had died: it stops
// sending and ignores every message from now on (tests of restarts).
func (c *Coordinator) halt() {
	c.halted.Store(true)
	c.mu.Lock()
	relay, stop := c.relay, c.stop
	c.mu.Unlock()
	c.live.close()
	if stop != nil {
		stop()
	}
	if relay != nil {
		relay.Stop()
	}
}

var errHalted = errors.New("plan: the coordinator has stopped")

func (c *Coordinator) wake() {
	c.mu.Lock()
	r := c.relay
	c.mu.Unlock()
	if r != nil && !c.halted.Load() {
		r.Wake()
	}
}

// lockPlan serializes the changes of one plan within the process.
func (c *Coordinator) lockPlan(id string) func() {
	c.mu.Lock()
	l := c.locks[id]
	if l == nil {
		l = &planLock{}
		c.locks[id] = l
	}
	l.n++
	c.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.mu.Lock()
		if l.n--; l.n == 0 {
			delete(c.locks, id)
		}
		c.mu.Unlock()
	}
}

// changed wakes whoever waits for plan id to change.
func (c *Coordinator) changed(id string) {
	c.mu.Lock()
	if ch := c.watch[id]; ch != nil {
		close(ch)
		delete(c.watch, id)
	}
	c.mu.Unlock()
}

// changes returns a channel closed at the next change of plan id.
func (c *Coordinator) changes(id string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.watch[id]
	if ch == nil {
		ch = make(chan struct{})
		c.watch[id] = ch
	}
	return ch
}

// waitFor waits until done holds for plan id, for at most d, re-reading
// the plan at each change made here and every second (for changes made by
// another replica).
func (c *Coordinator) waitFor(ctx context.Context, id string, d time.Duration, done func(v View) bool) {
	if d <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if c.halted.Load() {
			return
		}
		ch := c.changes(id)
		v, err := c.view(ctx, id)
		if err != nil || done(v) {
			return
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// tools returns the team's actions, surveyed at most catalogTTL ago unless
// fresh is set.
func (c *Coordinator) tools(ctx context.Context, fresh bool) map[string]map[string]agency.ActionHelp {
	c.mu.Lock()
	if !fresh && c.catalog != nil && time.Since(c.caught) < catalogTTL {
		cat := c.catalog
		c.mu.Unlock()
		return cat
	}
	c.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	found, err := agency.Survey(sctx, c.agent)
	cancel()
	if err != nil && len(found) == 0 {
		c.log.Warn("plan: the team's actions could not be surveyed", "coordinator", c.id, "error", err)
	}
	cat := make(map[string]map[string]agency.ActionHelp)
	for agent, actions := range found {
		if c.cfg.team != nil && !slices.Contains(c.cfg.team, agent) {
			continue
		}
		if c.cfg.team == nil && (agent == c.cfg.planner || slices.Contains(c.cfg.approvers, agent)) {
			continue
		}
		cat[agent] = actions
	}
	c.mu.Lock()
	c.catalog, c.caught = cat, time.Now()
	c.mu.Unlock()
	return cat
}

// toolList flattens a catalog, sorted by agent and action.
func toolList(cat map[string]map[string]agency.ActionHelp) []Tool {
	var out []Tool
	for _, agent := range slices.Sorted(maps.Keys(cat)) {
		actions := cat[agent]
		names := slices.Collect(maps.Keys(actions))
		sort.Strings(names)
		for _, name := range names {
			h := actions[name]
			out = append(out, Tool{Agent: agent, Action: name, Description: h.Description, Args: h.Args})
		}
	}
	return out
}

// newID returns a random id in the form of a UUID: never a number.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("plan: no randomness: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
