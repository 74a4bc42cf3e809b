package plan_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// buildExample builds examples/plans, with the race detector when this
// test binary has it.
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "plans")
	args := []string{"build", "-o", bin}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	cmd := exec.Command("go", append(args, "../../examples/plans")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proc is a running process of examples/plans.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced at each line
	exit  chan struct{}
}

func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, more: make(chan struct{}), exit: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.more)
			p.more = make(chan struct{})
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.exit)
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) kill() {
	select {
	case <-p.exit:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exit
	}
}

// waitLine waits for a line that starts with prefix and returns it.
func (p *proc) waitLine(prefix string) string {
	p.t.Helper()
	deadline := time.After(60 * time.Second)
	for i := 0; ; {
		p.mu.Lock()
		lines, more := p.lines, p.more
		p.mu.Unlock()
		for ; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], prefix) {
				return lines[i]
			}
		}
		select {
		case <-more:
		case <-p.exit:
			p.t.Fatalf("the process ended without printing %q", prefix)
		case <-deadline:
			p.t.Fatalf("no line %q in 60s", prefix)
		}
	}
}

func (p *proc) count(contains string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if strings.Contains(l, contains) {
			n++
		}
	}
	return n
}

// Scenario D, step 8: the coordinator and the HTTP API in process 1, the
// specialists in process 2, on RabbitMQ and PostgreSQL; process 1 is killed
// right after an approval and started again; every step runs once and the
// plan completes.
func TestScenarioDTwoProcesses(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	dsn := pgtest.DSN(t)
	exchange := amqptest.Exchange(t)
	suffix := strings.TrimPrefix(amqptest.Name("x"), "x")
	bin := buildExample(t)
	tool := "GroupChatManager" + suffix + "__submit_plan"
	sub := func(s string) string {
		return strings.NewReplacer("HrAgent", "HrAgent"+suffix, "TechSupportAgent", "TechSupportAgent"+suffix).Replace(s)
	}
	pl := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: tool, Arguments: sub(firstPlan)}}}, openaitest.Step{Text: "Plan submitted."},
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: tool, Arguments: sub(`{"replace_from":3,"steps":[{"agent":"HrAgent","action":"assign_buddy","args":{"name":"Jessica Smith"}},{"agent":"TechSupportAgent","action":"set_up_laptop","args":{"name":"Jessica Smith"}}]}`)}}},
		openaitest.Step{Text: "Revised."},
	)
	env := []string{"OPENAI_BASE_URL=" + pl.URL, "OPENAI_API_KEY=test", "AMQP_URL=" + url, "DATABASE_URL=" + dsn}
	common := []string{"-amqp", "-exchange", exchange, "-pg", "-suffix", suffix}

	specialists := startProc(t, bin, env, append(common, "-agents", "specialists")...)
	specialists.waitLine("ready")
	coordinator := func() (*proc, string) {
		p := startProc(t, bin, env, append(common, "-agents", "coordinator", "-addr", "127.0.0.1:0", "-user", "u1", "-wait", "0s", "-lease", "2s")...)
		base := strings.TrimPrefix(p.waitLine("listening on "), "listening on ")
		return p, base
	}
	p1, base := coordinator()

	call := func(method, path, body string, out any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var e any
			_ = json.NewDecoder(resp.Body).Decode(&e)
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, e)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	// until polls the plan, as a page does, until done holds for it.
	until := func(what string, done func(apiPlan) bool) apiPlan {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			var ps []apiPlan
			call("GET", "/plans?session_id=s1", "", &ps)
			if len(ps) == 1 && done(ps[0]) {
				return ps[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: never (%+v)", what, ps)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	stepsAre := func(want string) func(apiPlan) bool {
		return func(p apiPlan) bool { return statuses(p.Steps) == want }
	}

	call("POST", "/input_task", `{"session_id":"s1","description":"Onboard new employee Jessica Smith"}`, nil)
	p := until("plan", stepsAre("1 awaiting_feedback, 2 planned, 3 planned"))
	call("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, p.Steps[0].ID, p.ID), nil)
	p = until("step 1", stepsAre("1 completed, 2 awaiting_feedback, 3 planned"))

	// Process 1 dies right after step 2's approval is committed.
	call("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, p.Steps[1].ID, p.ID), nil)
	p1.kill()
	p1, base = coordinator()
	p = until("step 2 after the restart", stepsAre("1 completed, 2 completed, 3 awaiting_feedback"))

	call("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":false,"human_feedback":"assign a buddy first"}`, p.Steps[2].ID, p.ID), nil)
	p = until("revised plan", stepsAre("1 completed, 2 completed, 3 rejected, 4 awaiting_feedback, 5 planned"))
	call("POST", "/approve_step_or_steps", fmt.Sprintf(`{"plan_id":%q,"session_id":"s1","approved":true}`, p.ID), nil)
	p = until("plan completed", func(p apiPlan) bool { return p.OverallStatus == "completed" })

	for i, st := range p.Steps {
		if st.Status != "completed" {
			continue
		}
		if n := specialists.count("(step " + st.ID + ")"); n != 1 {
			t.Errorf("step %d (%s) ran %d times", i+1, st.Function, n)
		}
	}
	if n := specialists.count("(step "); n != 4 {
		t.Errorf("the specialists ran %d actions, want 4", n)
	}
	_ = p1
}
