package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// wait bounds each wait for the program: a safety net.
const wait = 60 * time.Second

// The program, built once for the tests of this binary.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// build builds the program, with the race detector when this test binary
// has it, and returns its path.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "support-test"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "support")
		args := []string{"build", "-o", binPath}
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "-race" && s.Value == "true" {
					args = append(args, "-race")
				}
			}
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// screen collects what the program writes, for waitFor.
type screen struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	read    int
	changed chan struct{}
}

func newScreen() *screen { return &screen{changed: make(chan struct{}, 1)} }

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until text is written after what the last waitFor
// matched.
func (s *screen) waitFor(t *testing.T, text string) {
	t.Helper()
	timeout := time.After(wait)
	for {
		s.mu.Lock()
		i := strings.Index(s.buf.String()[s.read:], text)
		if i >= 0 {
			s.read += i + len(text)
		}
		s.mu.Unlock()
		if i >= 0 {
			return
		}
		select {
		case <-s.changed:
		case <-timeout:
			t.Fatalf("waited in vain for %q; the program wrote:\n%s", text, s.String())
		}
	}
}

// program is the program running as a process, its stdin a pipe.
type program struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *screen
	stderr *screen
	done   chan error
}

func start(t *testing.T, bin, dir string, env []string, args ...string) *program {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	p := &program{t: t, cmd: cmd, stdout: newScreen(), stderr: newScreen(), done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *program) line(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, s+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// exit waits for the program to end and returns its exit status.
func (p *program) exit() int {
	p.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		p.t.Fatal(err)
	case <-time.After(wait):
		p.t.Fatalf("the program did not end; it wrote:\n%s\n%s", p.stdout.String(), p.stderr.String())
	}
	return -1
}

// step is a scripted model answer for one agent: the test fails when
// another agent's model asks (the agents are told apart by their system
// prompts).
func step(t *testing.T, agent string, answer openaitest.Step) openaitest.Step {
	prompts := map[string]string{triageID: "customer service bot", refundsID: "customer support agent", salesID: "sales agent"}
	return openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		if len(r.Messages) == 0 || !strings.Contains(r.Messages[0].Content, prompts[agent]) {
			t.Errorf("a model call for %s went to another agent: %+v", agent, r.Messages)
		}
		for _, tool := range r.Tools {
			if strings.HasSuffix(tool.Name, "__say") || strings.HasSuffix(tool.Name, "__handoff") {
				t.Errorf("%s was offered %s", agent, tool.Name)
			}
		}
		return answer
	}}
}

func text(s string) openaitest.Step { return openaitest.Step{Text: s} }
func call(name, args string) openaitest.Step {
	return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: name, Arguments: args}}}
}

