package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

// The LLM agent uses only agency's public API, so it works unchanged on a
// space whose messages cross RabbitMQ: it discovers the Calculator by a
// broadcast help, calls add as a tool, and says the answer back.
func TestOnAMQP(t *testing.T) {
	sp := amqptest.NewSpace(t, amqpspace.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	calcID, userID, asstID := amqptest.Name("Calculator"), amqptest.Name("User"), amqptest.Name("Assistant")
	srv := openaitest.NewServer(t)

	calc := agency.MustNewAgent(calcID)
	agency.Handle(calc, "add", func(_ context.Context, a struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return a.A + a.B, nil
	}, agency.Describe("Adds two numbers"))
	user := agency.MustNewAgent(userID)
	heard := make(chan string, 4)
	agency.Handle(user, "say", func(_ context.Context, a SayArgs) (string, error) {
		heard <- a.Content
		return "heard", nil
	})
	llm, err := New(asstID, APIKey("test-key"), BaseURL(srv.URL), HTTPClient(srv.Client()), Retries(3, time.Millisecond),
		Rediscover(0, defaultSettle))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{calc, user, llm.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// The answers to the Assistant's broadcast help cross the broker. A
	// survey over it ends after a quiet period, which an answer may
	// outlast on a loaded machine: each turn here surveys, so ask, in a
	// conversation of its own, until a model call offers add.
	for offered := false; !offered; {
		srv.Add(openaitest.Step{Text: "nothing to call yet"})
		m := &agency.Message{To: asstID, Action: "say", Args: SayArgs{Content: "anything new?"}, Meta: map[string]any{"conversation": "warm-up"}}
		if _, err := user.RequestMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		select {
		case <-heard:
		case <-ctx.Done():
			t.Fatal("the user heard nothing")
		}
		reqs := srv.Requests()
		offered = slices.Contains(toolNamesOf(reqs[len(reqs)-1]), calcID+"__add")
	}
	n := len(srv.Requests())
	srv.Add(
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: calcID + "__add", Arguments: `{"a": 2, "b": 3}`}}},
		openaitest.Step{Text: "2 + 3 = 5"},
	)

	got, err := agency.Call[string](ctx, user, asstID, "say", SayArgs{Content: "What is 2 + 3?"})
	if err != nil || got != "2 + 3 = 5" {
		t.Fatalf("answer %q, %v", got, err)
	}
	select {
	case h := <-heard:
		if h != got {
			t.Errorf("the user heard %q", h)
		}
	case <-ctx.Done():
		t.Fatal("the user heard nothing")
	}
	reqs := srv.Requests()[n:]
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d times, want 2", len(reqs))
	}
	m := reqs[1].Messages
	if last := m[len(m)-1]; last.Role != "tool" || last.Content != "5" {
		t.Errorf("the tool result sent to the model is %+v, want 5", last)
	}
}

// peerTimeout bounds each wait for the peer process: a safety net.
const peerTimeout = 60 * time.Second

// buildPeer returns the program of internal/peer, built once for the
// test binary, with the race detector when it has it.
func buildPeer(t *testing.T) string {
	t.Helper()
	return testenv.Program(t, "./internal/peer")
}

// peer is a running peer process.
type peer struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string   // its stdout; closed when it ends
	exit  chan struct{} // closed once it has exited
	err   error
}

// startPeer runs the peer with args on the broker and waits for "ready".
// It is killed, if it still runs, when the test ends.
func startPeer(t *testing.T, bin string, args ...string) *peer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-url", amqptest.URL(t)}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, cmd: cmd, lines: make(chan string, 16), exit: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.exit)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exit:
		default:
			_ = cmd.Process.Kill()
		}
		for range p.lines {
		}
		<-p.exit
	})
	p.expect("ready")
	return p
}

func (p *peer) expect(want string) {
	p.t.Helper()
	select {
	case got, ok := <-p.lines:
		if !ok || got != want {
			<-p.exit
			p.t.Fatalf("peer printed %q (%v), want %q", got, p.err, want)
		}
	case <-time.After(peerTimeout):
		p.t.Fatalf("peer printed nothing in %v", peerTimeout)
	}
}

// stop asks the peer to close its space, which removes its agents, and
// waits until it has.
func (p *peer) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	p.expect("closed")
	<-p.exit
	if p.err != nil {
		p.t.Fatalf("peer: %v", p.err)
	}
}

