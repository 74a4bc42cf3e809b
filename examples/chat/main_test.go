package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/examples/internal/cli"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// model is one step of the scripted model server: to a user message it
// answers with a tool call (the Host's shell_command when the message
// mentions the shell, else the Calculator's add of 2 and 3), or with HTTP
// 401 when the message says "fail"; to a tool result it answers with text
// that quotes the result.
func model(t *testing.T) openaitest.Step {
	return openaitest.Step{Func: func(req openaitest.Request) openaitest.Step {
		if got := req.Header.Get("Authorization"); got != "Bearer test-key" {
			t.Errorf("Authorization: %q", got)
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "user" && strings.Contains(last.Content, "fail"):
			return openaitest.Step{Status: http.StatusUnauthorized, Error: "Incorrect API key provided"}
		case last.Role == "user":
			agent, action, args := "Calculator", "add", `{"a":2,"b":3}`
			if strings.Contains(last.Content, "shell") {
				agent, action, args = "Host", "shell_command", `{"command":"touch chat-was-here"}`
			}
			return openaitest.Step{
				Text:      "I will ask " + agent + ".",
				ToolCalls: []openaitest.ToolCall{{Name: toolName(t, req, agent, action), Arguments: args}},
			}
		case last.Role == "tool":
			return openaitest.Step{Text: "The answer is " + last.Content + "."}
		}
		t.Errorf("unexpected last message %+v", last)
		return openaitest.Step{Text: "?"}
	}}
}

// toolName finds the tool that stands for agent's action by its name, so
// that the script does not depend on how the names are made.
func toolName(t *testing.T, req openaitest.Request, agent, action string) string {
	for _, tool := range req.Tools {
		if strings.HasPrefix(tool.Name, agent) && strings.HasSuffix(tool.Name, action) {
			return tool.Name
		}
	}
	t.Errorf("no tool for %s.%s among %d tools", agent, action, len(req.Tools))
	return agent + "__" + action
}

// screen is the terminal the chat writes to.
type screen struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	read    int // how far waitFor has matched
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

// waitFor waits until text appears after what the last waitFor matched.
func (s *screen) waitFor(t *testing.T, text string) {
	t.Helper()
	timeout := time.After(20 * time.Second) // a safety net
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
			t.Fatalf("waited in vain for %q; the screen shows:\n%s", text, s.String())
		}
	}
}

// session is a chat running against the scripted model, with a pipe for
// its stdin.
type session struct {
	t      *testing.T
	model  *openaitest.Server
	screen *screen
	input  *io.PipeWriter
	done   chan error // run's result
}

func startChat(t *testing.T, ctx context.Context) *session {
	t.Helper()
	steps := make([]openaitest.Step, 16) // more than any test makes calls
	for i := range steps {
		steps[i] = model(t)
	}
	srv := openaitest.NewServer(t, steps...)
	env := map[string]string{
		"OPENAI_API_KEY":  "test-key",
		"OPENAI_BASE_URL": srv.URL,
		"OPENAI_MODEL":    "scripted",
	}
	stdin, input := io.Pipe()
	s := &session{t: t, model: srv, screen: newScreen(), input: input, done: make(chan error, 1)}
	t.Cleanup(func() { input.Close() }) // ends the chat's reader
	go func() { s.done <- run(ctx, nil, func(k string) string { return env[k] }, stdin, s.screen, io.Discard) }()
	s.waitFor("Chat with Assistant")
	return s
}

// write types a line.
func (s *session) write(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.input, line+"\n"); err != nil {
		s.t.Fatalf("writing %q: %v", line, err)
	}
}

func (s *session) waitFor(text string) {
	s.t.Helper()
	s.screen.waitFor(s.t, text)
}

// end waits for run to return, and returns its error.
func (s *session) end() error {
	s.t.Helper()
	select {
	case err := <-s.done:
		return err
	case <-time.After(20 * time.Second): // a safety net
		s.t.Fatal("the chat did not end")
		return nil
	}
}

