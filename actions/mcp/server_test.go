package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

type AddArgs struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// calculator returns a Calculator agent with add (a number), divide (fails
// on zero), point (an object), noted (returns nothing declared), slow
// (reports progress, then waits for its context or release) and clear
// (requested access, approved when the MCP client's person approved).
func calculator(t *testing.T, release <-chan struct{}) *agency.Agent {
	t.Helper()
	calc := agency.MustNewAgent("Calculator", agency.Concurrency(4))
	agency.Handle(calc, "add", func(_ context.Context, a AddArgs) (float64, error) { return a.A + a.B, nil },
		agency.Describe("Adds two numbers"), agency.Returns("the sum"))
	agency.Handle(calc, "divide", func(_ context.Context, a AddArgs) (float64, error) {
		if a.B == 0 {
			return 0, agency.ActionFailedf("division by zero: b must not be 0")
		}
		return a.A / a.B, nil
	}, agency.Describe("Divides a by b"))
	agency.Handle(calc, "point", func(_ context.Context, a AddArgs) (Point, error) { return Point{a.A, a.B}, nil })
	agency.Handle(calc, "noted", func(_ context.Context, a struct{}) (any, error) { return "ok", nil })
	agency.Handle(calc, "slow", func(ctx context.Context, a struct{}) (string, error) {
		if err := mcp.Progress(ctx, 1, 2, "half way"); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-release:
			return "done", nil
		}
	})
	agency.Handle(calc, "clear", func(_ context.Context, a struct{}) (string, error) { return "cleared", nil },
		agency.Approve(func(ctx context.Context, _ struct{}) (bool, error) {
			return mcp.Approved(ctx, "Bridge"), nil
		}))
	agency.Handle(calc, "secret", func(_ context.Context, a struct{}) (string, error) { return "x", nil },
		agency.AccessBySender(map[string]agency.Access{"Bridge": agency.Denied}, agency.Permitted))
	return calc
}

type fixture struct {
	ctx     context.Context
	sp      *space.Local
	srv     *mcp.Server
	session *sdk.ClientSession
	changed chan struct{}
}

