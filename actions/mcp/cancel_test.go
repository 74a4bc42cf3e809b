package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

// safety bounds the waits of the cancellation tests: a net that turns a
// hang into a failure, not a measure. An action that is not told of the
// cancellation waits for ever (the bridge's requests have no deadline of
// their own), so it fails these tests.
const safety = 10 * time.Second

// sleeper is an agent whose action wait reports progress ("started"), says
// it runs on running, and waits until its context ends, which it then
// reports on ended; ping answers at once. release ends the waits that no
// cancellation ended (only a failing test leaves one), and must come
// before the space closes, which waits for the actions.
type sleeper struct {
	agent   *agency.Agent
	running chan struct{}
	ended   chan error
	release func()
}

func newSleeper(id string) *sleeper {
	stop := make(chan struct{})
	var once sync.Once
	s := &sleeper{agent: agency.MustNewAgent(id, agency.Concurrency(4)), running: make(chan struct{}, 4), ended: make(chan error, 4),
		release: func() { once.Do(func() { close(stop) }) }}
	agency.Handle(s.agent, "wait", func(ctx context.Context, _ struct{}) (string, error) {
		if err := mcp.Progress(ctx, 0, 1, "started"); err != nil {
			return "", err
		}
		s.running <- struct{}{}
		select {
		case <-ctx.Done():
			s.ended <- ctx.Err()
			return "", ctx.Err()
		case <-stop:
			return "never told", nil
		}
	}, agency.Describe("Waits until it is cancelled"))
	agency.Handle(s.agent, "ping", func(context.Context, struct{}) (string, error) { return "pong", nil })
	return s
}

// cancelled waits for the action wait to see its context end.
func (s *sleeper) cancelled(t *testing.T) {
	t.Helper()
	select {
	case err := <-s.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the action's context ended with %v, want context.Canceled", err)
		}
	case <-time.After(safety):
		t.Fatalf("the action's context did not end within %v of the client's cancellation", safety)
	}
}

// cancelCall calls tool with a context it cancels once the action runs,
// and checks that the call ends with the cancellation and that the action
// is told.
func cancelCall(t *testing.T, ctx context.Context, cs *sdk.ClientSession, s *sleeper, tool string) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{}})
		errc <- err
	}()
	select {
	case <-s.running:
	case <-time.After(safety):
		t.Fatal("the action did not start")
	}
	cancel() // go-sdk sends notifications/cancelled
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call: %v", err)
	}
	s.cancelled(t)
}

// A client's notifications/cancelled cancels the action's context, and
// the session serves on, a cancellation again too.
func TestServerCancelReachesAction(t *testing.T) {
	s := newSleeper("Sleeper")
	f := serve(t, nil, s.agent)
	t.Cleanup(s.release) // before the space's Close, which serve registered
	for range 2 {
		cancelCall(t, f.ctx, f.session, s, "Sleeper.wait")
		if r := f.call(t, "Sleeper.ping", map[string]any{}); text(r) != `"pong"` {
			t.Fatalf("a call after the cancelled one: %q", text(r))
		}
	}
}

// The official TypeScript client, over streamable HTTP, aborts a call
// with an AbortSignal once the action reports progress: the action's
// context is cancelled, and the client's next call is answered.
func TestServerCancelTypeScript(t *testing.T) {
	t.Parallel()
	nodeBin(t, "mcp-server-everything") // skips without Node and the packages
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := newSleeper("Sleeper")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	defer s.release()
	srv, err := mcp.NewServer("Bridge", mcp.Rediscover(0, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{s.agent, srv.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	out, err := exec.CommandContext(ctx, "node", filepath.Join("testdata", "cancel.mjs"), "http", hs.URL, "Sleeper.wait", "Sleeper.ping").Output()
	if err != nil {
		t.Fatalf("cancel.mjs: %v", err)
	}
	var got struct {
		Aborted string `json:"aborted"`
		After   struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"after"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("cancel.mjs printed %q", out)
	}
	if !strings.Contains(strings.ToLower(got.Aborted), "abort") {
		t.Errorf("the aborted call threw %q, want an abort", got.Aborted)
	}
	s.cancelled(t)
	if got.After.IsError || len(got.After.Content) != 1 || got.After.Content[0].Text != `"pong"` {
		t.Errorf("the call after the aborted one: %s", out)
	}
}

// Across the broker: the bridge's agent in one space, the action's in
// another (each with its own connection, as two processes would have),
// on one RabbitMQ exchange. The client's cancellation reaches the action.
func TestServerCancelAMQP(t *testing.T) {
	url := amqptest.URL(t)
	exchange := amqptest.Exchange(t)
	s := newSleeper(amqptest.Name("Sleeper"))
	there := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: exchange})
	here := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: exchange})
	t.Cleanup(s.release) // before the spaces' Close
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := there.Add(ctx, s.agent); err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.NewServer(amqptest.Name("Bridge"), mcp.Rediscover(0, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := here.Add(ctx, srv.Agent()); err != nil {
		t.Fatal(err)
	}
	wait := mcp.ToolName(s.agent.ID(), "wait")
	for !slices.Contains(srv.Tools(), wait) {
		// A survey hears the agents that answer within its quiet time.
		if err := srv.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, ct := sdk.NewInMemoryTransports()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx, st) }()
	defer func() { stop(); <-done }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cancelCall(t, ctx, cs, s, wait)
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ToolName(s.agent.ID(), "ping"), Arguments: map[string]any{}})
	if err != nil || text(r) != `"pong"` {
		t.Fatalf("a call after the cancelled one: %v, %v", r, err)
	}
}
