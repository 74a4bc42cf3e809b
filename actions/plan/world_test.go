package plan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// waitTimeout is a safety net for every wait of these tests.
const waitTimeout = 20 * time.Second

// The agent ids of MACAE.
const (
	coordID   = "GroupChatManager"
	plannerID = "PlannerAgent"
	humanID   = "HumanAgent"
	submit    = "GroupChatManager__submit_plan"
)

// Arguments of the specialists' actions.
type Person struct {
	Name string `json:"name" validate:"min=1" jsonschema:"description=the employee's full name"`
}
type Orientation struct {
	Name string `json:"name" validate:"min=1"`
	Date string `json:"date" validate:"min=10,max=10" jsonschema:"description=YYYY-MM-DD"`
}

// runs counts the executions of the specialists' handlers across rebuilds.
type runs struct {
	mu    sync.Mutex
	calls []call
	// after, when set, runs after each call (with its idempotency key),
	// outside the idempotent wrapper.
	after func(action, key string)
}

type call struct {
	Action, Args, Key string
}

func (r *runs) add(ctx context.Context, action string, args any) {
	b, _ := json.Marshal(args)
	key, _ := agency.MessageFrom(ctx).Meta["idempotency_key"].(string)
	r.mu.Lock()
	r.calls = append(r.calls, call{action, string(b), key})
	r.mu.Unlock()
}

func (r *runs) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// count returns how often action ran with idempotency key key.
func (r *runs) count(action, key string) int {
	n := 0
	for _, c := range r.all() {
		if c.Action == action && c.Key == key {
			n++
		}
	}
	return n
}

// handle registers an action that counts its runs, wrapped by Idempotent.
func handle[A any](r *runs, st store.Store, a *agency.Agent, name string, reply func(A) string) {
	inner := plan.Idempotent(st, func(ctx context.Context, args A) (string, error) {
		r.add(ctx, name, args)
		return reply(args), nil
	})
	agency.Handle(a, name, func(ctx context.Context, args A) (string, error) {
		v, err := inner(ctx, args)
		r.mu.Lock()
		after := r.after
		r.mu.Unlock()
		if after != nil {
			key, _ := agency.MessageFrom(ctx).Meta["idempotency_key"].(string)
			after(name, key)
		}
		return v, err
	}, agency.AccessBySender(map[string]agency.Access{coordID: agency.Permitted}, agency.Denied),
		agency.Describe("Does "+strings.ReplaceAll(name, "_", " ")))
}

// specialists returns HrAgent and TechSupportAgent.
func specialists(r *runs, st store.Store) []*agency.Agent {
	hr := agency.MustNewAgent("HrAgent")
	handle(r, st, hr, "create_employee_record", func(p Person) string { return "Employee record created for " + p.Name })
	handle(r, st, hr, "schedule_orientation", func(o Orientation) string { return "Orientation for " + o.Name + " on " + o.Date })
	handle(r, st, hr, "assign_buddy", func(p Person) string { return "Buddy assigned to " + p.Name })
	tech := agency.MustNewAgent("TechSupportAgent")
	handle(r, st, tech, "set_up_laptop", func(p Person) string { return "Laptop ready for " + p.Name })
	return []*agency.Agent{hr, tech}
}

// world is the program of the scenario on space.Local and SQLite, with
// the HTTP API on an httptest server. rebuild builds every agent again
// on a new space with the same file, as a restarted process does.
type world struct {
	t      *testing.T
	path   string
	open   func() (store.Store, error) // the store of each build; SQLite at path unless set
	opts   []plan.Option
	hopts  []planhttp.Option
	pl     *openaitest.Server
	runs   *runs
	srv    *httptest.Server
	events chan plan.Event

	mu      sync.Mutex
	seen    []plan.Event // every event of every build, in order
	handler http.Handler
	st      store.Store
	sp      *space.Local
	coord   *plan.Coordinator
	planner *openai.Agent
	gw      *agency.Agent
}

func newWorld(t *testing.T, opts []plan.Option, hopts []planhttp.Option, script ...openaitest.Step) *world {
	return newWorldOn(t, nil, opts, hopts, script...)
}

// newWorldOn is newWorld on the store open returns at each build (a
// restart opens it again); nil is a SQLite file.
func newWorldOn(t *testing.T, open func() (store.Store, error), opts []plan.Option, hopts []planhttp.Option, script ...openaitest.Step) *world {
	w := &world{t: t, path: filepath.Join(t.TempDir(), "plans.db"), open: open, opts: opts, hopts: hopts,
		pl: openaitest.NewServer(t, script...), runs: &runs{}, events: make(chan plan.Event, 1024)}
	if w.open == nil {
		w.open = func() (store.Store, error) { return sqlitestore.Open(context.Background(), w.path) }
	}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		h := w.handler
		w.mu.Unlock()
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.srv.Close)
	w.build()
	t.Cleanup(w.stop)
	return w
}