// A tool agent in another process is offered to the model whatever the
// start order: started after the Assistant, from a turn that surveys the
// space (every turn here); started before, from the Assistant's first
// help. It answers a tool call with the conversation of the request;
// stopped, it is no longer offered at the next turn.
func TestLateJoinerAcrossProcesses(t *testing.T) {
	t.Parallel()
	bin := buildPeer(t)
	for _, order := range []string{"tool agent after the assistant", "tool agent before the assistant"} {
		t.Run(order, func(t *testing.T) {
			ex := amqptest.Exchange(t)
			sp := amqptest.NewSpace(t, amqpspace.Config{Exchange: ex})
			ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
			defer cancel()
			userID, asstID, toolID := amqptest.Name("User"), amqptest.Name("Assistant"), amqptest.Name("Tool")
			tool := toolID + "__echo"
			srv := openaitest.NewServer(t)
			user := newListener(userID)
			llm, err := New(asstID, APIKey("k"), BaseURL(srv.URL), HTTPClient(srv.Client()), Retries(0, 0),
				Rediscover(0, 300*time.Millisecond), CallTimeout(peerTimeout), Logger(failureLog(t)))
			if err != nil {
				t.Fatal(err)
			}
			f := &fixture{t: t, ctx: ctx, llm: llm}
			var p *peer
			if order == "tool agent before the assistant" {
				p = startPeer(t, bin, "-exchange", ex, "-tools", toolID)
			}
			for _, a := range []*agency.Agent{user.Agent, llm.Agent()} {
				if err := sp.Add(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			say := func(text string) string {
				t.Helper()
				m := &agency.Message{To: asstID, Action: "say", Args: SayArgs{Content: text}, Meta: map[string]any{"conversation": "c1"}}
				r, err := user.RequestMessage(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				v, _ := agency.Value[string](r)
				user.next(t, ctx)
				return v
			}
			if p == nil {
				// After the survey made on joining. (Not once the catalog
				// knows the User: over the broker that survey ends after a
				// quiet period, which an answer may outlast on a loaded
				// machine, and nothing else asks before the first turn.)
				f.surveyed()
				p = startPeer(t, bin, "-exchange", ex, "-tools", toolID)
			}
			// Each turn surveys the space; over the broker the survey ends
			// after a quiet period, which a loaded machine may outlast, so
			// ask until a model call offers the tool.
			turns := 0
			for offered := false; !offered; turns++ {
				srv.Add(openaitest.Step{Text: "nothing to call yet"})
				say("anything new?")
				reqs := srv.Requests()
				offered = slices.Contains(toolNamesOf(reqs[len(reqs)-1]), tool)
			}
			t.Logf("offered after %d turn(s)", turns)
			srv.Add(openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: tool, Arguments: `{"text":"hi"}`}}},
				openaitest.Step{Text: "done"})
			if got := say("call it"); got != "done" {
				t.Fatalf("answer %q", got)
			}
			reqs := srv.Requests()
			result := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1].Content
			if !strings.HasPrefix(result, `"`+toolID+"@") || !strings.HasSuffix(result, ` in c1: hi"`) {
				t.Errorf("the tool's result %s", result)
			}
			if strings.Contains(result, fmt.Sprintf("@%d ", os.Getpid())) {
				t.Errorf("the tool ran in this process: %s", result)
			}

			p.stop()
			srv.Add(openaitest.Step{Text: "it is gone"})
			say("and now?")
			reqs = srv.Requests()
			if names := toolNamesOf(reqs[len(reqs)-1]); slices.Contains(names, tool) {
				t.Errorf("the stopped tool agent is still offered: %v", names)
			}
		})
	}
}