// serve starts a Server named Bridge on a space with the given agents and
// connects a go-sdk client to it in memory.
func serve(t *testing.T, copts *sdk.ClientOptions, agents ...*agency.Agent) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	f := &fixture{ctx: ctx, sp: space.NewLocal(), changed: make(chan struct{}, 16)}
	t.Cleanup(func() { f.sp.Close(context.Background()) })
	for _, a := range agents {
		if err := f.sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := mcp.NewServer("Bridge", mcp.Rediscover(0, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	if err := f.sp.Add(ctx, srv.Agent()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	st, ct := sdk.NewInMemoryTransports()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx, st) }()
	t.Cleanup(func() { stop(); <-done })
	if copts == nil {
		copts = &sdk.ClientOptions{}
	}
	copts.ToolListChangedHandler = func(context.Context, *sdk.ToolListChangedRequest) {
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	f.session = cs
	return f
}

func (f *fixture) tools(t *testing.T) map[string]*sdk.Tool {
	t.Helper()
	res, err := f.session.ListTools(f.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		m[tl.Name] = tl
	}
	return m
}

func (f *fixture) call(t *testing.T, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := f.session.CallTool(f.ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func schemaJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestServerListsActionsAsTools(t *testing.T) {
	f := serve(t, nil, calculator(t, nil))
	tools := f.tools(t)
	for _, name := range []string{"Calculator.add", "Calculator.divide", "Calculator.point", "Calculator.noted", "Calculator.clear"} {
		if tools[name] == nil {
			t.Fatalf("no tool %s in %v", name, tools)
		}
	}
	if tools["Calculator.secret"] != nil {
		t.Fatal("an action denied to the bridge is listed")
	}
	for name := range tools {
		if strings.HasPrefix(name, "Bridge.") {
			t.Fatalf("the bridge lists its own action %s", name)
		}
	}
	add := tools["Calculator.add"]
	if add.Description != "Adds two numbers" {
		t.Errorf("description %q", add.Description)
	}
	in := schemaJSON(add.InputSchema)
	if !strings.Contains(in, `"required":["a","b"]`) || !strings.Contains(in, `"first addend"`) {
		t.Errorf("input schema %s", in)
	}
	if got := schemaJSON(add.OutputSchema); got != `{"properties":{"result":{"description":"the sum","type":["number","null"]}},"required":["result"],"type":"object"}` {
		t.Errorf("add's output schema %s", got)
	}
	if got := schemaJSON(tools["Calculator.point"].OutputSchema); !strings.Contains(got, `"type":"object"`) || !strings.Contains(got, `"x"`) || strings.Contains(got, `"result"`) {
		t.Errorf("point's output schema %s", got)
	}
	if tools["Calculator.noted"].OutputSchema != nil {
		t.Errorf("noted declares nothing, yet has output schema %s", schemaJSON(tools["Calculator.noted"].OutputSchema))
	}
}

func TestServerCalls(t *testing.T) {
	f := serve(t, nil, calculator(t, nil))
	r := f.call(t, "Calculator.add", map[string]any{"a": 1, "b": 2})
	if r.IsError || text(r) != "3" || schemaJSON(r.StructuredContent) != `{"result":3}` {
		t.Fatalf("add: %v %q %s", r.IsError, text(r), schemaJSON(r.StructuredContent))
	}
	r = f.call(t, "Calculator.point", map[string]any{"a": 1, "b": 2})
	if r.IsError || schemaJSON(r.StructuredContent) != `{"x":1,"y":2}` {
		t.Fatalf("point: %q %s", text(r), schemaJSON(r.StructuredContent))
	}
	r = f.call(t, "Calculator.noted", nil)
	if r.IsError || text(r) != `"ok"` || r.StructuredContent != nil {
		t.Fatalf("noted: %q %v", text(r), r.StructuredContent)
	}
	r = f.call(t, "Calculator.divide", map[string]any{"a": 1, "b": 0})
	if !r.IsError || !strings.Contains(text(r), "division by zero") || !strings.HasPrefix(text(r), "action_failed: ") {
		t.Fatalf("divide by zero: %v %q", r.IsError, text(r))
	}
	r = f.call(t, "Calculator.add", map[string]any{"a": 1})
	if !r.IsError || !strings.HasPrefix(text(r), "invalid_args: ") || !strings.Contains(text(r), "b") {
		t.Fatalf("add without b: %v %q", r.IsError, text(r))
	}
	// No client elicitation: the agent's approver decides, and refuses.
	r = f.call(t, "Calculator.clear", nil)
	if !r.IsError || !strings.HasPrefix(text(r), "permission_denied: ") {
		t.Fatalf("clear: %v %q", r.IsError, text(r))
	}
	_, err := f.session.CallTool(f.ctx, &sdk.CallToolParams{Name: "Calculator.nothing", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "Calculator.nothing") {
		t.Fatalf("unknown tool: %v", err)
	}
	// The session keeps serving.
	if r := f.call(t, "Calculator.add", map[string]any{"a": 2, "b": 2}); text(r) != "4" {
		t.Fatalf("add after errors: %q", text(r))
	}
}

func TestServerHugeArgument(t *testing.T) {
	t.Parallel()
	f := serve(t, nil, calculator(t, nil))
	huge := strings.Repeat("z", 10<<20)
	r := f.call(t, "Calculator.add", map[string]any{"a": 1, "b": 2, "note": huge})
	if !r.IsError || !strings.Contains(text(r), "over the limit") || strings.Contains(text(r), "zzzz") || len(text(r)) > 1000 {
		t.Fatalf("10 MiB argument: %v %.200q", r.IsError, text(r))
	}
	if r := f.call(t, "Calculator.add", map[string]any{"a": 2, "b": 2}); text(r) != "4" {
		t.Fatalf("add after a huge argument: %q", text(r))
	}
}

func TestServerElicitation(t *testing.T) {
	answer := "accept"
	asked := 0
	copts := &sdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked++
		if !strings.Contains(req.Params.Message, "Calculator.clear") {
			return nil, fmt.Errorf("message %q", req.Params.Message)
		}
		return &sdk.ElicitResult{Action: answer}, nil
	}}
	f := serve(t, copts, calculator(t, nil))
	if r := f.call(t, "Calculator.clear", nil); r.IsError || text(r) != `"cleared"` {
		t.Fatalf("approved clear: %q", text(r))
	}
	answer = "decline"
	if r := f.call(t, "Calculator.clear", nil); !r.IsError || !strings.Contains(text(r), "did not approve") {
		t.Fatalf("declined clear: %q", text(r))
	}
	if asked != 2 {
		t.Fatalf("asked %d times", asked)
	}
	// A permitted action asks no one.
	f.call(t, "Calculator.add", map[string]any{"a": 1, "b": 1})
	if asked != 2 {
		t.Fatalf("asked %d times after add", asked)
	}
}

func TestServerProgressAndCancel(t *testing.T) {
	progress := make(chan *sdk.ProgressNotificationParams, 4)
	copts := &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
		progress <- req.Params
	}}
	release := make(chan struct{})
	f := serve(t, copts, calculator(t, release))
	t.Cleanup(func() { close(release) }) // before the space closes
	params := &sdk.CallToolParams{Name: "Calculator.slow", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		r, err := f.session.CallTool(f.ctx, params)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case p := <-progress:
		if p.ProgressToken != "tok-1" || p.Progress != 1 || p.Total != 2 || p.Message != "half way" {
			t.Fatalf("progress %+v", p)
		}
	case <-f.ctx.Done():
		t.Fatal("no progress")
	}
	release <- struct{}{}
	if r := <-done; r == nil || text(r) != `"done"` {
		t.Fatalf("slow: %v", r)
	}

	// Cancelled by the client: the call ends at once.
	cctx, cancel := context.WithCancel(f.ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := f.session.CallTool(cctx, &sdk.CallToolParams{Name: "Calculator.slow", Arguments: map[string]any{}})
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if r := f.call(t, "Calculator.add", map[string]any{"a": 2, "b": 2}); text(r) != "4" {
		t.Fatalf("add after a cancelled call: %q", text(r))
	}
}

func TestServerFollowsAgents(t *testing.T) {
	f := serve(t, nil, calculator(t, nil))
	echo := agency.MustNewAgent("Echo")
	agency.Handle(echo, "say", func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return a.Text, nil
	})
	if err := f.sp.Add(f.ctx, echo); err != nil {
		t.Fatal(err)
	}
	// A survey hears the agents that answer within its quiet time: on a
	// busy machine Echo may answer the next one.
	waitTools(t, f, "Echo.say after Echo joined", func(tools map[string]*sdk.Tool) bool { return tools["Echo.say"] != nil })
	if r := f.call(t, "Echo.say", map[string]any{"text": "hi"}); text(r) != `"hi"` {
		t.Fatalf("say: %q", text(r))
	}
	// Echo leaves: a call finds it gone, and the list follows.
	if err := f.sp.Remove(f.ctx, "Echo"); err != nil {
		t.Fatal(err)
	}
	r := f.call(t, "Echo.say", map[string]any{"text": "hi"})
	if !r.IsError || !strings.Contains(text(r), "has left the space") {
		t.Fatalf("say after Echo left: %v %q", r.IsError, text(r))
	}
	waitTools(t, f, "no Echo.say after Echo left", func(tools map[string]*sdk.Tool) bool { return tools["Echo.say"] == nil })
	if r := f.call(t, "Calculator.add", map[string]any{"a": 2, "b": 2}); text(r) != "4" {
		t.Fatalf("add: %q", text(r))
	}
}

// waitTools waits until the tools the client lists satisfy ok, surveying
// the space again while they do not, and for the client to have been told
// of a change (notifications/tools/list_changed); want says what is
// awaited.
func waitTools(t *testing.T, f *fixture, want string, ok func(map[string]*sdk.Tool) bool) {
	t.Helper()
	notified := false
	for !ok(f.tools(t)) {
		if err := f.srv.Refresh(f.ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-f.changed:
			notified = true
		case <-time.After(100 * time.Millisecond):
		case <-f.ctx.Done():
			t.Fatalf("waiting for %s: %v", want, f.ctx.Err())
		}
	}
	if !notified {
		waitChanged(t, f)
	}
}

func waitChanged(t *testing.T, f *fixture) {
	t.Helper()
	select {
	case <-f.changed:
	case <-f.ctx.Done():
		t.Fatal("no notifications/tools/list_changed")
	}
}

func TestToolName(t *testing.T) {
	cases := map[[2]string]string{
		{"Calculator", "add"}:        "Calculator.add",
		{"Worker-1f3a", "read_file"}: "Worker-1f3a.read_file",
		{"fs", "a.b"}:                "fs.a.b",
	}
	for in, want := range cases {
		if got := mcp.ToolName(in[0], in[1]); got != want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
	seen := map[string][2]string{}
	for _, in := range [][2]string{{"Büro", "add"}, {"B_ro", "add"}, {"acme.Calc", "add"}, {"acme", "Calc.add"},
		{strings.Repeat("a", 200), "x"}, {strings.Repeat("a", 200), "y"}, {"x", strings.Repeat("é", 100)}} {
		got := mcp.ToolName(in[0], in[1])
		if len(got) > 128 || !validTool(got) {
			t.Errorf("ToolName(%q, %q) = %q: not an MCP tool name", in[0], in[1], got)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%v and %v both map to %q", prev, in, got)
		}
		seen[got] = in
	}
}

func validTool(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return s != ""
}
