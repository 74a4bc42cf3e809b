package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// TestMain runs this test binary as an MCP server on stdio when
// MCP_TEST_SERVER is set: a real process for the client to start, call
// and lose.
func TestMain(m *testing.M) {
	if os.Getenv("MCP_TEST_SERVER") != "" {
		if err := testServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type sumIn struct {
	A float64 `json:"a" jsonschema:"first addend"`
	B float64 `json:"b" jsonschema:"second addend"`
}

type sumOut struct {
	Sum float64 `json:"sum"`
}

// testServer is a plain go-sdk server: sum (structured output), echo
// (text), fail (isError), pid, wait (until killed), grow (adds a tool) and
// calls (how many tools/call it has served).
func testServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test-server"}, nil)
	var calls atomic.Int64
	counted := func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/call" {
				calls.Add(1)
			}
			return next(ctx, method, req)
		}
	}
	s.AddReceivingMiddleware(counted)
	sdk.AddTool(s, &sdk.Tool{Name: "sum", Description: "Adds a and b"}, func(_ context.Context, _ *sdk.CallToolRequest, in sumIn) (*sdk.CallToolResult, sumOut, error) {
		return nil, sumOut{in.A + in.B}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Says text back"}, func(_ context.Context, _ *sdk.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return nil, nil, errors.New("the disk is full")
	})
	sdk.AddTool(s, &sdk.Tool{Name: "pid"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "getenv"}, func(_ context.Context, _ *sdk.CallToolRequest, in struct {
		Name string `json:"name"`
	}) (*sdk.CallToolResult, any, error) {
		v, ok := os.LookupEnv(in.Name)
		if !ok {
			v = "(unset)"
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: v}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "calls"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(calls.Load())}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "wait"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	sdk.AddTool(s, &sdk.Tool{Name: "grow"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		sdk.AddTool(s, &sdk.Tool{Name: "grown", Description: "Came later"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "new"}}}, nil, nil
		})
		s.RemoveTools("fail")
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "grown"}}}, nil, nil
	})
	return s
}