// Two users in this process talk at once to an Assistant in another
// process, each in a conversation of its own: their turns overlap there,
// neither sees the other's, and the Assistant's tool requests and answers
// carry each one's conversation across the broker.
func TestConversationsAcrossProcesses(t *testing.T) {
	t.Parallel()
	bin := buildPeer(t)
	ex := amqptest.Exchange(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{Exchange: ex})
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	annID, bobID, asstID, calcID := amqptest.Name("Ann"), amqptest.Name("Bob"), amqptest.Name("Assistant"), amqptest.Name("Calc")
	add := calcID + "__add"

	bobAsked := make(chan struct{})
	var once sync.Once
	step := openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case !slices.ContainsFunc(r.Tools, func(tl openaitest.Tool) bool { return tl.Name == add }):
			return openaitest.Step{Text: "not yet"} // the Assistant has not heard from the Calc yet
		case last.Role == "tool":
			return openaitest.Step{Text: "result " + last.Content}
		case last.Content == "Ann 1":
			select {
			case <-bobAsked:
			case <-r.Context().Done():
			}
			return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: add, Arguments: `{"a":1,"b":1}`}}}
		case last.Content == "Bob 1":
			once.Do(func() { close(bobAsked) })
			return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: add, Arguments: `{"a":2,"b":2}`}}}
		}
		return openaitest.Step{Text: "ok " + last.Content}
	}}
	srv := openaitest.NewServer(t)
	var calls received
	calcAgent := agency.MustNewAgent(calcID)
	agency.Handle(calcAgent, "add", func(ctx context.Context, args AddArgs) (float64, error) {
		calls.add(ctx)
		return args.A + args.B, nil
	}, agency.Describe("Adds two numbers"))
	ann, bob := newListener(annID), newListener(bobID)
	for _, a := range []*agency.Agent{calcAgent, ann.Agent, bob.Agent} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	startPeer(t, bin, "-exchange", ex, "-llm", asstID, "-base-url", srv.URL)

	sayIn := func(u *listener, conv, text string) (string, error) {
		m := &agency.Message{To: asstID, Action: "say", Args: SayArgs{Content: text}, Meta: map[string]any{"conversation": conv}}
		r, err := u.RequestMessage(ctx, m)
		if err != nil {
			return "", err
		}
		return agency.Value[string](r)
	}
	// Warm up in a conversation of its own until the Assistant offers the
	// Calc: its answer to the Assistant's help crosses the broker.
	for {
		srv.Add(step)
		got, err := sayIn(ann, "warm-up", "hello")
		if err != nil {
			t.Fatal(err)
		}
		ann.next(t, ctx)
		if got != "not yet" {
			break
		}
	}
	n := len(srv.Requests())
	srv.Add(slices.Repeat([]openaitest.Step{step}, 4)...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]string{}
	for _, u := range []*listener{ann, bob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := strings.Split(u.ID(), "-")[0]
			got, err := sayIn(u, "c-"+name, name+" 1")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			answers[name] = got
			mu.Unlock()
		}()
	}
	wg.Wait()
	if answers["Ann"] != "result 2" || answers["Bob"] != "result 4" {
		t.Fatalf("answers %v", answers)
	}
	for _, u := range []*listener{ann, bob} {
		name := strings.Split(u.ID(), "-")[0]
		m := u.next(t, ctx)
		if m.From != asstID || m.Meta["conversation"] != "c-"+name || contentOf(m) != answers[name] {
			t.Errorf("%s heard %v from %s with %v", name, m.Args, m.From, m.Meta)
		}
	}
	c := calls.get()
	if len(c) != 2 {
		t.Fatalf("%d calls", len(c))
	}
	for _, m := range c {
		want := map[string]string{`{"a":1,"b":1}`: "c-Ann", `{"a":2,"b":2}`: "c-Bob"}[string(m.Args.(json.RawMessage))]
		if m.Meta["conversation"] != want || m.From != asstID {
			t.Errorf("the call %s from %s carries %v, want %s", m.Args, m.From, m.Meta["conversation"], want)
		}
	}
	for _, r := range srv.Requests()[n:] {
		for _, m := range r.Messages[1:] {
			if m.Role == "user" && m.Content != lastUser(r) {
				t.Errorf("a request of %q holds %q", lastUser(r), m.Content)
			}
		}
	}
}

