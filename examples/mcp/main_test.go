package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

// exampleFlag, first on the test binary's command line, makes it run main
// with the flags that follow instead of the tests: the example as a real
// process, for the clients that start it. (A flag, not an environment
// variable: an MCP client passes a server only a few of those.)
const exampleFlag = "-run-example"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == exampleFlag {
		os.Args = append([]string{"mcp"}, os.Args[2:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testdata returns actions/mcp/testdata, where the Node packages are.
// Without Node or them, the test fails under CI=true and skips otherwise.
func testdata(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "..", "actions", "mcp", "testdata"))
	_, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Node.js and the MCP test packages are needed (npm ci --prefix actions/mcp/testdata): %v", err)
		}
		const msg = "needs Node.js and the MCP test packages: npm ci --prefix actions/mcp/testdata"
		testenv.Note("MCP TypeScript packages", msg)
		t.Skip(msg)
	}
	return dir
}

// tsClient runs the TypeScript SDK's client (testdata/client.mjs) and
// returns what each of its steps got.
func tsClient(t *testing.T, env []string, args ...string) map[string]json.RawMessage {
	t.Helper()
	dir := testdata(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "client.mjs")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s", err, stderr.String())
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client.mjs printed %q: %v", out, err)
	}
	return got
}

type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Thrown            string          `json:"thrown"`
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// checkTS checks what the TypeScript client got from the example's
// Calculator, over either transport; hugeWant is what the 10 MiB argument
// gets.
func checkTS(t *testing.T, got map[string]json.RawMessage, huge func(toolResult) bool) {
	t.Helper()
	step := func(name string) toolResult {
		var r toolResult
		if err := json.Unmarshal(got[name], &r); err != nil {
			t.Fatalf("%s: %s", name, got[name])
		}
		return r
	}
	var tools []struct {
		Name         string          `json:"name"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(got["tools"], &tools); err != nil || len(tools) != 3 {
		t.Fatalf("tools: %s", got["tools"])
	}
	for _, tl := range tools {
		if !strings.Contains(string(tl.OutputSchema), `"type":"object"`) {
			t.Errorf("%s's output schema: %s", tl.Name, tl.OutputSchema)
		}
	}
	if r := step("add"); r.IsError || r.text() != "3" || string(r.StructuredContent) != `{"result":3}` {
		t.Errorf("add: %s", got["add"])
	}
	if r := step("divide"); r.IsError || r.text() != "0.25" {
		t.Errorf("divide: %s", got["divide"])
	}
	if r := step("divideByZero"); !r.IsError || !strings.Contains(r.text(), "division by zero") {
		t.Errorf("divide by zero: %s", got["divideByZero"])
	}
	if r := step("missingArg"); !r.IsError || !strings.Contains(r.text(), "invalid_args") || !strings.Contains(r.text(), "b: missing") {
		t.Errorf("missing argument: %s", got["missingArg"])
	}
	if r := step("unknownTool"); !strings.Contains(r.Thrown, "-32602") || !strings.Contains(r.Thrown, "Calculator.nothing") {
		t.Errorf("unknown tool (a JSON-RPC error): %s", got["unknownTool"])
	}
	if r := step("reset"); r.IsError || r.text() != `"reset: a new day"` {
		t.Errorf("reset, approved by the client's person: %s", got["reset"])
	}
	if !strings.Contains(string(got["elicited"]), "Calculator.reset") {
		t.Errorf("elicited: %s", got["elicited"])
	}
	if r := step("huge"); !huge(r) || strings.Contains(string(got["huge"]), "zzzz") {
		t.Errorf("10 MiB argument: %.500s", got["huge"])
	}
	if r := step("afterHuge"); r.IsError || r.text() != "4" {
		t.Errorf("after the 10 MiB argument: %s", got["afterHuge"])
	}
}

func TestTypeScriptClientStdio(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got := tsClient(t, nil, "stdio", exe, exampleFlag)
	checkTS(t, got, func(r toolResult) bool {
		return r.IsError && strings.Contains(r.text(), "over the limit of 4194304")
	})
}

// serveHTTP serves the example over HTTP on a free port until the test
// ends, and returns its URL.
func serveHTTP(t *testing.T, token string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, slog.New(slog.DiscardHandler), false, "", "127.0.0.1:0", token, func(a net.Addr) { addr <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a.String() + mcp.Path
	case err := <-done:
		t.Fatal(err)
	}
	return ""
}

func TestTypeScriptClientHTTP(t *testing.T) {
	url := serveHTTP(t, "s3cret")
	got := tsClient(t, []string{"MCP_TOKEN=s3cret"}, "http", url)
	checkTS(t, got, func(r toolResult) bool { return strings.Contains(r.Thrown, "request too large") })
}

// post sends one JSON-RPC frame to the example over HTTP and returns the
// status, the session id and the first JSON-RPC message of the answer.
func post(t *testing.T, url, token, session, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg string
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				msg = data
				break
			}
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		msg = string(b)
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), msg
}

func TestHTTPBadInput(t *testing.T) {
	url := serveHTTP(t, "s3cret")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	if code, _, _ := post(t, url, "", "", initialize); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _, _ := post(t, url, "wrong", "", initialize); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", code)
	}
	code, session, msg := post(t, url, "s3cret", "", initialize)
	if code != http.StatusOK || session == "" || !strings.Contains(msg, `"result"`) {
		t.Fatalf("initialize: %d %q %s", code, session, msg)
	}
	post(t, url, "s3cret", session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	code, _, msg = post(t, url, "s3cret", session, `{not json`)
	if code != http.StatusBadRequest || !strings.Contains(msg, `"code":-32700`) || !strings.Contains(msg, "not JSON") {
		t.Fatalf("a malformed frame: %d %s", code, msg)
	}
	huge := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Calculator.add","arguments":{"a":1,"b":2,"note":"` + strings.Repeat("z", 10<<20) + `"}}}`
	code, _, msg = post(t, url, "s3cret", session, huge)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "request too large") || strings.Contains(msg, "zzzz") {
		t.Fatalf("a 10 MiB argument: %d %.200s", code, msg)
	}
	// The session keeps serving.
	code, _, msg = post(t, url, "s3cret", session, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Calculator.add","arguments":{"a":2,"b":2}}}`)
	if code != http.StatusOK || !strings.Contains(msg, `"text":"4"`) {
		t.Fatalf("add after bad input: %d %s", code, msg)
	}
}

func TestJoinFilesystem(t *testing.T) {
	dir := testdata(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "note.txt"), []byte("from the filesystem server"), 0o644)
	bin := filepath.Join(dir, "node_modules", ".bin", "mcp-server-filesystem")
	var out bytes.Buffer
	if err := runJoin(context.Background(), bin+" "+root, "", "{}", &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Server.list_allowed_directories:") || !strings.Contains(out.String(), root) {
		t.Fatalf("printed:\n%s", out.String())
	}
	out.Reset()
	args, _ := json.Marshal(map[string]string{"path": filepath.Join(root, "note.txt")})
	if err := runJoin(context.Background(), bin+" "+root, "read_text_file", string(args), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "from the filesystem server") {
		t.Fatalf("printed:\n%s", out.String())
	}
}

// TestAMQPAcrossProcesses: an MCP server (a Go test server, a process of
// its own) joined as an agent in this process on RabbitMQ, and this
// example, another process, serving the broker's agents to an MCP client:
// the client's call crosses three processes and the broker.
func TestAMQPAcrossProcesses(t *testing.T) {
	url := amqptest.URL(t)
	exchange := amqptest.Exchange(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: exchange})

	// The MCP server joined here: the example's own Calculator over
	// stdio, a process of its own.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id := amqptest.Name("Remote")
	joined, err := mcp.NewClient(ctx, id, mcp.Command(nil, exe, exampleFlag))
	if err != nil {
		t.Fatal(err)
	}
	defer joined.Close()
	if err := sp.Add(ctx, joined.Agent()); err != nil {
		t.Fatal(err)
	}

	// The example, in another process, serves the broker's agents.
	cmd := exec.Command(exe, exampleFlag, "-amqp", "-exchange", exchange)
	cmd.Env = append(os.Environ(), "AMQP_URL="+url)
	cmd.Stderr = os.Stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tool := mcp.ToolName(id, mcp.ToolName("Calculator", "add"))
	var res *sdk.CallToolResult
	for {
		res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"a": 20, "b": 22}})
		if err == nil {
			break
		}
		// The example's first survey may come before the joined agent
		// answers on the broker: wait for the list to change.
		if ctx.Err() != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if res.IsError || !strings.Contains(contentText(res), "42") {
		t.Fatalf("%s: %v %q", tool, res.IsError, contentText(res))
	}
	// And an agent of this process calls the joined server directly.
	user := agency.MustNewAgent(amqptest.Name("User"))
	if err := sp.Add(ctx, user); err != nil {
		t.Fatal(err)
	}
	sum, err := agency.Call[map[string]float64](ctx, user, id, "Calculator.add", map[string]any{"a": 1, "b": 2})
	if err != nil || sum["result"] != 3 {
		t.Fatalf("Calculator.add through %s: %v, %v", id, sum, err)
	}
}

