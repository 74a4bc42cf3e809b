package a2a_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// rpcReply is a JSON-RPC response as it came.
type rpcReply struct {
	Status int
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// post sends body to url with the bearer token (none when empty).
func post(t *testing.T, url, token string, body []byte) rpcReply {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := rpcReply{Status: resp.StatusCode}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("not a JSON-RPC response (HTTP %d): %s", resp.StatusCode, b)
	}
	return r
}

// rpc calls method with params.
func rpc(t *testing.T, url, token, method string, params any) rpcReply {
	t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	return post(t, url, token, b)
}

// send sends a message with the given parts and returns the task.
func send(t *testing.T, url, token string, parts ...*a2a.Part) *a2a.Task {
	t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	r := rpc(t, url, token, "SendMessage", map[string]any{"message": msg})
	if r.Error != nil {
		t.Fatalf("SendMessage: %d %s", r.Error.Code, r.Error.Message)
	}
	var res struct {
		Task *a2a.Task `json:"task"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || res.Task == nil {
		t.Fatalf("SendMessage result %s: %v", r.Result, err)
	}
	return res.Task
}

// getTask returns the task, or the JSON-RPC error.
func getTask(t *testing.T, url, token string, id a2a.TaskID) (*a2a.Task, rpcReply) {
	t.Helper()
	r := rpc(t, url, token, "GetTask", map[string]any{"id": id})
	if r.Error != nil {
		return nil, r
	}
	var task a2a.Task
	if err := json.Unmarshal(r.Result, &task); err != nil {
		t.Fatalf("GetTask result %s: %v", r.Result, err)
	}
	return &task, r
}

func call(action string, args any) *a2a.Part {
	return a2a.NewDataPart(map[string]any{"action": action, "args": args})
}

// resultOf returns the {"result": …} of a completed task's artifact.
func resultOf(t *testing.T, task *a2a.Task) any {
	t.Helper()
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
		t.Fatalf("task %s: %s", task.Status.State, dump(task))
	}
	p := task.Artifacts[0].Parts[0]
	if d, ok := p.Data().(map[string]any); ok {
		return d["result"]
	}
	return p.Text()
}

// failureOf returns the error type and text of a failed task.
func failureOf(t *testing.T, task *a2a.Task) (string, string) {
	t.Helper()
	if task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil {
		t.Fatalf("task %s, want failed: %s", task.Status.State, dump(task))
	}
	for _, p := range task.Status.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			return fmt.Sprint(d["type"]), fmt.Sprint(d["error"])
		}
	}
	t.Fatalf("no error data part: %s", dump(task))
	return "", ""
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
