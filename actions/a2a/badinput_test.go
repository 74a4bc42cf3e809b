package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/seed72275b23/agency-go/agency"
)

// Bad input gets a clear JSON-RPC error, and the server keeps serving.
func TestServerBadInput(t *testing.T) {
	w := newWorld(t, "", false)
	url := w.http.URL + "/agents/Calculator/"
	for _, c := range []struct {
		name, body string
		code       int
		says       string
	}{
		{"not JSON", `{"jsonrpc": "2.0", "id": 1, "method": `, -32700, ""},
		{"not JSON-RPC 2.0", `{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}`, -32600, ""},
		{"unknown method", `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}`, -32601, ""},
		{"bad params", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 7}}`, -32602, ""},
		{"unknown task", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}`, -32001, ""},
		{"cancel an unknown task", `{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "no-such-task"}}`, -32001, ""},
		{"over the limit", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"pad": "` + strings.Repeat("x", 70<<10) + `"}}`, -32600, "limit of 65536 bytes"},
	} {
		r := post(t, url, "", []byte(c.body))
		if r.Error == nil || r.Error.Code != c.code || !strings.Contains(r.Error.Message, c.says) {
			t.Errorf("%s: HTTP %d, error %+v; want code %d", c.name, r.Status, r.Error, c.code)
		}
	}
	// A body over the limit without a Content-Length (chunked) is cut too.
	req, _ := http.NewRequest("POST", url, struct{ *bytes.Reader }{bytes.NewReader(bytes.Repeat([]byte("x"), 70<<10))})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over the limit: HTTP %d", resp.StatusCode)
	}
	// An agent that is not served.
	if r := rpc(t, w.http.URL+"/agents/Nobody/", "", "GetTask", map[string]any{"id": "x"}); r.Error == nil || r.Status != 404 {
		t.Errorf("an agent not served: %+v", r)
	}
	// Still serving.
	if got := resultOf(t, send(t, url, "", call("add", map[string]any{"a": 2, "b": 2}))); got != 4.0 {
		t.Fatalf("add after bad input = %v", got)
	}
}

// A caller reads, cancels and continues only its own tasks; a request
// without a good token is refused.
func TestServerCallers(t *testing.T) {
	w := newWorld(t, "", true, agency.MustNewAgent("Other"))
	url := w.http.URL + "/agents/Calculator/"

	for _, token := range []string{"", "forged"} {
		r := rpc(t, url, token, "SendMessage", map[string]any{"message": a2a.NewMessage(a2a.MessageRoleUser, call("add", map[string]any{"a": 1, "b": 1}))})
		if r.Status != http.StatusUnauthorized || r.Error == nil || r.Error.Code != -31401 {
			t.Errorf("token %q: HTTP %d %+v", token, r.Status, r.Error)
		}
	}

	task := send(t, url, "alice-token", call("secret", nil))
	if got := resultOf(t, task); got != "42" {
		t.Fatalf("alice's secret = %v", got)
	}
	typ, _ := failureOf(t, send(t, url, "bob-token", call("secret", nil)))
	if typ != "permission_denied" && typ != "not_found" {
		t.Fatalf("bob's secret: %s", typ)
	}

	if _, r := getTask(t, url, "bob-token", task.ID); r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("bob read alice's task: %s", r.Result)
	}
	if _, r := getTask(t, w.http.URL+"/agents/Other/", "alice-token", task.ID); r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("alice read the Calculator's task at another agent: %s", r.Result)
	}
	if r := rpc(t, url, "bob-token", "CancelTask", map[string]any{"id": task.ID}); r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("bob canceled alice's task: %s", r.Result)
	}
	more := a2a.NewMessage(a2a.MessageRoleUser, call("add", map[string]any{"a": 1, "b": 1}))
	more.TaskID = task.ID
	if r := rpc(t, url, "bob-token", "SendMessage", map[string]any{"message": more}); r.Error == nil {
		t.Fatalf("bob wrote to alice's task: %s", r.Result)
	}
	r := rpc(t, url, "bob-token", "ListTasks", map[string]any{})
	if r.Error != nil || strings.Contains(string(r.Result), string(task.ID)) {
		t.Fatalf("bob's list: %s %+v", r.Result, r.Error)
	}
	if again, r := getTask(t, url, "alice-token", task.ID); r.Error != nil || again.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("alice's task: %+v", r.Error)
	}

	// Nor may bob follow alice's task while it runs.
	running := a2a.NewMessage(a2a.MessageRoleUser, call("wait", nil))
	r = rpc(t, url, "alice-token", "SendMessage", map[string]any{"message": running, "configuration": map[string]any{"returnImmediately": true}})
	var started struct {
		Task *a2a.Task `json:"task"`
	}
	if err := json.Unmarshal(r.Result, &started); err != nil || started.Task == nil {
		t.Fatalf("a task that waits: %s %+v", r.Result, r.Error)
	}
	<-w.started
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": map[string]any{"id": started.Task.ID}})
	sctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second) // a stream that stays open is the failure
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "POST", url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer bob-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body) // what came before the stream ended or the timeout
	resp.Body.Close()
	if !strings.Contains(string(got), "-32001") || strings.Contains(string(got), "TASK_STATE") {
		t.Fatalf("bob subscribed to alice's task: %s", got)
	}
	// Alice may: her stream starts with the task as it is.
	actx, acancel := context.WithTimeout(testCtx(t), time.Second)
	defer acancel()
	req, _ = http.NewRequestWithContext(actx, "POST", url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(got), "TASK_STATE_WORKING") {
		t.Fatalf("alice's own subscription: %s", got)
	}
	if r := rpc(t, url, "alice-token", "CancelTask", map[string]any{"id": started.Task.ID}); r.Error != nil {
		t.Fatalf("cancel: %+v", r.Error)
	}

	// The approver learns who asks.
	task = send(t, url, "bob-token", call("reset", nil))
	if who := <-w.ap.asked; who != "bob" {
		t.Fatalf("the approver was asked for %q", who)
	}
	w.ap.decide <- true
	waitState(t, url, "bob-token", task.ID, a2a.TaskStateCompleted)
}
