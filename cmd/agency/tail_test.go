package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// tailing is a running tail.
type tailing struct {
	lines chan string
	stop  func() result
}

// startTail runs agency tail with args and returns once it said that its
// queue is bound.
func startTail(t *testing.T, url string, args ...string) *tailing {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := agencyCmd(ctx, url, append([]string{"tail"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(interrupt) }
	cmd.WaitDelay = 15 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tl := &tailing{lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			tl.lines <- sc.Text()
		}
		close(tl.lines)
	}()
	errLines := bufio.NewReader(stderr)
	first, err := errLines.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "tailing exchange ") {
		cancel()
		_ = cmd.Wait()
		t.Fatalf("tail's first words on stderr: %q (%v)", first, err)
	}
	var rest strings.Builder
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&rest, errLines); close(done) }()
	tl.stop = func() result {
		cancel()
		err := cmd.Wait()
		<-done
		r := result{stderr: first + rest.String()}
		if cmd.ProcessState != nil {
			r.code = cmd.ProcessState.ExitCode()
		}
		_ = err
		return r
	}
	t.Cleanup(func() { tl.stop() })
	return tl
}

// next returns the next line tail printed, failing the test after a while.
func (tl *tailing) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-tl.lines:
		if !ok {
			t.Fatal("tail ended")
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("tail printed nothing more")
	}
	return ""
}

// tail --json prints each message as on the wire, the request and the
// response of a call included, and the call still gets its answer: tail
// takes no one's messages.
func TestTailJSON(t *testing.T) {
	t.Parallel()
	url, exchange, calc := calcSpace(t)
	tl := startTail(t, url, "--exchange", exchange, "--json")

	r := runAgency(t, url, "--exchange", exchange, "call", calc, "add", `{"a":1,"b":2}`)
	if r.code != 0 || r.stdout != "3\n" {
		t.Fatalf("call while tailing: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	type wire struct {
		To     string                     `json:"to"`
		From   string                     `json:"from"`
		Action map[string]json.RawMessage `json:"action"`
	}
	var req, resp *wire
	var reqID string
	for req == nil || resp == nil {
		line := tl.next(t)
		var w wire
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			t.Fatalf("tail --json printed a line that is not a JSON object: %q: %v", line, err)
		}
		var meta struct {
			ID       string `json:"id"`
			ParentID string `json:"parent_id"`
		}
		if err := json.Unmarshal(w.Action["__meta__"], &meta); err != nil || meta.ID == "" {
			t.Fatalf("line without __meta__.id: %q", line)
		}
		switch {
		case w.To == calc && w.Action["add"] != nil:
			if string(w.Action["add"]) != `{"a":1,"b":2}` || !strings.HasPrefix(w.From, "agency-cli.") {
				t.Errorf("request line %q", line)
			}
			req, reqID = &w, meta.ID
		case w.From == calc && w.Action["[response]"] != nil && meta.ParentID == reqID && reqID != "":
			if string(w.Action["[response]"]) != `{"value":3}` {
				t.Errorf("response line %q", line)
			}
			resp = &w
		}
	}
	if res := tl.stop(); res.code != 0 {
		t.Errorf("tail ended with %d after an interrupt: %s", res.code, res.stderr)
	}
}

// tail without --json prints a line a person reads, and --agent and
// --action keep what they name.
func TestTailLines(t *testing.T) {
	t.Parallel()
	url, exchange, calc := calcSpace(t)
	tl := startTail(t, url, "--exchange", exchange, "--agent", calc, "--action", "add")

	for _, args := range [][]string{
		{calc, "divide", `{"a":1,"b":2}`}, // another action: not shown
		{calc, "add", `{"a":"x"}`},
		{calc, "add", `{"a":1,"b":2}`},
	} {
		runAgency(t, url, append([]string{"--exchange", exchange, "call"}, args...)...)
	}
	for _, want := range [][]string{
		{"→ " + calc + `  add {"a":"x"}`},
		{calc + " → agency-cli.", "[error] to add invalid_args:", "must be a number", " ms)"},
		{"→ " + calc + `  add {"a":1,"b":2}`},
		{calc + " → agency-cli.", "[response] to add 3", " ms)"},
	} {
		line := tl.next(t)
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("line %q lacks %q", line, w)
			}
		}
	}
}

