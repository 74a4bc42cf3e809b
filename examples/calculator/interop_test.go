package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// TestAMQPServesPython runs the program as `go run ./examples/calculator
// -amqp` does, with AMQP_INTEROP=operand-agency in its environment and no
// change to its code, and calls its Calculator from an operand/agency
// (Python) agent: add(1, 2) is 3, and help lists add in operand/agency's
// help format. It needs a broker and Python with operand/agency
// (amqptest.PythonSources), and skips without them unless CI=true.
func TestAMQPServesPython(t *testing.T) {
	amqptest.PythonSources(t)
	cfg := testConfig(t)

	bin := filepath.Join(t.TempDir(), "calculator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-amqp", "-exchange", cfg.Exchange)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AMQP_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "AMQP_URL="+cfg.URL, "AMQP_INTEROP=operand-agency")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// One goroutine reads the output, then waits for the process.
	lines := make(chan string, 16)
	var waitErr error
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // if the test ended early
		for range lines {
		}
		<-exited
	})
	for serving := false; !serving; {
		select {
		case line, ok := <-lines:
			if !ok {
				<-exited
				if strings.Contains(stderr.String(), "already served") && os.Getenv("CI") != "true" {
					t.Skip("a Calculator is already served on this broker (go run ./examples/calculator -amqp?): stop it to run this test")
				}
				t.Fatalf("the calculator ended before serving: %v\n%s", waitErr, stderr.String())
			}
			serving = strings.Contains(line, "Call it from another terminal")
		case <-time.After(time.Minute): // a safety net
			_ = cmd.Process.Kill()
			for range lines {
			}
			<-exited // stderr is complete, and no longer written
			t.Fatalf("the calculator did not say it serves\n%s", stderr.String())
		}
	}

	py := amqptest.StartPython(t, cfg.Exchange)
	pyID := amqptest.Name("PyUser")
	py.Add(pyID)
	value, errText, _ := py.Request(pyID, "Calculator", "add", map[string]int{"a": 1, "b": 2}, 10*time.Second)
	if string(value) != "3" {
		t.Errorf("add(1, 2) from Python: %s %s; want 3", value, errText)
	}
	value, errText, _ = py.Request(pyID, "Calculator", "help", nil, 10*time.Second)
	var help, want any
	_ = json.Unmarshal(value, &help)
	_ = json.Unmarshal([]byte(`{"add": {"description": "Adds two numbers",
		"args": {"a": {"type": "number", "description": "first addend"}, "b": {"type": "number", "description": "second addend"}},
		"returns": {"type": "number", "description": "the sum"}}}`), &want)
	if !reflect.DeepEqual(help, want) {
		t.Errorf("help from Python: %s %s", value, errText)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for line := range lines {
		rest = append(rest, line)
	}
	<-exited
	if waitErr != nil || !strings.Contains(strings.Join(rest, "\n"), "Stopping: removing Calculator") {
		t.Errorf("the calculator on SIGINT: %v, printed %q\n%s", waitErr, rest, stderr.String())
	}
}