// The seed's conversation, typed into the program through a pipe: what
// it prints is the contract a person and a script rely on.
func TestTranscript(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	srv := openaitest.NewServer(t,
		step(t, triageID, text("I can help with that! Could I ask what item you're seeking a refund for?")),
		step(t, triageID, call("transfer_to_issues_and_repairs", "{}")),
		step(t, refundsID, text("I see you're looking for a refund on a pair of shoes. Can you tell me what the issue is with the shoes?")),
		step(t, refundsID, text("I recommend trying a size up as a fix; would that work for you?")),
		step(t, refundsID, call("Shop__look_up_item", `{"search_query":"shoes"}`)),
		step(t, refundsID, call("Shop__execute_refund", `{"item_id":"item_132612938","reason":"not provided"}`)),
		step(t, refundsID, text("Your refund has been successfully processed!\nIf you have any other questions, feel free to ask.")),
		step(t, refundsID, text("I can help with that, let me transfer you to a supervisor.")),
		step(t, refundsID, call("transfer_back_to_triage", "{}")),
		step(t, triageID, call("escalate_to_human", "{}")),
	)
	env := []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=test-key", "OPENAI_MODEL=test-model"}
	p := start(t, bin, dir, env)
	p.stderr.waitFor(t, "type a message")
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the model was called %d times before the first line", n)
	}

	p.line("I want a refund")
	p.stdout.waitFor(t, "Triage: I can help with that! Could I ask what item you're seeking a refund for?\n")
	p.line("A pair of shoes I bought")
	p.stdout.waitFor(t, "[Triage → Refunds]\n")
	p.stdout.waitFor(t, "Refunds: I see you're looking for a refund on a pair of shoes. Can you tell me what the issue is with the shoes?\n")
	p.line("The shoes are too small")
	p.stdout.waitFor(t, "Refunds: I recommend trying a size up as a fix; would that work for you?\n")
	p.line("no I want a refund")
	p.stdout.waitFor(t, "Refunds: Your refund has been successfully processed!\nIf you have any other questions, feel free to ask.\n")
	p.line("I want to talk to your manager")
	p.stdout.waitFor(t, "Refunds: I can help with that, let me transfer you to a supervisor.\n")
	p.line("Okay")
	p.stdout.waitFor(t, "[Refunds → Triage]\n")
	p.stdout.waitFor(t, "[Triage → Human]\n")
	// The operator is shown the conversation so far, verbatim.
	p.stdout.waitFor(t, "--- Human, Triage hands you conversation support")
	for _, l := range []string{
		"User: I want a refund\n",
		"Triage: I can help with that! Could I ask what item you're seeking a refund for?\n",
		"User: A pair of shoes I bought\n",
		"Refunds: I see you're looking for a refund",
		"Refunds: Your refund has been successfully processed!\nIf you have any other questions, feel free to ask.\n",
		"User: Okay\n",
		"--- your answer goes to User\n",
	} {
		p.stdout.waitFor(t, l)
	}
	p.line("Hello this is manager")
	p.stdout.waitFor(t, "Human: Hello this is manager\n")
	p.line("Hi! Thanks for your service. I give you a 5 start!")
	p.stdout.waitFor(t, "User: Hi! Thanks for your service. I give you a 5 start!\n") // shown to the operator
	p.line("Thanks.")
	p.stdout.waitFor(t, "Human: Thanks.\n")
	p.line("exit")
	if code := p.exit(); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, p.stderr.String())
	}

	out := p.stdout.String()
	for _, h := range []string{"[Triage → Refunds]", "[Refunds → Triage]", "[Triage → Human]"} {
		if n := strings.Count(out, h); n != 1 {
			t.Errorf("%s printed %d times", h, n)
		}
	}
	if n := strings.Count(out, "→"); n != 3 {
		t.Errorf("%d handoffs printed:\n%s", n, out)
	}
	if srv.Left() != 0 {
		t.Errorf("%d model steps left", srv.Left())
	}
	reqs := srv.Requests()
	if m := reqs[6].Messages; m[len(m)-1].Content != `"success"` {
		t.Errorf("the refund's result read %q", m[len(m)-1].Content)
	}
	var tools []string
	for _, tool := range reqs[0].Tools {
		tools = append(tools, tool.Name)
	}
	if strings.Join(tools, ",") != "transfer_to_issues_and_repairs,transfer_to_sales_agent,escalate_to_human" {
		t.Errorf("Triage's tools %v", tools)
	}
	if _, err := os.Stat(filepath.Join(dir, "support.db")); err != nil {
		t.Errorf("the store file: %v", err)
	}

	// Started again in the same folder, the program continues the
	// conversation with the agent that holds it: the operator.
	p = start(t, bin, dir, env)
	p.stderr.waitFor(t, "the conversation is with Human")
	p.line("Are you still there?")
	p.stdout.waitFor(t, "User: Are you still there?\n")
	p.line("Yes, still here.")
	p.stdout.waitFor(t, "Human: Yes, still here.\n")
	if err := p.stdin.Close(); err != nil { // the end of input ends it too
		t.Fatal(err)
	}
	if code := p.exit(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if n := len(srv.Requests()); n != 10 {
		t.Errorf("the model was called %d times in all", n)
	}
}

// Without a model server the program says how to set one, and fails.
func TestNoServer(t *testing.T) {
	bin := build(t)
	p := start(t, bin, t.TempDir(), []string{"OPENAI_BASE_URL=", "OPENAI_API_KEY="})
	if code := p.exit(); code != 2 {
		t.Fatalf("exit status %d without OPENAI_API_KEY or OPENAI_BASE_URL, want 2 (bad usage)", code)
	}
	if msg := p.stderr.String(); !strings.Contains(msg, "OPENAI_BASE_URL=") || !strings.Contains(msg, "OPENAI_API_KEY=") {
		t.Errorf("the program said %q", msg)
	}
}

// An API key is enough to start (OpenAI is then the server): the program
// starts and, told to exit before any question, exits 0 without calling the
// model.
func TestKeyAlone(t *testing.T) {
	bin := build(t)
	p := start(t, bin, t.TempDir(), []string{"OPENAI_BASE_URL=", "OPENAI_API_KEY=sk-unused"})
	p.stderr.waitFor(t, "type a message")
	p.line("exit")
	if code := p.exit(); code != 0 {
		t.Fatalf("exit status %d with OPENAI_API_KEY alone; stderr:\n%s", code, p.stderr.String())
	}
}

// With -demo the team runs end to end with no key and no model server: a
// scripted model in the process plays Triage, Sales and Refunds.
func TestDemo(t *testing.T) {
	bin := build(t)
	p := start(t, bin, t.TempDir(), []string{"OPENAI_BASE_URL=", "OPENAI_API_KEY="}, "-demo", "-log", "info")
	p.stderr.waitFor(t, "type a message")
	p.line("I want a refund")
	p.stdout.waitFor(t, "[Triage → Refunds]\n")
	p.stdout.waitFor(t, "Refunds: Refunds here. What is the matter with it?\n")
	p.line("My skates broke.")
	p.stdout.waitFor(t, "Refunds: Refunds here. Have you tried hitting it with a hammer?")
	p.line("yes")
	p.stdout.waitFor(t, "Refunds: Done: your refund is on its way.\n")
	p.stderr.waitFor(t, "shop: refund executed")
	p.line("I want to buy something")
	p.stdout.waitFor(t, "[Refunds → Triage]\n[Triage → Sales]\n")
	p.line("yes")
	p.stdout.waitFor(t, "Sales: Ordered!")
	p.stderr.waitFor(t, "shop: order executed")
	p.line("exit")
	if code := p.exit(); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, p.stderr.String())
	}
}