func TestChat(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startChat(t, ctx)

	// A plain line goes to the model, which calls the Calculator.
	s.write("What is 2 plus 3?")
	s.waitFor("The answer is 5.\n")

	// A slash command calls an action directly.
	s.write(`/Calculator.add {"a":2,"b":3}`)
	s.waitFor("Calculator.add: 5\n")
	s.write(`/Calculator.multiply {"a":2,"b":3.5}`)
	s.waitFor("Calculator.multiply: 7\n")
	s.write(`/Calculator.add {"a":2}`)
	s.waitFor(`Calculator.add failed: invalid_args: `)
	s.write(`/Calculator.add [2, 3]`)
	s.waitFor("The arguments must be a JSON object")
	s.write(`/Calculator`)
	s.waitFor("Say /Agent.action {json args}")
	s.write(`/Nobody.add`)
	s.waitFor("Nobody.add failed: agency: no such recipient")

	// The model asks the Host to run a command; the person refuses.
	s.write("Please use the shell.")
	s.waitFor("(Assistant thinks: I will ask Host.)\n")
	s.waitFor(`Allow Assistant to run shell_command {"command":"touch chat-was-here"}? [y/N] `)
	s.write("n")
	s.waitFor("The answer is ")
	s.waitFor(`not permitted for "Assistant"`)
	if _, err := os.Stat("chat-was-here"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused command ran: %v", err)
	}

	// The person runs a command and allows it.
	s.write(`/Host.shell_command {"command":"echo hi"}`)
	s.waitFor(`Allow User to run shell_command {"command":"echo hi"}? [y/N] `)
	s.write("y")
	s.waitFor(`Host.shell_command: {`)
	s.waitFor(`"stdout": "hi\n",`)

	// The model fails: the Assistant says so, once.
	s.write("Now fail.")
	s.waitFor("Assistant: Sorry, ")
	s.waitFor("Incorrect API key provided")
	// The User handles its own say after the Assistant's error response.
	s.write(`/User.say {"content":"marker"}`)
	s.waitFor("User: marker\n")
	if strings.Contains(s.screen.String(), "(Assistant:") {
		t.Errorf("the Assistant's failure was shown twice:\n%s", s.screen.String())
	}

	s.write("/quit")
	if err := s.end(); err != nil {
		t.Fatalf("run: %v", err)
	}

	// What the model was sent: the actions of every other agent as tools,
	// and the results of the tool calls.
	reqs := s.model.Requests()
	if len(reqs) != 5 {
		t.Fatalf("the model was called %d times, want 5", len(reqs))
	}
	var names []string
	for _, tool := range reqs[0].Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"Calculator", "add", "multiply", "Host", "shell_command", "read_file", "write_file", "list_files"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("the tools %v lack %s", names, want)
		}
	}
	if reqs[0].Model != "scripted" {
		t.Errorf("model %q, want the one OPENAI_MODEL names", reqs[0].Model)
	}
	if got := lastMessage(reqs[1]); got.Role != "tool" || got.Content != "5" {
		t.Errorf("the Calculator's result reached the model as %+v", got)
	}
	if got := lastMessage(reqs[3]); got.Role != "tool" || !strings.Contains(got.Content, "not permitted") {
		t.Errorf("the refusal reached the model as %+v", got)
	}
}

func lastMessage(r openaitest.Request) struct{ Role, Content string } {
	last := r.Messages[len(r.Messages)-1]
	return struct{ Role, Content string }{last.Role, last.Content}
}

// TestChatEnds checks that the chat ends cleanly at the end of its input
// and when its context is cancelled (as by Ctrl-C), even while the Host
// waits for an answer.
func TestChatEnds(t *testing.T) {
	t.Run("end of input", func(t *testing.T) {
		s := startChat(t, context.Background())
		s.input.Close()
		if err := s.end(); err != nil {
			t.Fatalf("run: %v", err)
		}
	})
	t.Run("interrupt while asking", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := startChat(t, ctx)
		s.write(`/Host.list_files`)
		s.waitFor(`Allow User to run list_files {}? [y/N] `)
		cancel()
		if err := s.end(); err != nil {
			t.Fatalf("run: %v", err)
		}
	})
}

// TestQuestionWithdrawn: when the request behind a Host question times out
// (its deadline reaches the Host's approver), the chat says so at once, and
// the next line is read as a line, not as an answer nobody waits for.
func TestQuestionWithdrawn(t *testing.T) {
	defer func(d time.Duration) { requestTimeout = d }(requestTimeout)
	requestTimeout = 300 * time.Millisecond
	s := startChat(t, context.Background())
	dir := t.TempDir()
	marker := filepath.Join(dir, "made")
	s.write(`/Host.shell_command {"command":"touch ` + marker + `"}`)
	s.waitFor(`Allow User to run shell_command`)
	s.waitFor(`(that question was withdrawn: the request behind it timed out)`)
	s.write("y") // a plain line now: the scripted model adds 2 and 3
	s.waitFor("The answer is 5.")
	s.write("/quit")
	if err := s.end(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the withdrawn command ran: %v", err)
	}
}

func TestWithoutModel(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), nil, func(string) string { return "" }, strings.NewReader("hello\n"), io.Discard, &out)
	if !errors.Is(err, openai.ErrNoEndpoint) || cli.Status(err) != cli.StatusUsage {
		t.Fatalf("got %v (exit status %d), want openai.ErrNoEndpoint and status %d", err, cli.Status(err), cli.StatusUsage)
	}
	for _, want := range []string{"OPENAI_API_KEY=", "OPENAI_BASE_URL=http://localhost:11434/v1", "OPENAI_MODEL"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the help lacks %q:\n%s", want, out.String())
		}
	}
}