// A tail leaves the ids no agent has unroutable: while it runs, a Request
// to such an id still fails at once with ErrNoRecipient (the broker
// returns it), and agency call to one exits 3. It still shows the calls
// to live agents, one that joined after it started included.
func TestTailKeepsAbsentIDsUnroutable(t *testing.T) {
	t.Parallel()
	url, exchange, calc := calcSpace(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: exchange})
	asker := agency.MustNewAgent(amqptest.Name("Asker"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := sp.Add(ctx, asker); err != nil {
		t.Fatal(err)
	}
	tl := startTail(t, url, "--exchange", exchange, "--json")

	_, err := asker.Request(ctx, amqptest.Name("Nobody"), "add", addArgs{A: 1, B: 2})
	if !errors.Is(err, agency.ErrNoRecipient) {
		t.Fatalf("Request to an absent id while a tail runs: %v, want ErrNoRecipient", err)
	}
	if r := runAgency(t, url, "--exchange", exchange, "--timeout", "15s", "call", amqptest.Name("Nobody"), "add", `{}`); r.code != exitNotFound {
		t.Fatalf("agency call to an absent id while a tail runs: exit %d, stderr %q; want %d", r.code, r.stderr, exitNotFound)
	}

	// The calculator that was there, called by an agent that was there;
	// then an agent that joins after the tail started, called until the
	// tail has bound it.
	if _, err := asker.Request(ctx, calc, "add", addArgs{A: 1, B: 2}); err != nil {
		t.Fatalf("Request to the calculator: %v", err)
	}
	seeCall(t, tl, asker.ID(), calc, `{"a":1,"b":2}`, `{"value":3}`)

	late := agency.MustNewAgent(amqptest.Name("Late"))
	agency.Handle(late, "add", func(ctx context.Context, args addArgs) (float64, error) {
		return args.A + args.B + 100, nil
	})
	if err := sp.Add(ctx, late); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// Until the tail has bound the newcomer, the request to it is
		// not shown: ask again and again.
		for {
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = asker.Request(cctx, late.ID(), "add", addArgs{A: 2, B: 2})
			ccancel()
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	seeCall(t, tl, asker.ID(), late.ID(), `{"a":2,"b":2}`, `{"value":104}`)
}

// seeCall reads tail --json's lines until it has seen a request of add
// from one agent to another with args, and the answer to it with value.
func seeCall(t *testing.T, tl *tailing, from, to, args, value string) {
	t.Helper()
	type wire struct {
		To     string                     `json:"to"`
		From   string                     `json:"from"`
		Action map[string]json.RawMessage `json:"action"`
	}
	reqIDs := map[string]bool{}
	for {
		line := tl.next(t)
		var w wire
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			t.Fatalf("tail --json printed %q: %v", line, err)
		}
		var meta struct {
			ID       string `json:"id"`
			ParentID string `json:"parent_id"`
		}
		_ = json.Unmarshal(w.Action["__meta__"], &meta)
		switch {
		case w.From == from && w.To == to && string(w.Action["add"]) == args:
			reqIDs[meta.ID] = true
		case w.From == to && w.To == from && reqIDs[meta.ParentID]:
			if got := string(w.Action["[response]"]); got != value {
				t.Fatalf("the answer the tail showed: %q, want %q", got, value)
			}
			return
		}
	}
}

// An agent that leaves while a tail runs becomes unroutable again once the
// broker has dropped its queue: the tail lets go of its id, and a Request
// to it fails at once with ErrNoRecipient.
func TestTailLetsGoOfAgentsThatLeave(t *testing.T) {
	t.Parallel()
	url, exchange, _ := calcSpace(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: exchange, QueueExpiry: time.Second})
	asker, leaver := agency.MustNewAgent(amqptest.Name("Asker")), agency.MustNewAgent(amqptest.Name("Leaver"))
	agency.Handle(leaver, "add", func(ctx context.Context, args addArgs) (float64, error) {
		return args.A + args.B, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, a := range []*agency.Agent{asker, leaver} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	tl := startTail(t, url, "--exchange", exchange, "--json")
	if _, err := asker.Request(ctx, leaver.ID(), "add", addArgs{A: 1, B: 2}); err != nil {
		t.Fatal(err)
	}
	seeCall(t, tl, asker.ID(), leaver.ID(), `{"a":1,"b":2}`, `{"value":3}`)
	if err := sp.Remove(ctx, leaver.ID()); err != nil {
		t.Fatal(err)
	}
	for {
		// Its queue lingers for QueueExpiry, and the tail lets go of it
		// at its next survey after that.
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := asker.Request(rctx, leaver.ID(), "add", addArgs{A: 1, B: 2})
		rcancel()
		if errors.Is(err, agency.ErrNoRecipient) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("a Request to an agent that left, while a tail runs: %v; want ErrNoRecipient", err)
		}
	}
}
