package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// serveExampleCalculator runs examples/calculator -amqp on an exchange of
// the test's own until the test ends. Its agent is named Calculator, an id
// unique on the whole vhost, so it waits its turn while another test's
// Calculator serves.
func serveExampleCalculator(t *testing.T) (url, exchange string) {
	t.Helper()
	url = amqptest.URL(t)
	exchange = amqptest.Exchange(t)
	bin := filepath.Join(t.TempDir(), "calculator")
	build := exec.Command("go", "build", "-o", bin, "../../examples/calculator")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/calculator: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := agencyCmd(ctx, url, "-amqp", "-exchange", exchange)
		cmd.Path, cmd.Args[0] = bin, bin
		cmd.Cancel = func() error { return cmd.Process.Signal(interrupt) }
		cmd.WaitDelay = 15 * time.Second
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		serving := false
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "Calculator is serving") {
				serving = true
				break
			}
		}
		if serving {
			go func() {
				for lines.Scan() {
				}
			}()
			t.Cleanup(func() {
				cancel()
				_ = cmd.Wait()
			})
			return url, exchange
		}
		cancel()
		_ = cmd.Wait()
		if !strings.Contains(stderr.String(), "already served") || time.Now().After(deadline) {
			t.Fatalf("examples/calculator -amqp did not serve: %s", stderr.String())
		}
		time.Sleep(time.Second) // another test's Calculator holds the id
	}
}

// The contract of the command with the calculator example: ls lists
// Calculator with add; call prints 3, or the invalid_args text and a
// non-zero code.
func TestContractCalculator(t *testing.T) {
	t.Parallel()
	url, exchange := serveExampleCalculator(t)
	tl := startTail(t, url, "--exchange", exchange, "--json")

	r := runAgency(t, url, "--exchange", exchange, "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "Calculator  add") {
		t.Errorf("ls: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runAgency(t, url, "--exchange", exchange, "call", "Calculator", "add", `{"a":1,"b":2}`)
	if r.code != 0 || r.stdout != "3\n" {
		t.Errorf("call add 1 2: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runAgency(t, url, "--exchange", exchange, "call", "Calculator", "add", `{"a":"x"}`)
	if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "invalid_args") || !strings.Contains(r.stderr, "must be a number") {
		t.Errorf("call add x: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// tail --json showed the call's request and its response, each one
	// JSON object.
	var sawRequest, sawResponse bool
	for !sawRequest || !sawResponse {
		line := tl.next(t)
		var m struct {
			To     string                     `json:"to"`
			From   string                     `json:"from"`
			Action map[string]json.RawMessage `json:"action"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.Action["__meta__"] == nil {
			t.Fatalf("tail --json printed %q (%v)", line, err)
		}
		sawRequest = sawRequest || (m.To == "Calculator" && string(m.Action["add"]) == `{"a":1,"b":2}`)
		sawResponse = sawResponse || (m.From == "Calculator" && string(m.Action["[response]"]) == `{"value":3}`)
	}
}
