package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/internal/testenv"
	"github.com/seed72275b23/agency-go/space"
)

// TestMain fails the package's tests if any goroutine outlives them: agents,
// tool calls and HTTP connections must all be gone once the spaces close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.RemovingPrograms(m))
}

// safety bounds every wait of a test; no test sleeps to synchronise.
const safety = 10 * time.Second

// fixture is a space with a scripted model server and a User agent whose
// say action records what it hears.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	sp    *space.Local
	srv   *openaitest.Server
	user  *agency.Agent
	heard chan string
	llm   *Agent

	retries     Option // Retries with a short backoff unless a test sets another
	callTimeout Option // CallTimeout(safety) unless a test sets another
}

func newFixture(t *testing.T, steps ...openaitest.Step) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, sp: space.NewLocal(), srv: openaitest.NewServer(t, steps...), heard: make(chan string, 16)}
	t.Cleanup(func() {
		if err := f.sp.Close(context.Background()); err != nil {
			t.Errorf("closing the space: %v", err)
		}
	})
	f.user = agency.MustNewAgent("User")
	agency.Handle(f.user, "say", func(ctx context.Context, args SayArgs) (string, error) {
		f.heard <- args.Content
		return "heard", nil
	}, agency.Describe("Shows a message to the user"))
	f.add(f.user)
	return f
}

func (f *fixture) add(a *agency.Agent) {
	f.t.Helper()
	if err := f.sp.Add(f.ctx, a); err != nil {
		f.t.Fatalf("adding %s: %v", a.ID(), err)
	}
}

// start adds the LLM agent "Assistant" and waits until its catalog knows
// the agents named.
func (f *fixture) start(known []string, opts ...Option) *Agent {
	f.t.Helper()
	if f.retries == nil {
		f.retries = Retries(3, time.Millisecond)
	}
	if f.callTimeout == nil {
		f.callTimeout = CallTimeout(safety)
	}
	opts = append([]Option{APIKey("test-key"), BaseURL(f.srv.URL), HTTPClient(f.srv.Client()),
		f.retries, f.callTimeout}, opts...)
	llm, err := New("Assistant", opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.llm = llm
	f.add(llm.Agent())
	f.waitCatalog(func(agents map[string][]toolSpec) bool {
		for _, id := range known {
			if _, ok := agents[id]; !ok {
				return false
			}
		}
		return true
	})
	f.surveyed()
	return llm
}

// waitCatalog waits until cond holds for the LLM agent's catalog.
func (f *fixture) waitCatalog(cond func(map[string][]toolSpec) bool) {
	f.t.Helper()
	c := &f.llm.catalog
	for {
		c.mu.Lock()
		ok := cond(c.agents)
		changed := c.changed
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-f.ctx.Done():
			f.t.Fatalf("the catalog never reached the expected state; it has %v", f.catalogAgents())
		}
	}
}

// surveyed waits until no survey of the space is under way (the one the
// LLM agent made on joining, say).
func (f *fixture) surveyed() {
	f.t.Helper()
	c := &f.llm.catalog
	c.mu.Lock()
	done := c.survey
	c.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-f.ctx.Done():
		f.t.Fatal("the survey did not end")
	}
}

func (f *fixture) catalogAgents() []string {
	c := &f.llm.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for id := range c.agents {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// say has from say content to the Assistant and returns its answer.
func (f *fixture) say(from *agency.Agent, content string) (string, error) {
	f.t.Helper()
	return agency.Call[string](f.ctx, from, "Assistant", "say", SayArgs{Content: content})
}

// heardNext returns the next say the User received.
func (f *fixture) heardNext() string {
	f.t.Helper()
	select {
	case s := <-f.heard:
		return s
	case <-f.ctx.Done():
		f.t.Fatal("the user heard nothing")
		return ""
	}
}

// helpAsSeenBy returns the help of agent id as the agent asker sees it.
func (f *fixture) helpAsSeenBy(asker *agency.Agent, id string) map[string]agency.ActionHelp {
	f.t.Helper()
	h, err := agency.Call[map[string]agency.ActionHelp](f.ctx, asker, id, agency.HelpAction, nil)
	if err != nil {
		f.t.Fatalf("help of %s: %v", id, err)
	}
	return h
}

// requests returns what the model was sent, checking how many.
func (f *fixture) requests(n int) []openaitest.Request {
	f.t.Helper()
	reqs := f.srv.Requests()
	if len(reqs) != n {
		f.t.Fatalf("the model got %d requests, want %d", len(reqs), n)
	}
	return reqs
}

func sameJSON(a, b []byte) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

func toolNamesOf(r openaitest.Request) []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

// received records the calls an agent's action received.
type received struct {
	mu    sync.Mutex
	calls []*agency.Message
}

func (r *received) add(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, agency.MessageFrom(ctx))
}

func (r *received) get() []*agency.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// AddArgs are the arguments of Calculator.add.
type AddArgs struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

// calculator returns a Calculator agent with add, recording its calls.
func calculator(rec *received) *agency.Agent {
	a := agency.MustNewAgent("Calculator")
	agency.Handle(a, "add", func(ctx context.Context, args AddArgs) (float64, error) {
		rec.add(ctx)
		return args.A + args.B, nil
	}, agency.Describe("Adds two numbers"), agency.Returns("the sum"), agency.Example(AddArgs{A: 1, B: 2}))
	return a
}

// ForecastArgs are the arguments of Weather.forecast.
type ForecastArgs struct {
	City string `json:"city" validate:"min=1" jsonschema:"description=the city"`
}

func weather(id string, rec *received) *agency.Agent {
	a := agency.MustNewAgent(id)
	agency.Handle(a, "forecast", func(ctx context.Context, args ForecastArgs) (string, error) {
		rec.add(ctx)
		return "sunny in " + args.City, nil
	}, agency.Describe("Tells the weather of tomorrow"))
	return a
}

// vault has open, whose access is requested and always refused, and wipe,
// denied to the Assistant only.
type vault struct{ asked received }

func (v *vault) RequestPermission(ctx context.Context, m *agency.Message) bool {
	v.asked.add(ctx)
	return false
}

type NoArgs struct{}

func newVault(v *vault) *agency.Agent {
	a := agency.MustNewAgent("Vault", agency.Hooks(v))
	agency.Handle(a, "open", func(ctx context.Context, _ NoArgs) (string, error) {
		return "opened", nil
	}, agency.Describe("Opens the vault"), agency.AccessForAll(agency.Requested))
	agency.Handle(a, "wipe", func(ctx context.Context, _ NoArgs) (string, error) {
		return "wiped", nil
	}, agency.Describe("Wipes the vault"), agency.AccessBySender(map[string]agency.Access{"Assistant": agency.Denied}, agency.Permitted))
	return a
}

// failureLog returns a logger whose records (debug and up) the test shows
// only if it fails: what the agent did, for a failure seen once under load.
func failureLog(t *testing.T) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() {
			t.Logf("the agent's log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