// sleeper adds to a space on the broker an agent whose action wait
// reports progress, says it runs on running and waits until its context
// ends, which it reports on ended; ping answers at once. It returns the
// agent's id.
func sleeper(t *testing.T, ctx context.Context, sp *amqpspace.Space) (id string, running chan struct{}, ended chan error) {
	t.Helper()
	running, ended, stop := make(chan struct{}, 1), make(chan error, 1), make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the space's Close, which waits for the actions
	id = amqptest.Name("Sleeper")
	a := agency.MustNewAgent(id, agency.Concurrency(2))
	agency.Handle(a, "wait", func(ctx context.Context, _ struct{}) (string, error) {
		if err := mcp.Progress(ctx, 0, 1, "started"); err != nil {
			return "", err
		}
		running <- struct{}{}
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
			return "", ctx.Err()
		case <-stop:
			return "never told", nil
		}
	})
	agency.Handle(a, "ping", func(context.Context, struct{}) (string, error) { return "pong", nil })
	if err := sp.Add(ctx, a); err != nil {
		t.Fatal(err)
	}
	return id, running, ended
}

// toldToStop waits for the action's context to end.
func toldToStop(t *testing.T, ended <-chan error) {
	t.Helper()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the action's context ended with %v", err)
		}
	case <-time.After(10 * time.Second): // a safety net: untold, the action waits for ever
		t.Fatal("the action's context did not end after the client cancelled the call")
	}
}