// build opens the store and adds every agent to a new space.
func (w *world) build() {
	t := w.t
	ctx := context.Background()
	st, err := w.open()
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]plan.Option{plan.Observe(func(_ context.Context, e plan.Event) {
		w.mu.Lock()
		w.seen = append(w.seen, e)
		w.mu.Unlock()
		select {
		case w.events <- e:
		default:
		}
	})}, w.opts...)
	coord, err := plan.NewCoordinator(coordID, st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.coord = coord // before it joins the space, for hooks that halt the current one
	w.mu.Unlock()
	planner, err := openai.New(plannerID, openai.BaseURL(w.pl.URL), openai.APIKey("test"), openai.HTTPClient(w.pl.Client()),
		openai.SystemPrompt(plan.PlannerPrompt))
	if err != nil {
		t.Fatal(err)
	}
	gw := agency.MustNewAgent(humanID)
	sp := space.NewLocal()
	for _, a := range append([]*agency.Agent{coord.Agent(), planner.Agent(), gw}, specialists(w.runs, st)...) {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	h, err := planhttp.Handler(gw, coordID, w.hopts...)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.handler, w.st, w.sp, w.coord, w.planner, w.gw = h, st, sp, coord, planner, gw
	w.mu.Unlock()
}

// current returns the coordinator of the latest build; hooks that run
// while a build is under way call it.
func (w *world) current() *plan.Coordinator {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.coord
}

// history returns the events of every build so far that match accepts.
func (w *world) history(match func(plan.Event) bool) []plan.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []plan.Event
	for _, e := range w.seen {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// stop closes the space and the store.
func (w *world) stop() {
	w.mu.Lock()
	sp, st := w.sp, w.st
	w.sp, w.st = nil, nil
	w.mu.Unlock()
	if sp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := sp.Close(ctx); err != nil {
			w.t.Errorf("closing the space: %v", err)
		}
	}
	if st != nil {
		if err := st.Close(); err != nil {
			w.t.Errorf("closing the store: %v", err)
		}
	}
}

// rebuild is a restart of the whole program.
func (w *world) rebuild() {
	w.stop()
	w.build()
}

// waitEvent waits for an event that match accepts.
func (w *world) waitEvent(what string, match func(plan.Event) bool) plan.Event {
	w.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case e := <-w.events:
			if match(e) {
				return e
			}
		case <-deadline:
			w.t.Fatalf("no event: %s", what)
		}
	}
}

func stepIs(id string, status plan.StepStatus) func(plan.Event) bool {
	return func(e plan.Event) bool {
		return e.Kind == plan.StepStatusEvent && e.StepID == id && e.Status == string(status)
	}
}

func planIs(status plan.PlanStatus) func(plan.Event) bool {
	return func(e plan.Event) bool { return e.Kind == plan.PlanStatusEvent && e.Status == string(status) }
}

func submitted(e plan.Event) bool { return e.Kind == plan.PlanSubmitted }

func said(e plan.Event) bool { return e.Kind == plan.PlannerSaid }

// do sends a request as user (no header when user is "") and decodes the
// JSON answer into out (when not nil); it returns the status and the
// headers.
func (w *world) do(method, path, user string, body any, out any) (int, http.Header) {
	w.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			w.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, w.srv.URL+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("x-ms-client-principal-id", user)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.srv.Client().Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			w.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// must is do that expects 200.
func (w *world) must(method, path, user string, body any, out any) {
	w.t.Helper()
	var raw json.RawMessage
	code, _ := w.do(method, path, user, body, &raw)
	if code != http.StatusOK {
		w.t.Fatalf("%s %s: %d %s", method, path, code, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			w.t.Fatal(err)
		}
	}
}

// Plan and Step as the API shows them (the fields the tests read).
type apiPlan struct {
	ID                         string    `json:"id"`
	SessionID                  string    `json:"session_id"`
	OverallStatus              string    `json:"overall_status"`
	Status                     string    `json:"status"`
	Summary                    *string   `json:"summary"`
	HumanClarificationRequest  *string   `json:"human_clarification_request"`
	HumanClarificationResponse *string   `json:"human_clarification_response"`
	ReplanCount                int       `json:"replan_count"`
	Reason                     *string   `json:"reason"`
	Steps                      []apiStep `json:"steps"`
	TotalSteps                 int       `json:"total_steps"`
	Completed                  int       `json:"completed"`
}

type apiStep struct {
	ID                  string          `json:"id"`
	PlanID              string          `json:"plan_id"`
	Agent               string          `json:"agent"`
	Action              string          `json:"action"`
	Function            string          `json:"function"`
	Args                json.RawMessage `json:"args"`
	Status              string          `json:"status"`
	AgentReply          *string         `json:"agent_reply"`
	HumanFeedback       *string         `json:"human_feedback"`
	HumanApprovalStatus *string         `json:"human_approval_status"`
	Seq                 int             `json:"seq"`
	Attempts            int             `json:"attempts"`
	AutoApproved        bool            `json:"auto_approved"`
}

type apiMessage struct {
	Source  string  `json:"source"`
	Content string  `json:"content"`
	StepID  *string `json:"step_id"`
	PlanID  string  `json:"plan_id"`
}

func (w *world) plan(user, session string) apiPlan {
	w.t.Helper()
	var ps []apiPlan
	w.must("GET", "/plans?session_id="+session, user, nil, &ps)
	if len(ps) != 1 {
		w.t.Fatalf("GET /plans?session_id=%s: %d plans", session, len(ps))
	}
	return ps[0]
}

func statuses(steps []apiStep) string {
	var b []string
	for _, s := range steps {
		b = append(b, fmt.Sprintf("%d %s", s.Seq, s.Status))
	}
	return strings.Join(b, ", ")
}

func toolCall(args string) openaitest.Step {
	return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: submit, Arguments: args}}}
}
