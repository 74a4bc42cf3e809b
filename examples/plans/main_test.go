package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
)

// Without a model server the program says so and fails.
func TestNoModel(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	err := run(t.Context(), []string{"-db", filepath.Join(t.TempDir(), "p.db")}, io.Discard, io.Discard)
	if !errors.Is(err, openai.ErrNoEndpoint) {
		t.Fatalf("run: %v, want ErrNoEndpoint", err)
	}
	if !strings.Contains(noModel, "OPENAI_BASE_URL") {
		t.Error("the message does not say what to set")
	}
}

// The program serves the onboarding example: a task, its plan, every step
// approved at once, each specialist's action run once.
func TestOnboarding(t *testing.T) {
	plan := `{"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}},` +
		`{"agent":"TechSupportAgent","action":"set_up_laptop","args":{"name":"Jessica Smith"},"text":"Laptop for Jessica"}],"summary":"Onboard Jessica"}`
	srv := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan", Arguments: plan}}},
		openaitest.Step{Text: "Submitted."})
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "test")

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "p.db"), "-user", "u1"}, pw, io.Discard)
		pw.Close()
	}()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("the program printed nothing")
		}
		return ""
	}
	if l := next(); l != "ready" {
		t.Fatalf("printed %q, want ready", l)
	}
	base, ok := strings.CutPrefix(next(), "listening on ")
	if !ok {
		t.Fatal("no listening line")
	}
	post := func(path, body string) map[string]any {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, v)
		}
		return v
	}
	r := post("/input_task", `{"session_id":"s1","description":"Onboard Jessica Smith"}`)
	if !strings.HasPrefix(r["status"].(string), "Plan created") {
		t.Fatalf("input_task: %v", r)
	}
	post("/approve_step_or_steps", `{"plan_id":"`+r["plan_id"].(string)+`","session_id":"s1","approved":true}`)
	resp, err := http.Get(base + "/plans?session_id=s1")
	if err != nil {
		t.Fatal(err)
	}
	var plans []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&plans)
	resp.Body.Close()
	if len(plans) != 1 || plans[0]["overall_status"] != "completed" {
		t.Fatalf("plans: %v", plans)
	}
	for _, want := range []string{"HrAgent.create_employee_record: employee record created for Jessica Smith",
		"TechSupportAgent.set_up_laptop: laptop ready for Jessica Smith"} {
		if l := next(); !strings.HasPrefix(l, want) {
			t.Errorf("printed %q, want %q…", l, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
