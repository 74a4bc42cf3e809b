package amqptest

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/internal/testenv"
)

// pyAgents is the script that runs operand/agency agents for a test.
//
//go:embed pyagents.py
var pyAgents []byte

// pythonPackages are the Debian packages operand/agency 1.6 needs besides
// its own sources and docstring_parser's.
const pythonPackages = "python3-pydantic python3-kombu python3-amqp python3-colorlog python3-pygments"

// PythonSources returns the folder that holds the sources of
// operand/agency 1.6 (the Python library) and docstring_parser, each in a
// folder of its own (agency/agency/agent.py,
// docstring_parser/docstring_parser/__init__.py): AGENCY_PY, or else the
// copy of both kept in this package's testdata/python. It
// also checks that the interpreter (AGENCY_PYTHON, by default
// /usr/bin/python3, Debian's) imports them. When any of this is missing it
// skips t with one line that says how to run the test, or fails it if CI
// is "true". It returns the folder and the interpreter.
func PythonSources(t testing.TB) (dir, python string) {
	t.Helper()
	dir, python, err := findPython()
	if err != nil {
		if testenv.CI() {
			t.Fatalf("CI=true and operand/agency (Python) cannot run: %v", err)
		}
		msg := fmt.Sprintf("operand/agency (Python) cannot run (%v): apt-get install %s, to run the interop tests (AGENCY_PY may name another folder holding agency and docstring_parser)", err, pythonPackages)
		note("skipping the tests that need Python", msg)
		t.Skip(msg)
	}
	return dir, python
}

var (
	pythonOnce           sync.Once
	pythonDir, pythonExe string
	pythonPath           string // PYTHONPATH for both packages
	pythonErr            error
)

func findPython() (string, string, error) {
	pythonOnce.Do(func() {
		dir := os.Getenv("AGENCY_PY")
		if dir == "" {
			root, err := repoRoot()
			if err != nil {
				pythonErr = err
				return
			}
			dir = filepath.Join(root, "amqpspace", "amqptest", "testdata", "python")
		}
		for _, f := range []string{"agency/agency/agent.py", "docstring_parser/docstring_parser/__init__.py"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				pythonErr = fmt.Errorf("no %s in %s", f, dir)
				return
			}
		}
		exe := os.Getenv("AGENCY_PYTHON")
		if exe == "" {
			exe = "/usr/bin/python3"
		}
		pythonPath = filepath.Join(dir, "agency") + string(os.PathListSeparator) + filepath.Join(dir, "docstring_parser")
		cmd := exec.Command(exe, "-c", "import agency.agent, agency.spaces.amqp_space")
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath)
		if out, err := cmd.CombinedOutput(); err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			pythonErr = fmt.Errorf("%s cannot import operand/agency from %s: %v: %s", exe, dir, err, lines[len(lines)-1])
			return
		}
		pythonDir, pythonExe = dir, exe
	})
	return pythonDir, pythonExe, pythonErr
}

// repoRoot returns the folder of the go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory, and AGENCY_PY is not set")
		}
		dir = parent
	}
}

// Python is a process of operand/agency agents on one exchange, which
// does what the test tells it. Its methods are for one goroutine at a
// time.
type Python struct {
	t      testing.TB
	cmd    *exec.Cmd
	in     *bufio.Writer
	stdin  interface{ Close() error }
	lines  chan []byte
	stderr *syncBuffer
}

// StartPython starts a Python process whose agents meet on exchange of the
// test broker, and stops it when t ends. Without Python, operand/agency's
// sources or its packages it skips t (PythonSources).
func StartPython(t testing.TB, exchange string) *Python {
	t.Helper()
	_, exe := PythonSources(t)
	uri, err := amqp.ParseURI(URL(t))
	if err != nil {
		t.Fatal(err)
	}
	if uri.Scheme != "amqp" {
		t.Skipf("operand/agency's AMQPSpace takes no TLS: the interop tests need an amqp:// broker, not %s", uri.Scheme)
	}
	script := filepath.Join(t.TempDir(), "pyagents.py")
	if err := os.WriteFile(script, pyAgents, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-u", script, exchange)
	env := []string{"PYTHONPATH=" + pythonPath}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AMQP_") && !strings.HasPrefix(kv, "PYTHONPATH=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"AMQP_HOST="+uri.Host,
		"AMQP_PORT="+strconv.Itoa(uri.Port),
		"AMQP_USERNAME="+uri.Username,
		"AMQP_PASSWORD="+uri.Password,
		"AMQP_VHOST="+uri.Vhost,
	)
	p := &Python{t: t, cmd: cmd, lines: make(chan []byte, 16), stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.in, p.stdin = bufio.NewWriter(stdin), stdin
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			p.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(p.stop)
	return p
}

// stop asks the process to quit, removing its agents, and waits for it.
func (p *Python) stop() {
	_, _ = p.in.WriteString(`{"cmd":"quit"}` + "\n")
	_ = p.in.Flush()
	_ = p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("the Python process: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		p.t.Errorf("the Python process did not quit")
	}
	if p.t.Failed() {
		p.t.Logf("the Python process's stderr:\n%s", p.stderr.String())
	}
}

// Do sends one command and decodes its answer into out (unless nil). A
// command the script fails on fails the test.
func (p *Python) Do(cmd map[string]any, out any) {
	p.t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("writing to the Python process: %v", err)
	}
	if err := p.in.Flush(); err != nil {
		p.t.Fatalf("writing to the Python process: %v", err)
	}
	var line []byte
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("the Python process ended; its stderr:\n%s", p.stderr.String())
		}
		line = l
	case <-time.After(time.Minute): // a safety net
		p.t.Fatalf("no answer from the Python process to %s", b)
	}
	var fail struct {
		Fail string `json:"fail"`
	}
	if err := json.Unmarshal(line, &fail); err != nil {
		p.t.Fatalf("the Python process answered %q: %v", line, err)
	}
	if fail.Fail != "" {
		p.t.Fatalf("the Python process failed on %s:\n%s", b, fail.Fail)
	}
	if out != nil {
		if err := json.Unmarshal(line, out); err != nil {
			p.t.Fatalf("the Python process answered %q: %v", line, err)
		}
	}
}