// joinTestServer starts this binary as an MCP server, joins it as agent
// Tools to a space with a User, and returns the user.
func joinTestServer(t *testing.T, opts ...mcp.ClientOption) (context.Context, *mcp.Client, *agency.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcp.NewClient(ctx, "Tools", mcp.Command([]string{"MCP_TEST_SERVER=1"}, exe), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sp := space.NewLocal()
	t.Cleanup(func() { sp.Close(context.Background()) })
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{c.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, c, user
}

func TestClientToolsAreActions(t *testing.T) {
	ctx, _, user := joinTestServer(t)
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Tools", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := help["sum"]
	if sum.Description != "Adds a and b" || !strings.Contains(string(sum.Args), `"required":["a","b"]`) || !strings.Contains(string(sum.Returns), `"sum"`) {
		t.Fatalf("help of sum: %+v args %s returns %s", sum, sum.Args, sum.Returns)
	}
	got, err := agency.Call[map[string]float64](ctx, user, "Tools", "sum", map[string]any{"a": 1, "b": 2})
	if err != nil || got["sum"] != 3 {
		t.Fatalf("sum = %v, %v", got, err)
	}
	text, err := agency.Call[string](ctx, user, "Tools", "echo", map[string]any{"text": "hi"})
	if err != nil || text != "hi" {
		t.Fatalf("echo = %q, %v", text, err)
	}
	_, err = agency.Call[any](ctx, user, "Tools", "fail", nil)
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "the disk is full") {
		t.Fatalf("fail: %v", err)
	}
	// Validated here, before the call: the server never sees it.
	before, _ := agency.Call[string](ctx, user, "Tools", "calls", nil)
	_, err = agency.Call[any](ctx, user, "Tools", "sum", map[string]any{"a": "one"})
	if !errors.Is(err, agency.ErrInvalidArgs) || !strings.Contains(err.Error(), "Tools.sum") {
		t.Fatalf("sum with a string: %v", err)
	}
	after, _ := agency.Call[string](ctx, user, "Tools", "calls", nil)
	if before == "" || after != fmt.Sprint(atoi(before)+1) {
		t.Fatalf("calls before %q, after %q: the invalid call reached the server", before, after)
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func TestClientFollowsListChanged(t *testing.T) {
	ctx, c, user := joinTestServer(t)
	changed := c.ChangedForTest()
	if _, err := agency.Call[string](ctx, user, "Tools", "grow", nil); err != nil {
		t.Fatal(err)
	}
	for {
		names := strings.Join(c.Tools(), ",")
		if strings.Contains(names, "grown") && !strings.Contains(names, "fail") {
			break
		}
		select {
		case <-changed:
			changed = c.ChangedForTest()
		case <-ctx.Done():
			t.Fatalf("tools after grow: %v", c.Tools())
		}
	}
	if got, err := agency.Call[string](ctx, user, "Tools", "grown", nil); err != nil || got != "new" {
		t.Fatalf("grown = %q, %v", got, err)
	}
	if _, err := agency.Call[any](ctx, user, "Tools", "fail", nil); !errors.Is(err, agency.ErrNotFound) {
		t.Fatalf("fail after it was removed: %v", err)
	}
	help, _ := agency.Call[map[string]agency.ActionHelp](ctx, user, "Tools", "help", nil)
	if _, ok := help["grown"]; !ok {
		t.Fatalf("help has no grown: %v", help)
	}
}

func TestClientServerKilledMidCall(t *testing.T) {
	ctx, _, user := joinTestServer(t, mcp.RestartBackoff(50*time.Millisecond, time.Second))
	pid, err := agency.Call[string](ctx, user, "Tools", "pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := agency.Call[any](ctx, user, "Tools", "wait", nil)
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond) // the call reaches the server
	if err := syscall.Kill(atoi(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "died during the call") {
			t.Fatalf("the call under way: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call under way did not fail when the server died")
	}
	// The next call starts the server again.
	var pid2 string
	for {
		pid2, err = agency.Call[string](ctx, user, "Tools", "pid", nil)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "next start") && !strings.Contains(err.Error(), "died") {
			t.Fatalf("pid after the kill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pid2 == pid {
		t.Fatalf("the same process %s answers after it was killed", pid)
	}
	if got, err := agency.Call[map[string]float64](ctx, user, "Tools", "sum", map[string]any{"a": 2, "b": 2}); err != nil || got["sum"] != 4 {
		t.Fatalf("sum after the restart = %v, %v", got, err)
	}
}

func TestClientToolOptions(t *testing.T) {
	ctx, _, user := joinTestServer(t,
		mcp.ToolOptions("fail", agency.AccessForAll(agency.Denied)),
		mcp.ToolOptions("echo", agency.AccessBySender(map[string]agency.Access{"User": agency.Permitted}, agency.Denied)),
		mcp.ToolOptions("*", agency.AccessBySender(map[string]agency.Access{"User": agency.Denied}, agency.Permitted)))
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Tools", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := help["fail"]; ok || len(help) != 1 || help["echo"].Args == nil {
		t.Fatalf("help shows the User %v; want echo alone", help)
	}
	if _, err := agency.Call[any](ctx, user, "Tools", "sum", map[string]any{"a": 1, "b": 2}); !errors.Is(err, agency.ErrPermissionDenied) {
		t.Fatalf("sum, denied to the User by \"*\": %v", err)
	}
	if got, err := agency.Call[string](ctx, user, "Tools", "echo", map[string]any{"text": "ok"}); err != nil || got != "ok" {
		t.Fatalf("echo = %q, %v", got, err)
	}
}

// TestClientEndpoint joins a server over streamable HTTP: the bridge
// itself, serving a Calculator, so that its tools come back as the
// actions of another agent.
func TestClientEndpoint(t *testing.T) {
	f := serve(t, nil, calculator(t, nil))
	hs := httptest.NewServer(f.srv.Handler())
	defer hs.Close()
	c, err := mcp.NewClient(f.ctx, "Remote", mcp.Endpoint(hs.URL, hs.Client()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{c.Agent(), user} {
		if err := f.sp.Add(f.ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := agency.Call[map[string]float64](f.ctx, user, "Remote", "Calculator.add", map[string]any{"a": 1, "b": 2})
	if err != nil || got["result"] != 3 {
		t.Fatalf("Remote's Calculator.add = %v, %v", got, err)
	}
	_, err = agency.Call[any](f.ctx, user, "Remote", "Calculator.divide", map[string]any{"a": 1, "b": 0})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "division by zero") {
		t.Fatalf("Remote's Calculator.divide by zero: %v", err)
	}
	_, err = agency.Call[any](f.ctx, user, "Remote", "Calculator.add", map[string]any{"a": "one", "b": 2})
	if !errors.Is(err, agency.ErrInvalidArgs) {
		t.Fatalf("a string for a number: %v", err)
	}
}

// TestClientRestartBackoff: a server that cannot be started again is
// tried again only after a pause that doubles, and calls meanwhile fail
// at once saying when the next start is.
func TestClientRestartBackoff(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var attempts atomic.Int64
	var stop context.CancelFunc
	connector := func() (sdk.Transport, error) {
		switch attempts.Add(1) {
		case 2, 3:
			return nil, errors.New("no such server today")
		}
		st, ct := sdk.NewInMemoryTransports()
		sctx, cancel := context.WithCancel(ctx)
		stop = cancel
		go testServer().Run(sctx, st)
		return ct, nil
	}
	c, err := mcp.NewClient(ctx, "Tools", connector, mcp.RestartBackoff(time.Second, 8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{c.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	echo := func() error {
		_, err := agency.Call[string](ctx, user, "Tools", "echo", map[string]any{"text": "x"})
		return err
	}
	if err := echo(); err != nil {
		t.Fatal(err)
	}
	stop() // the server goes
	for !c.DownForTest() {
		if ctx.Err() != nil {
			t.Fatal("the client did not see its server go")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The first call after starts it again, which fails; the next call,
	// at once, does not try, and says when the next start is.
	if err := echo(); err == nil || !strings.Contains(err.Error(), "no such server today") {
		t.Fatalf("the first call after the server went: %v", err)
	}
	pause := func() time.Duration {
		t.Helper()
		err := echo()
		_, after, ok := strings.Cut(fmt.Sprint(err), "the next start is in ")
		d, perr := time.ParseDuration(after)
		if !ok || perr != nil {
			t.Fatalf("a call during the pause: %v", err)
		}
		return d
	}
	if d := pause(); d > time.Second {
		t.Fatalf("first pause %v, want at most 1s", d)
	}
	// Once the pause is over, a call starts it again; it fails again, and
	// the pause doubles.
	for attempts.Load() < 3 {
		if err := echo(); err != nil && !strings.Contains(err.Error(), "next start") && !strings.Contains(err.Error(), "no such server today") {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := pause(); d <= time.Second {
		t.Fatalf("second pause %v, want more than the first (1s)", d)
	}
	for {
		if err := echo(); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the server did not start again: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := attempts.Load(); n != 4 {
		t.Fatalf("%d starts, want 4", n)
	}
}
