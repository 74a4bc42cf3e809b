package main

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// say talks to an LLM agent served on the broker and prints its answer;
// with --conversation a second say continues the first.
func TestSay(t *testing.T) {
	url := amqptest.URL(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url})
	srv := openaitest.NewServer(t,
		openaitest.Step{Text: "Lyon: the old town, then the hill."},
		openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
			var said []string
			for _, m := range r.Messages {
				if m.Role == "user" {
					said = append(said, m.Content)
				}
			}
			return openaitest.Step{Text: "You said: " + strings.Join(said, " | ")}
		}},
	)
	id := amqptest.Name("Assistant")
	llm, err := openai.New(id, openai.BaseURL(srv.URL), openai.APIKey("test"), openai.HTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sp.Add(ctx, llm.Agent()); err != nil {
		t.Fatal(err)
	}
	conv := amqptest.Name("trip")
	r := runAgency(t, url, "--exchange", sp.Exchange(), "say", id, "--conversation", conv, "Plan a day in Lyon")
	if r.code != 0 || r.stdout != "Lyon: the old town, then the hill.\n" {
		t.Fatalf("say: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runAgency(t, url, "--exchange", sp.Exchange(), "say", id, "--conversation", conv, "And the next day?")
	if r.code != 0 || r.stdout != "You said: Plan a day in Lyon | And the next day?\n" {
		t.Fatalf("say again: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runAgency(t, url, "--exchange", sp.Exchange(), "say", id, "")
	if r.code != exitUsage {
		t.Errorf("say with nothing: exit %d, stderr %q", r.code, r.stderr)
	}
}

// The demo answers every command with no broker and no key.
func TestDemo(t *testing.T) {
	r := runAgency(t, "amqp://nobody@127.0.0.1:1/", "--demo", "ls")
	listed := map[string]bool{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			listed[f[0]+"."+f[1]] = true
		}
	}
	for _, want := range []string{"Assistant.say", "Calculator.add", "Calculator.clear", "PlannerAgent.say"} {
		if !listed[want] {
			t.Errorf("--demo ls printed %q, without %s (stderr %q)", r.stdout, want, r.stderr)
		}
	}
	r = runAgency(t, "", "--demo", "call", "Calculator", "add", `{"a":1,"b":2}`)
	if r.code != 0 || r.stdout != "3\n" {
		t.Errorf("--demo call: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	in := exec.Command(exe, "--demo", "call", "Calculator", "add", "-")
	in.Stdin = strings.NewReader(`{"a":2,"b":2}`)
	if out, err := in.Output(); err != nil || string(out) != "4\n" {
		t.Errorf("--demo call with the arguments on stdin: %q, %v", out, err)
	}
	r = runAgency(t, "", "--demo", "say", "Assistant", "What is 2 + 40?")
	// The answer comes as it is made: what the model wrote beside its
	// tool call, then, on a line of its own, the answer.
	if r.code != 0 || !strings.HasSuffix(r.stdout, "\nThe sum is 42.\n") {
		t.Errorf("--demo say: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runAgency(t, "", "--demo", "call", "Calculator", "clear", `{"reason":"x"}`)
	if r.code != exitInvalidArgs {
		t.Errorf("--demo call clear with a short reason: exit %d, stderr %q", r.code, r.stderr)
	}
}

// say shows the parts of an answer as they come: the first part is on
// stdout while the agent still holds back the rest of its answer.
func TestSayStreams(t *testing.T) {
	url := amqptest.URL(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url})
	id := amqptest.Name("Streamer")
	release := make(chan struct{})
	a := agency.MustNewAgent(id)
	agency.Handle(a, "say", func(ctx context.Context, args sayArgs) (string, error) {
		if err := agency.Emit(ctx, "Hel"); err != nil {
			return "", err
		}
		if err := agency.Emit(ctx, "lo"); err != nil {
			return "", err
		}
		select {
		case <-release: // the test saw the parts on stdout
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "Hello", nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sp.Add(ctx, a); err != nil {
		t.Fatal(err)
	}

	cmd := agencyCmd(ctx, url, "--exchange", sp.Exchange(), "say", id, "hi")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 64)
	for !strings.HasPrefix(string(got), "Hello") {
		n, err := stdout.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("stdout %q before the answer was released: %v (stderr %q)", got, err, stderr.String())
		}
	}
	close(release)
	rest, _ := io.ReadAll(stdout)
	got = append(got, rest...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("say: %v (stderr %q)", err, stderr.String())
	}
	if string(got) != "Hello\n" {
		t.Fatalf("say printed %q, want the parts once, then the line ended: %q", got, "Hello\n")
	}
}