// Add adds an operand/agency agent with the given id; its actions are
// shout(text), slow(seconds, text), fail(reason), note(text) (which
// answers nothing) and secret() (denied to everyone).
//
// operand/agency gives its agent's thread a fixed 5 s to connect and
// start; on a loaded machine that can pass, and Add tries twice more
// after such a timeout before it fails the test.
func (p *Python) Add(id string) {
	p.t.Helper()
	var errs []string
	for range 3 {
		err := p.TryAdd(id)
		if err == "" {
			return
		}
		errs = append(errs, err)
		if !strings.HasPrefix(err, "TimeoutError") {
			break
		}
		p.t.Logf("adding %s to operand/agency's space: %s; trying again", id, err)
	}
	p.t.Fatalf("adding %s to operand/agency's space: %s", id, strings.Join(errs, "; then "))
}

// TryAdd is Add, returning operand/agency's error ("<class>: <message>")
// rather than failing the test.
func (p *Python) TryAdd(id string) string {
	p.t.Helper()
	var r struct {
		Error string `json:"error"`
	}
	p.Do(map[string]any{"cmd": "add", "id": id}, &r)
	return r.Error
}

// Request has the agent from call action on to with args through
// operand/agency's Agent.request, waiting at most timeout. It returns the
// value, or the text and class of the exception request raised.
func (p *Python) Request(from, to, action string, args any, timeout time.Duration) (value json.RawMessage, errText, errClass string) {
	p.t.Helper()
	var r struct {
		Value json.RawMessage `json:"value"`
		Error *string         `json:"error"`
		Class string          `json:"class"`
	}
	p.Do(map[string]any{"cmd": "request", "from": from, "to": to, "action": action, "args": args, "timeout": timeout.Seconds()}, &r)
	if r.Error != nil {
		return nil, *r.Error, r.Class
	}
	return r.Value, "", ""
}

// Send has the agent from send action with args to to (an id or "*"), and
// returns the message's meta.id.
func (p *Python) Send(from, to, action string, args any) string {
	p.t.Helper()
	var r struct {
		ID string `json:"id"`
	}
	p.Do(map[string]any{"cmd": "send", "from": from, "to": to, "action": action, "args": args}, &r)
	return r.ID
}

// PyAnswer is an answer an operand/agency agent received to a message it
// sent: through handle_action_value (Value) or handle_action_error (Error).
type PyAnswer struct {
	From     string          `json:"from"`
	ParentID string          `json:"parent_id"`
	Value    json.RawMessage `json:"value"`
	Error    *string         `json:"error"`
}

// Answers returns the answers agent id has received to its sends, once
// every agent in from has answered or timeout has passed.
func (p *Python) Answers(id string, from []string, timeout time.Duration) []PyAnswer {
	p.t.Helper()
	var r struct {
		Answers []PyAnswer `json:"answers"`
	}
	p.Do(map[string]any{"cmd": "answers", "id": id, "from": from, "timeout": timeout.Seconds()}, &r)
	return r.Answers
}

// Alive reports whether agent id's receiving thread still runs, and if
// not, what ended it.
func (p *Python) Alive(id string) (bool, string) {
	p.t.Helper()
	var r struct {
		Alive bool    `json:"alive"`
		Error *string `json:"error"`
	}
	p.Do(map[string]any{"cmd": "alive", "id": id}, &r)
	if r.Error != nil {
		return r.Alive, *r.Error
	}
	return r.Alive, ""
}

// Received returns the messages from others that reached agent id's
// _receive, as operand/agency decoded them.
func (p *Python) Received(id string) []json.RawMessage {
	p.t.Helper()
	var r struct {
		Messages []json.RawMessage `json:"messages"`
	}
	p.Do(map[string]any{"cmd": "received", "id": id}, &r)
	return r.Messages
}

// Notes returns the texts agent id's note action was given.
func (p *Python) Notes(id string) []string {
	p.t.Helper()
	var r struct {
		Notes []string `json:"notes"`
	}
	p.Do(map[string]any{"cmd": "notes", "id": id}, &r)
	return r.Notes
}

// syncBuffer is a bytes.Buffer for one writer and other readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
