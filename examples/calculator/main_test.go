package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const helpHeader = "User received help from Calculator:\n"

// TestRun runs the program and checks what it prints: the help the User
// received, the sum, the invalid_args text, and the permission flow in order.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	text := out.String()
	t.Logf("output:\n%s", text)

	help := parseHelp(t, text)
	checkAddHelp(t, help["add"])
	if got := help["clear"].Access; got != "requested" {
		t.Errorf("clear access = %q, want requested", got)
	}
	if _, ok := help["approve"]; ok {
		t.Error("help from Calculator lists the Owner's approve")
	}

	// After the help, these lines in this order and no others.
	_, rest, _ := strings.Cut(text, "\n}\n")
	want := []string{
		"User: add(1, 2) = 3",
		`User: add with b missing: invalid_args: invalid arguments for "Calculator.add": b: missing required field (send "help" for the argument schema)`,
		`Owner: User asks to run Calculator.clear {"reason":"new day"}: approved`,
		"User: cleared: new day",
		`Owner: User asks to run Calculator.clear {"reason":"once more"}: refused`,
		`User: clear again: permission_denied: "Calculator.clear" not permitted for "User"`,
	}
	got := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("after the help, got lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// parseHelp decodes the help JSON the program printed.
func parseHelp(t *testing.T, text string) map[string]agency.ActionHelp {
	t.Helper()
	start := strings.Index(text, helpHeader)
	end := strings.Index(text, "\n}\n")
	if start < 0 || end < 0 {
		t.Fatalf("no help in the output")
	}
	var help map[string]agency.ActionHelp
	if err := json.Unmarshal([]byte(text[start+len(helpHeader):end+2]), &help); err != nil {
		t.Fatalf("help does not decode: %v", err)
	}
	names := slices.Sorted(maps.Keys(help))
	if !slices.Equal(names, []string{"add", "clear"}) {
		t.Errorf("help lists %v, want [add clear]", names)
	}
	return help
}

// checkAddHelp checks the parts of add's help an LLM relies on to call it.
func checkAddHelp(t *testing.T, h agency.ActionHelp) {
	t.Helper()
	if h.Description != "Adds two numbers" || h.Access != "permitted" {
		t.Errorf("add: description %q, access %q", h.Description, h.Access)
	}
	var args struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
	}
	if err := json.Unmarshal(h.Args, &args); err != nil {
		t.Fatalf("add args schema: %v", err)
	}
	if args.Type != "object" || !slices.Equal(args.Required, []string{"a", "b"}) ||
		args.AdditionalProperties == nil || *args.AdditionalProperties {
		t.Errorf("add args schema = %s", h.Args)
	}
	for name, desc := range map[string]string{"a": "first addend", "b": "second addend"} {
		p := args.Properties[name]
		if p.Type != "number" || p.Description != desc {
			t.Errorf("add args %q = %+v, want a number described %q", name, p, desc)
		}
	}
	var returns struct{ Type, Description string }
	if err := json.Unmarshal(h.Returns, &returns); err != nil || returns.Type != "number" || returns.Description != "the sum" {
		t.Errorf("add returns = %s (%v)", h.Returns, err)
	}
	if len(h.Examples) != 1 {
		t.Fatalf("add examples = %d, want 1", len(h.Examples))
	}
	var ex struct {
		To     string                     `json:"to"`
		Action map[string]json.RawMessage `json:"action"`
	}
	if err := json.Unmarshal(h.Examples[0], &ex); err != nil || ex.To != "Calculator" {
		t.Fatalf("add example = %s (%v)", h.Examples[0], err)
	}
	var exArgs AddArgs
	if err := json.Unmarshal(ex.Action["add"], &exArgs); err != nil || exArgs != (AddArgs{A: 1, B: 2}) {
		t.Errorf("add example args = %s (%v)", ex.Action["add"], err)
	}
}

// TestAddIsPlain calls the action without a space: handlers stay plain.
func TestAddIsPlain(t *testing.T) {
	var c Calculator
	if got, err := c.Add(context.Background(), AddArgs{A: 1, B: 2}); got != 3 || err != nil {
		t.Errorf("Add(1, 2) = %v, %v", got, err)
	}
}

