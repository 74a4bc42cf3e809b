package a2a_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func TestServerCallsActions(t *testing.T) {
	w := newWorld(t, "", false)
	url := w.http.URL + "/agents/Calculator/"

	task := send(t, url, "", call("add", map[string]any{"a": 1, "b": 2}))
	if got := resultOf(t, task); got != 3.0 {
		t.Fatalf("add = %v", got)
	}
	again, _ := getTask(t, url, "", task.ID)
	if again == nil || again.Status.State != a2a.TaskStateCompleted || resultOf(t, again) != 3.0 {
		t.Fatalf("GetTask = %s", dump(again))
	}

	typ, text := failureOf(t, send(t, url, "", call("divide", map[string]any{"a": 1, "b": 0})))
	if typ != "action_failed" || !strings.Contains(text, "divisor b other than 0") {
		t.Fatalf("divide by 0: %s %s", typ, text)
	}
	typ, text = failureOf(t, send(t, url, "", call("add", map[string]any{"a": 1})))
	if typ != "invalid_args" || !strings.Contains(text, "b: missing") {
		t.Fatalf("add without b: %s %s", typ, text)
	}
	typ, text = failureOf(t, send(t, url, "", call("secret", nil)))
	if typ != "permission_denied" && typ != "not_found" {
		t.Fatalf("secret for the anonymous caller: %s %s", typ, text)
	}
	typ, text = failureOf(t, send(t, url, "", a2a.NewTextPart("hello")))
	if typ != "not_found" || !strings.Contains(text, "say") {
		t.Fatalf("text to an agent without say: %s %s", typ, text)
	}
	typ, text = failureOf(t, send(t, url, "", a2a.NewDataPart(map[string]any{"args": map[string]any{}})))
	if typ != "invalid_args" || !strings.Contains(text, `"action"`) {
		t.Fatalf("a data part without action: %s %s", typ, text)
	}
}

func TestServerCard(t *testing.T) {
	w := newWorld(t, "", true)
	for _, path := range []string{"/.well-known/agent-card.json", "/agents/Calculator/.well-known/agent-card.json"} {
		resp, err := http.Get(w.http.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var card a2a.AgentCard
		if err := json.Unmarshal(b, &card); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s %v", path, resp.StatusCode, b, err)
		}
		if card.Name != "Calculator" || card.SupportedInterfaces[0].URL != w.http.URL+"/agents/Calculator/" || !card.Capabilities.Streaming {
			t.Fatalf("%s: %s", path, b)
		}
		var skills []string
		for _, s := range card.Skills {
			skills = append(skills, s.ID)
		}
		if ex := card.Skills[0].Examples; len(ex) != 1 || ex[0] != `{"action":"add","args":{"a":1,"b":2}}` {
			t.Fatalf("add's examples: %q", ex)
		}
		// The anonymous view: secret is alice's only.
		if strings.Join(skills, ",") != "add,divide,reset,wait" {
			t.Fatalf("skills %v", skills)
		}
		if _, ok := card.SecuritySchemes["bearer"]; !ok {
			t.Fatalf("no bearer scheme: %s", b)
		}
	}
	req, _ := http.NewRequest("GET", w.http.URL+"/agents/Calculator/.well-known/agent-card.json", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"secret"`) {
		t.Fatalf("alice's card has no secret: %s", b)
	}
}

// With Compat03 the card is also one a 0.3 caller reads.
func TestServerCard03(t *testing.T) {
	w := newWorld(t, "", false)
	resp, err := http.Get(w.http.URL + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var card struct {
		a2a.AgentCard
		URL             string `json:"url"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(b, &card); err != nil {
		t.Fatal(err)
	}
	if card.URL != w.http.URL+"/agents/Calculator/v0.3" || card.ProtocolVersion != "0.3" || len(card.SupportedInterfaces) != 2 {
		t.Fatalf("card: %s", b)
	}
}

func TestServerApprovalAndCancel(t *testing.T) {
	w := newWorld(t, "", false)
	url := w.http.URL + "/agents/Calculator/"

	task := send(t, url, "", call("reset", nil))
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("reset: %s", dump(task))
	}
	if who := <-w.ap.asked; who != "a2a" {
		t.Fatalf("the approver was asked for %q", who)
	}
	// The input is the approver's: a further message gets the task back, still waiting.
	more := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("please"))
	more.TaskID, more.ContextID = task.ID, task.ContextID
	r := rpc(t, url, "", "SendMessage", map[string]any{"message": more})
	if r.Error != nil || !strings.Contains(string(r.Result), "TASK_STATE_INPUT_REQUIRED") || !strings.Contains(string(r.Result), "waits for approval") {
		t.Fatalf("a message to the waiting task: %s %+v", r.Result, r.Error)
	}
	w.ap.decide <- true
	waitState(t, url, "", task.ID, a2a.TaskStateCompleted)

	task = send(t, url, "", call("reset", nil))
	<-w.ap.asked
	w.ap.decide <- false
	done := waitState(t, url, "", task.ID, a2a.TaskStateFailed)
	if typ, _ := failureOf(t, done); typ != "permission_denied" {
		t.Fatalf("refused: %s", dump(done))
	}

	// Cancel a call under way: the handler's context ends.
	msg := a2a.NewMessage(a2a.MessageRoleUser, call("wait", nil))
	ch := make(chan rpcReply, 1)
	go func() { ch <- rpc(t, url, "", "SendMessage", map[string]any{"message": msg}) }()
	<-w.started
	var id a2a.TaskID
	for deadline := time.Now().Add(10 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r := rpc(t, url, "", "ListTasks", map[string]any{"status": "TASK_STATE_WORKING"})
		var list a2a.ListTasksResponse
		_ = json.Unmarshal(r.Result, &list)
		if len(list.Tasks) > 0 {
			id = list.Tasks[0].ID
		}
	}
	if id == "" {
		t.Fatal("the waiting task is not listed")
	}
	r = rpc(t, url, "", "CancelTask", map[string]any{"id": id})
	if r.Error != nil {
		t.Fatalf("cancel: %+v", r.Error)
	}
	if got := <-ch; got.Error != nil || !strings.Contains(string(got.Result), "TASK_STATE_CANCELED") {
		t.Fatalf("the canceled send answered %s %+v", got.Result, got.Error)
	}
	waitState(t, url, "", id, a2a.TaskStateCanceled)

	// Cancel a call that waits for approval.
	task = send(t, url, "", call("reset", nil))
	<-w.ap.asked
	if r := rpc(t, url, "", "CancelTask", map[string]any{"id": task.ID}); r.Error != nil {
		t.Fatalf("cancel: %+v", r.Error)
	}
	waitState(t, url, "", task.ID, a2a.TaskStateCanceled)
}

// waitState polls GetTask until the task is in state.
func waitState(t *testing.T, url, token string, id a2a.TaskID, state a2a.TaskState) *a2a.Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		task, r := getTask(t, url, token, id)
		if r.Error != nil {
			t.Fatalf("GetTask %s: %+v", id, r.Error)
		}
		if task.Status.State == state {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s: %s", id, task.Status.State, state, dump(task))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
