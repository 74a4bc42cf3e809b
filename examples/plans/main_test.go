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
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/examples/internal/cli"
)

// Without a model server the program says so and fails.
func TestNoModel(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	var stderr strings.Builder
	err := run(t.Context(), []string{"-db", filepath.Join(t.TempDir(), "p.db")}, io.Discard, &stderr)
	if !errors.Is(err, openai.ErrNoEndpoint) || cli.Status(err) != cli.StatusUsage {
		t.Fatalf("run: %v (exit status %d), want ErrNoEndpoint and status %d", err, cli.Status(err), cli.StatusUsage)
	}
	if !strings.Contains(stderr.String(), "OPENAI_BASE_URL=") || !strings.Contains(stderr.String(), "OPENAI_API_KEY=") {
		t.Errorf("the message does not say what to set: %q", stderr.String())
	}
}

// program is a run of the example in this test process, with what it
// prints.
type program struct {
	t     *testing.T
	lines chan string
	done  chan error
	stop  context.CancelFunc
}

// start runs the program with args until the test ends or stop is called.
func start(t *testing.T, args ...string) *program {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	p := &program{t: t, lines: make(chan string, 64), done: make(chan error, 1), stop: cancel}
	go func() {
		p.done <- run(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		cancel()
		for range p.lines {
		}
	})
	return p
}

// next returns the next line the program prints.
func (p *program) next() string {
	p.t.Helper()
	select {
	case l := <-p.lines:
		return l
	case <-time.After(30 * time.Second):
		p.t.Fatal("the program printed nothing")
	}
	return ""
}

// end stops the program and checks that it ended without an error.
func (p *program) end() {
	p.t.Helper()
	p.stop()
	if err := <-p.done; err != nil {
		p.t.Fatalf("run: %v", err)
	}
}

// modelServer is a scripted model whose planner submits the onboarding
// plan, set as the program's model server.
func modelServer(t *testing.T) {
	plan := `{"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}},` +
		`{"agent":"TechSupportAgent","action":"set_up_laptop","args":{"name":"Jessica Smith"},"text":"Laptop for Jessica"}],"summary":"Onboard Jessica"}`
	srv := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan", Arguments: plan}}},
		openaitest.Step{Text: "Submitted."})
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "test")
}

// onboard creates the task through the program's API at base, approves
// every step, and checks that the plan completed; the specialists' lines
// then come from sp.
func onboard(t *testing.T, base string, sp *program) {
	t.Helper()
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
		if l := sp.next(); !strings.HasPrefix(l, want) {
			t.Errorf("printed %q, want %q…", l, want)
		}
	}
}

// ready waits for the program's "ready" line and, for one that serves the
// API, returns the address from the line after it.
func (p *program) ready(serves bool) string {
	p.t.Helper()
	if l := p.next(); l != "ready" {
		p.t.Fatalf("printed %q, want ready", l)
	}
	if !serves {
		return ""
	}
	base, ok := strings.CutPrefix(p.next(), "listening on ")
	if !ok {
		p.t.Fatal("no listening line")
	}
	return base
}

// The program serves the onboarding example: a task, its plan, every step
// approved at once, each specialist's action run once.
func TestOnboarding(t *testing.T) {
	modelServer(t)
	p := start(t, "-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "p.db"), "-user", "u1")
	onboard(t, p.ready(true), p)
	p.end()
}

// The same with the specialists in a program of their own, both on
// RabbitMQ and sharing a PostgreSQL database, as the package
// documentation shows.
func TestOnboardingOnRabbitMQAndPostgreSQL(t *testing.T) {
	modelServer(t)
	t.Setenv("AMQP_URL", amqptest.URL(t))
	t.Setenv("DATABASE_URL", pgtest.DSN(t))
	common := []string{"-amqp", "-exchange", amqptest.Exchange(t), "-pg"}
	specialists := start(t, append(common, "-agents", "specialists")...)
	specialists.ready(false)
	coordinator := start(t, append(common, "-agents", "coordinator", "-addr", "127.0.0.1:0", "-user", "u1")...)
	onboard(t, coordinator.ready(true), specialists)
	coordinator.end()
	specialists.end()
}