// TestAMQP serves the Calculator on a fresh exchange and calls it as a
// second process would: the caller prints add's help and 2+3 = 5. A second
// server on the same exchange is refused, and once the first has stopped
// its queues are gone, so a caller is told that nobody serves.
func TestAMQP(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	serveCtx, stop := context.WithCancel(ctx) // stands in for SIGINT
	defer stop()
	served := &watchWriter{want: "Call it from another terminal", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- serveAMQP(serveCtx, cfg, served) }()
	select {
	case <-served.seen:
	case err := <-done:
		if errors.Is(err, space.ErrAgentExists) && os.Getenv("CI") != "true" {
			t.Skip("a Calculator is already served on this broker (go run ./examples/calculator -amqp?): stop it to run this test")
		}
		t.Fatalf("serveAMQP returned before serving: %v\noutput:\n%s", err, served.String())
	case <-ctx.Done():
		t.Fatalf("serveAMQP did not say it serves\noutput:\n%s", served.String())
	}
	if got := served.String(); !strings.Contains(got, "go run ./examples/calculator -amqp -exchange "+cfg.Exchange+" -call") {
		t.Errorf("serving banner does not say how to call:\n%s", got)
	}

	var out bytes.Buffer
	if err := callAMQP(ctx, cfg, 2, 3, &out); err != nil {
		t.Fatalf("callAMQP: %v\noutput:\n%s", err, out.String())
	}
	text := out.String()
	t.Logf("caller's output:\n%s", text)
	header, helpText, ok := strings.Cut(text, " received help from Calculator:\n")
	if !ok || !strings.HasPrefix(header, "User-") {
		t.Fatalf("no help header in the output")
	}
	helpText, result, ok := strings.Cut(helpText, "\n}\n")
	var help map[string]agency.ActionHelp
	if err := json.Unmarshal([]byte(helpText+"\n}"), &help); !ok || err != nil {
		t.Fatalf("help does not decode: %v", err)
	}
	if names := slices.Sorted(maps.Keys(help)); !slices.Equal(names, []string{"add"}) {
		t.Errorf("help lists %v, want [add]", names)
	}
	checkAddHelp(t, help["add"])
	if want := header + ": add(2, 3) = 5\n"; result != want {
		t.Errorf("after the help got %q, want %q", result, want)
	}

	err := serveAMQP(ctx, cfg, &bytes.Buffer{})
	if !errors.Is(err, space.ErrAgentExists) || !strings.Contains(err.Error(), "already served") {
		t.Errorf("a second server on the exchange: got %v, want space.ErrAgentExists", err)
	}

	stop()
	if err := <-done; err != nil {
		t.Errorf("serveAMQP: %v", err)
	}
	if got := served.String(); !strings.HasSuffix(got, "Stopping: removing Calculator and deleting its queues.\n") {
		t.Errorf("server's output does not end with its stopping:\n%s", got)
	}
	err = callAMQP(ctx, cfg, 2, 3, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no Calculator on exchange") {
		t.Errorf("calling a stopped Calculator: got %v, want no Calculator", err)
	}
}

// TestAMQPNoCalculator calls on an exchange where nobody serves, and on
// one that does not exist (a mistyped -exchange), which it must not
// create.
func TestAMQPNoCalculator(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	err := callAMQP(ctx, cfg, 2, 3, &out)
	want := `no Calculator on exchange "` + cfg.Exchange + `": the broker has no such exchange (is the name right?); start one with go run ./examples/calculator -amqp -exchange ` + cfg.Exchange
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q", out.String())
	}
	conn, err := amqp.Dial(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclarePassive(cfg.Exchange, "topic", true, false, false, false, nil); err == nil {
		t.Errorf("the caller left exchange %q behind", cfg.Exchange)
	}

	// An exchange that exists, where nobody serves.
	sp, err := amqpspace.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close(ctx)
	err = callAMQP(ctx, cfg, 2, 3, &out)
	want = `no Calculator on exchange "` + cfg.Exchange + `": start one with go run ./examples/calculator -amqp -exchange ` + cfg.Exchange
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestAMQPNoBroker checks what a broker that cannot be reached looks like:
// the URL without its password, and how to start one. It needs no broker.
func TestAMQPNoBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := amqpspace.Config{URL: "amqp://guest:secret@127.0.0.1:1/"}
	for name, f := range map[string]func() error{
		"serve": func() error { return serveAMQP(ctx, cfg, &bytes.Buffer{}) },
		"call":  func() error { return callAMQP(ctx, cfg, 2, 3, &bytes.Buffer{}) },
	} {
		err := f()
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		msg := err.Error()
		for _, want := range []string{"cannot reach RabbitMQ at amqp://guest:xxxxx@127.0.0.1:1/", "rabbitmq-server -detached", "AMQP_URL"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error does not say %q: %s", name, want, msg)
			}
		}
		if strings.Contains(msg, "secret") {
			t.Errorf("%s: error shows the password: %s", name, msg)
		}
	}
}

// testConfig returns the configuration of a fresh exchange on the test
// broker, deleted when the test ends. Without a broker the test skips,
// unless CI=true, where it fails.
func testConfig(t *testing.T) amqpspace.Config {
	t.Helper()
	return amqpspace.Config{URL: amqptest.URL(t), Exchange: amqptest.Exchange(t)}
}

// watchWriter collects what is written to it, from any goroutine, and
// closes seen once the text contains want.
type watchWriter struct {
	want string
	seen chan struct{}

	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.closed && strings.Contains(w.buf.String(), w.want) {
		w.closed = true
		close(w.seen)
	}
	return n, err
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
