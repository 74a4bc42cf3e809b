package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

// TestServeAndCall serves the example's agents and calls them with -call:
// both cards, add, divide by zero, a say to the Chat agent.
func TestServeAndCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(sctx, []string{"-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "tasks.db")}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	base := strings.TrimSpace(strings.TrimPrefix(line, "serving on "))

	for _, path := range []string{"/.well-known/agent-card.json", "/agents/Calculator/.well-known/agent-card.json"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"url": "`+base+`/agents/Calculator/"`) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	for _, c := range []struct {
		args []string
		out  string
		err  string
	}{
		{[]string{"-call", base + "/agents/Calculator/", "-action", "add", "-args", `{"a": 1, "b": 2}`}, "3\n", ""},
		{[]string{"-call", base + "/.well-known/agent-card.json", "-action", "divide", "-args", `{"a": 1, "b": 0}`}, "", "cannot divide 1 by zero"},
		{[]string{"-call", base + "/agents/Chat/", "-say", "what is 2 + 40?"}, "The Calculator says the sum is 42.\n", ""},
		{[]string{"-call", base + "/agents/Calculator/"}, "  add: Adds two numbers", ""},
	} {
		var out bytes.Buffer
		err := run(ctx, c.args, &out, io.Discard)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || !strings.Contains(out.String(), c.out) {
			t.Errorf("%v: %q, %v; want %q", c.args, out.String(), err, c.out)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
