package a2a_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/a2a"
	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

// node returns the node binary for the tests that run the A2A JavaScript
// SDK (testdata/package.json pins it). Without Node or the installed SDK
// they skip, saying how to run them; with CI=true they fail.
func node(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("node")
	if err == nil {
		if _, err = os.Stat(filepath.Join("testdata", "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
			err = errors.New("the A2A JavaScript SDK is not installed")
		}
	}
	if err != nil {
		msg := "needs Node.js 20+ and the pinned A2A JavaScript SDK: run `npm ci --prefix actions/a2a/testdata` (" + err.Error() + ")"
		if testenv.CI() {
			t.Fatal(msg)
		}
		testenv.Note("A2A JavaScript SDK", msg)
		t.Skip(msg)
	}
	return bin
}

// jsLines runs a script of testdata and returns its JSON lines by step.
func jsLines(t *testing.T, ctx context.Context, script string, args ...string) map[string]map[string]any {
	t.Helper()
	cmd := exec.CommandContext(ctx, node(t), append([]string{script}, args...)...)
	cmd.Dir = "testdata"
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	steps := make(map[string]map[string]any)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("node %s printed %q", script, line)
		}
		steps[m["step"].(string)] = m
	}
	t.Logf("node %s:\n%s", script, out)
	return steps
}

// TestJSClient: the A2A JavaScript SDK 1.3.0 (protocol 1.0) as a client of
// the server: card, send, get, a failure, input required then approval,
// cancel, stream, an unknown task.
func TestJSClient(t *testing.T) {
	node(t)
	w := newWorld(t, "", true)
	ctx := testCtx(t)
	go func() {
		select {
		case who := <-w.ap.asked:
			if who == "alice" {
				w.ap.decide <- true
			}
		case <-ctx.Done():
		}
	}()
	steps := jsLines(t, ctx, "client.mjs", w.http.URL+"/agents/Calculator/", "alice-token")
	check := func(step, want string) {
		t.Helper()
		if got := dump(steps[step]); !strings.Contains(got, want) {
			t.Errorf("%s: %s, want %s", step, got, want)
		}
	}
	check("card", `"skills":["add","divide","reset","wait"]`) // the public card: what a caller without a token sees
	check("send", `"result":{"result":3},"state":"TASK_STATE_COMPLETED"`)
	check("get", `"result":{"result":3},"state":"TASK_STATE_COMPLETED"`)
	check("failed", `"state":"TASK_STATE_FAILED"`)
	check("failed", `"text":"action_failed: cannot divide 1 by zero`)
	check("waiting", `"state":"TASK_STATE_INPUT_REQUIRED"`)
	check("input-required", `"result":{"result":"reset done"},"state":"TASK_STATE_COMPLETED"`)
	check("cancel", `"canceled":"TASK_STATE_CANCELED"`)
	check("cancel", `"state":"TASK_STATE_CANCELED"`)
	check("stream", `"events":["task:TASK_STATE_SUBMITTED","status:TASK_STATE_WORKING","artifact:{\"result\":5}","status:TASK_STATE_COMPLETED"]`)
	check("unknown-task", `"error":"`)
}

// TestJSClient03: the same SDK through its 0.3 transport, at the server's
// 0.3 endpoint.
func TestJSClient03(t *testing.T) {
	node(t)
	w := newWorld(t, "", false) // Compat03 on
	steps := jsLines(t, testCtx(t), "client03.mjs", w.http.URL+"/agents/Calculator/v0.3")
	for step, want := range map[string]string{
		"send":   `"result":{"result":3},"state":"TASK_STATE_COMPLETED"`,
		"get":    `"result":{"result":3},"state":"TASK_STATE_COMPLETED"`,
		"failed": `"step":"failed","text":"action_failed: cannot divide 1 by zero`,
	} {
		if got := dump(steps[step]); !strings.Contains(got, want) {
			t.Errorf("%s: %s, want %s", step, got, want)
		}
	}
}