// The extension points, the control over tools and the model request hold
// when the tools are in another process: an extension's meta reaches the
// tool agent across the broker, its Result hook sees and rewrites that
// agent's answer, its own tool is offered and called beside the catalog's,
// its Answer hook changes what the user hears; a denied agent of the other
// process is never offered; the parameters reach the model, the answer
// streams, and the usage is summed for the conversation.
func TestExtensionsAcrossProcesses(t *testing.T) {
	t.Parallel()
	bin := buildPeer(t)
	ex := amqptest.Exchange(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{Exchange: ex})
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	userID, asstID := amqptest.Name("User"), amqptest.Name("Assistant")
	keptID, deniedID := amqptest.Name("Kept"), amqptest.Name("Denied")
	p := startPeer(t, bin, "-exchange", ex, "-tools", keptID+","+deniedID)

	var mu sync.Mutex
	var results []string
	var streamed strings.Builder
	var sum Usage
	ext := Extension{
		Before: func(_ context.Context, _ *Turn, r *Request) error {
			r.Meta = map[string]any{"ticket": "T-42"}
			r.Tools = append(r.Tools, Tool{Name: "lookup", Description: "Looks a ticket up"})
			return nil
		},
		Call: func(_ context.Context, _ *Turn, c ToolCall) (string, error) {
			return "ticket T-42 is open", nil
		},
		Result: func(_ context.Context, _ *Turn, r *Result) error {
			mu.Lock()
			results = append(results, r.Agent+"."+r.Action+" → "+r.Content)
			mu.Unlock()
			r.Content = strings.ToUpper(r.Content)
			return nil
		},
		Answer: func(_ context.Context, _ *Turn, a *Answer) error {
			a.Text += " (checked)"
			return nil
		},
	}
	srv := openaitest.NewServer(t)
	user := newListener(userID)
	llm, err := New(asstID, APIKey("k"), BaseURL(srv.URL), HTTPClient(srv.Client()), Retries(0, 0),
		Rediscover(0, 300*time.Millisecond), CallTimeout(peerTimeout), Extend(ext), Deny(deniedID),
		Temperature(0.25), Seed(7), MaxTokens(100),
		Stream(func(_ context.Context, c Chunk) {
			mu.Lock()
			defer mu.Unlock()
			if c.Answer || !c.Done {
				streamed.WriteString(c.Text)
			}
		}),
		OnUsage(func(_ context.Context, _, _ string, _, s Usage) { mu.Lock(); sum = s; mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{user.Agent, llm.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// The survey over the broker ends after a quiet period, which the
	// peer's answer may outlast on a loaded machine: each turn surveys, so
	// ask, in a conversation of its own, until a model call offers Kept.
	for offered := false; !offered; {
		srv.Add(openaitest.Step{Text: "nothing to call yet"})
		m := &agency.Message{To: asstID, Action: "say", Args: SayArgs{Content: "anything new?"}, Meta: map[string]any{"conversation": "warm-up"}}
		if _, err := user.RequestMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		user.next(t, ctx)
		reqs := srv.Requests()
		offered = slices.Contains(toolNamesOf(reqs[len(reqs)-1]), keptID+"__echo")
	}
	n := len(srv.Requests())
	mu.Lock()
	streamed.Reset()
	mu.Unlock()

	srv.Add(
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: keptID + "__echo", Arguments: `{"text":"hi"}`}, {Name: "lookup", Arguments: `{}`}}, Usage: openaitest.Usage{PromptTokens: 10, CompletionTokens: 5}},
		openaitest.Step{Text: "all good", Usage: openaitest.Usage{PromptTokens: 20, CompletionTokens: 3}},
	)
	m := &agency.Message{To: asstID, Action: "say", Args: SayArgs{Content: "check my ticket"}, Meta: map[string]any{"conversation": "c1"}}
	r, err := user.RequestMessage(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := agency.Value[string](r); v != "all good (checked)" {
		t.Errorf("the say returned %q, want the Answer hook's text", v)
	}
	if heard := contentOf(user.next(t, ctx)); heard != "all good (checked)" {
		t.Errorf("the user heard %q", heard)
	}

	reqs := srv.Requests()[n:]
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	names := toolNamesOf(reqs[0])
	if !slices.Contains(names, keptID+"__echo") || !slices.Contains(names, "lookup") {
		t.Errorf("offered %v: want the other process's %s and the extension's lookup", names, keptID)
	}
	for _, n := range names {
		if strings.HasPrefix(n, deniedID+"__") {
			t.Errorf("the denied agent's %s was offered", n)
		}
	}
	var body struct {
		Temperature float64 `json:"temperature"`
		Seed        int     `json:"seed"`
		MaxTokens   int     `json:"max_tokens"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil || body.Temperature != 0.25 || body.Seed != 7 || body.MaxTokens != 100 {
		t.Errorf("the model request had temperature %v, seed %d, max_tokens %d (%v); want 0.25, 7, 100", body.Temperature, body.Seed, body.MaxTokens, err)
	}
	var toolResults []string
	for _, msg := range reqs[1].Messages {
		if msg.Role == "tool" {
			toolResults = append(toolResults, msg.Content)
		}
	}
	if len(toolResults) != 2 || !strings.Contains(toolResults[0], " IN C1 TICKET T-42: HI") || toolResults[1] != "ticket T-42 is open" {
		t.Errorf("the model read the tool results %q; want the other process's answer with the extension's meta, rewritten, then lookup's", toolResults)
	}
	if strings.Contains(toolResults[0], fmt.Sprintf("@%d ", os.Getpid())) {
		t.Errorf("the tool ran in this process: %s", toolResults[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 1 || !strings.HasPrefix(results[0], keptID+".echo → ") {
		t.Errorf("the Result hook saw %q, want the one catalog call", results)
	}
	if streamed.String() != "all good" {
		t.Errorf("streamed %q, want the model's answer", streamed.String())
	}
	if sum.Calls != 2 || sum.PromptTokens != 30 || sum.CompletionTokens != 8 {
		t.Errorf("usage of the conversation %+v, want 2 calls, 30 prompt and 8 completion tokens", sum)
	}
	if u := llm.Usage(userID, "c1"); u != sum {
		t.Errorf("Usage(c1) = %+v, want %+v", u, sum)
	}
	p.stop()
}
