package a2a_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/actions/a2a"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

type AddArgs struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

type DivideArgs struct {
	A float64 `json:"a" jsonschema:"description=dividend"`
	B float64 `json:"b" jsonschema:"description=divisor"`
}

type WaitArgs struct{}

// approvals is the approver of the Calculator's "reset": each call waits
// for a word on decide, and is announced on asked.
type approvals struct {
	asked  chan string // the caller of each call that waits
	decide chan bool
}

func newApprovals() *approvals {
	return &approvals{asked: make(chan string, 8), decide: make(chan bool, 8)}
}

// calculator is the agent the server tests serve: add, divide (b = 0 is an
// action error), reset (approved by a person), wait (runs until canceled;
// started is told), secret (denied to everyone but "alice").
func calculator(ap *approvals, started chan<- struct{}, release <-chan struct{}) *agency.Agent {
	calc := agency.MustNewAgent("Calculator", agency.Concurrency(8))
	agency.Handle(calc, "add", func(_ context.Context, a AddArgs) (float64, error) { return a.A + a.B, nil },
		agency.Describe("Adds two numbers"), agency.Returns("the sum"), agency.Example(AddArgs{A: 1, B: 2}))
	agency.Handle(calc, "divide", func(_ context.Context, a DivideArgs) (float64, error) {
		if a.B == 0 {
			return 0, agency.ActionFailedf("cannot divide %v by zero: give a divisor b other than 0", a.A)
		}
		return a.A / a.B, nil
	}, agency.Describe("Divides a by b"))
	agency.Handle(calc, "reset", func(context.Context, struct{}) (string, error) { return "reset done", nil },
		agency.Describe("Resets the calculator; a person approves each call"),
		agency.Approve(func(ctx context.Context, _ struct{}) (bool, error) {
			ap.asked <- agency.MessageFrom(ctx).From
			select {
			case ok := <-ap.decide:
				return ok, nil
			case <-release:
				return false, errors.New("the approver has gone")
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}))
	agency.Handle(calc, "wait", func(ctx context.Context, _ WaitArgs) (string, error) {
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-release:
			return "released", nil
		}
	}, agency.Describe("Waits until canceled"))
	agency.Handle(calc, "secret", func(context.Context, struct{}) (string, error) { return "42", nil },
		agency.Describe("Only for alice"), agency.AccessBySender(map[string]agency.Access{"alice": agency.Permitted}, agency.Denied))
	return calc
}

// world is a space with a Calculator served over HTTP.
type world struct {
	sp      *space.Local
	st      store.Store
	srv     *a2a.Server
	http    *httptest.Server
	ap      *approvals
	started chan struct{}
	release chan struct{} // closed on stop: ends the Calculator's waits
	once    sync.Once
}

// tokens maps the test's bearer tokens to callers.
var tokens = map[string]string{"alice-token": "alice", "bob-token": "bob"}

func authenticate(_ context.Context, token string) (string, error) {
	if c, ok := tokens[token]; ok {
		return c, nil
	}
	return "", errors.New("unknown token")
}

// newWorld serves a Calculator from a space.Local, with tasks in SQLite
// under dir (a fresh one when empty); auth turns bearer tokens on.
func newWorld(t *testing.T, dir string, auth bool, agents ...*agency.Agent) *world {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	return newWorldOn(t, st, auth, agents...)
}

// newWorldOn is newWorld with tasks in st, which it closes on stop.
func newWorldOn(t *testing.T, st store.Store, auth bool, agents ...*agency.Agent) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{sp: space.NewLocal(), st: st, ap: newApprovals(), started: make(chan struct{}, 4), release: make(chan struct{})}
	var err error
	if err := w.sp.Add(ctx, calculator(w.ap, w.started, w.release)); err != nil {
		t.Fatal(err)
	}
	ids := []string{"Calculator"}
	for _, a := range agents {
		if err := w.sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID())
	}
	cfg := a2a.Config{Space: w.sp, Agents: ids, Root: "Calculator", Store: st, MaxBody: 64 << 10, Compat03: !auth}
	if auth {
		cfg.Authenticate = authenticate
	}
	w.srv, err = a2a.NewServer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.http = httptest.NewServer(w.srv)
	t.Cleanup(w.stop)
	return w
}

// stop shuts the world down, as a process that ends would: the server
// first, so that what its callers wait for stays as it is in the store.
func (w *world) stop() {
	w.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.http.CloseClientConnections()
		w.http.Close()
		_ = w.srv.Close(ctx)
		close(w.release)
		_ = w.sp.Close(ctx)
		_ = w.st.Close()
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