// TestJSServer: an agent served by the A2A JavaScript SDK joins a space:
// its skill and say answer, a question (input required) is answered in the
// same conversation, a handoff reaches it, a call that never ends times
// out, and a server that has gone is an error.
func TestJSServer(t *testing.T) {
	bin := node(t)
	ctx := testCtx(t)
	cmd := exec.CommandContext(ctx, bin, "server.mjs")
	cmd.Dir = "testdata"
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	defer stop()
	lines := bufio.NewReader(stdout)
	line, err := lines.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		t.Fatalf("the JS server: %q %v", line, err)
	}
	canceled := make(chan string, 4)
	go func() {
		for {
			l, err := lines.ReadString('\n')
			if err != nil {
				return
			}
			if id, ok := strings.CutPrefix(strings.TrimSpace(l), "canceled "); ok {
				canceled <- id
			}
		}
	}()
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening "))

	told := make(chan string, 4)
	triage := agency.MustNewAgent("Triage")
	r, user := joined(t, a2a.RemoteConfig{URL: url, Timeout: 2 * time.Second, PollInterval: 20 * time.Millisecond, HandoffFrom: []string{"Triage"}}, triage, listener("Person", told))
	if r.Agent().ID() != "Echo" {
		t.Fatalf("id %q", r.Agent().ID())
	}
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Echo", "help", nil)
	if err != nil || help["shout"].Description != "Says it back in capitals." || help["say"].Args == nil {
		t.Fatalf("help %v %v", help, err)
	}
	if got, err := agency.Call[string](ctx, user, "Echo", "shout", map[string]any{"message": "hi"}); err != nil || got != "HI" {
		t.Fatalf("shout = %q %v", got, err)
	}
	if got, err := agency.Call[string](ctx, user, "Echo", "say", openai.SayArgs{Content: "hi"}); err != nil || got != "echo: hi" {
		t.Fatalf("say = %q %v", got, err)
	}
	say := func(text string) string {
		t.Helper()
		m, err := user.RequestMessage(ctx, &agency.Message{To: "Echo", Action: "say", Args: openai.SayArgs{Content: text}, Meta: map[string]any{"conversation": "c1", "tool_call_id": "t"}})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := agency.Value[string](m)
		return s
	}
	if got := say("ask"); got != "What is your name?" {
		t.Fatalf("ask = %q", got)
	}
	if got := say("Ada"); got != "hello, Ada" {
		t.Fatalf("the answer = %q", got)
	}
	// A handoff: the remote answers the conversation's user.
	if _, err := agency.Call[any](ctx, triage, "Echo", handoff.Action, handoff.Transfer{Conversation: "c2", User: "Person", Message: "over to you"}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-told:
		if got != "echo: over to you" {
			t.Fatalf("the user was told %q", got)
		}
	case <-ctx.Done():
		t.Fatal("the user was told nothing")
	}
	// A call that never ends times out, and the remote task is canceled.
	start := time.Now()
	_, err = agency.Call[string](ctx, user, "Echo", "say", openai.SayArgs{Content: "slow"})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("slow: %v", err)
	}
	t.Logf("slow: %v after %v", err, time.Since(start))
	select {
	case id := <-canceled:
		t.Logf("the remote task %s was canceled", id)
	case <-time.After(10 * time.Second):
		t.Fatal("the task given up was not canceled on the remote")
	}
	stop()
	_, err = agency.Call[string](ctx, user, "Echo", "say", openai.SayArgs{Content: "hi"})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), a2a.ErrRemote.Error()) {
		t.Fatalf("after the server stopped: %v", err)
	}
}

// listener is an agent whose say reports what it is told.
func listener(id string, told chan<- string) *agency.Agent {
	a := agency.MustNewAgent(id)
	agency.Handle(a, "say", func(_ context.Context, args openai.SayArgs) (string, error) {
		told <- args.Content
		return "heard", nil
	})
	return a
}