// TestAMQPCancelAcrossProcesses: an MCP client's cancellation crosses the
// example, a process of its own serving the broker's agents, and the
// broker, to an action of this process: the action's context ends, and
// the session serves on.
func TestAMQPCancelAcrossProcesses(t *testing.T) {
	url := amqptest.URL(t)
	exchange := amqptest.Exchange(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: exchange})
	id, running, ended := sleeper(t, ctx, sp)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, exampleFlag, "-amqp", "-exchange", exchange)
	cmd.Env = append(os.Environ(), "AMQP_URL="+url)
	cmd.Stderr = os.Stderr
	changed := make(chan struct{}, 1)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	}).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wait := mcp.ToolName(id, "wait")
	for {
		// The example's first survey may come before Sleeper answers on
		// the broker: then wait for the list to change.
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(res.Tools, func(tl *sdk.Tool) bool { return tl.Name == wait }) {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%s never listed", wait)
		}
	}

	cctx, stopCall := context.WithCancel(ctx)
	defer stopCall()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: wait, Arguments: map[string]any{}})
		errc <- err
	}()
	select {
	case <-running:
	case <-ctx.Done():
		t.Fatal("the action did not start")
	}
	stopCall() // go-sdk sends notifications/cancelled
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call: %v", err)
	}
	toldToStop(t, ended)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ToolName(id, "ping"), Arguments: map[string]any{}})
	if err != nil || res.IsError || contentText(res) != `"pong"` {
		t.Fatalf("a call after the cancelled one: %v, %v", res, err)
	}
}

// TestAMQPCancelTypeScript: the TypeScript SDK's client starts the
// example on stdio with -amqp and aborts its call (an AbortSignal) at the
// action's first progress report: the action, in this process, is told.
func TestAMQPCancelTypeScript(t *testing.T) {
	dir := testdata(t)
	url := amqptest.URL(t)
	exchange := amqptest.Exchange(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: exchange})
	id, _, ended := sleeper(t, ctx, sp)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "cancel.mjs"), "stdio", mcp.ToolName(id, "wait"), mcp.ToolName(id, "ping"),
		exe, exampleFlag, "-amqp", "-exchange", exchange)
	cmd.Env = append(os.Environ(), "AMQP_URL="+url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cancel.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		Aborted string     `json:"aborted"`
		After   toolResult `json:"after"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("cancel.mjs printed %q", out)
	}
	if !strings.Contains(strings.ToLower(got.Aborted), "abort") {
		t.Errorf("the aborted call threw %q, want an abort", got.Aborted)
	}
	toldToStop(t, ended)
	if got.After.IsError || got.After.text() != `"pong"` {
		t.Errorf("the call after the aborted one: %s", out)
	}
}

func contentText(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
