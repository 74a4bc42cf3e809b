package handoff

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// durableEnv carries to a child process of TestDurableTurns what it runs.
const durableEnv = "HANDOFF_DURABLE_CHILD"

// durableSpec is a child's program: an LLM agent of a Team on a store
// (a SQLite file or a PostgreSQL DSN), in a space on the broker, whose
// model is the parent's scripted server.
type durableSpec struct {
	AMQP, Exchange string
	SQLite, PG     string
	Model, Agent   string
}

// TestDurableChild is the program of a child process of TestDurableTurns:
// it builds the agent on the store, joins the space, prints "ready", and
// runs until SIGTERM (or SIGKILL).
func TestDurableChild(t *testing.T) {
	env := os.Getenv(durableEnv)
	if env == "" {
		t.Skip("runs as a child of TestDurableTurns")
	}
	var spec durableSpec
	if err := json.Unmarshal([]byte(env), &spec); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var st store.Store
	var err error
	if spec.SQLite != "" {
		st, err = sqlitestore.Open(ctx, spec.SQLite)
	} else {
		st, err = pgstore.Open(ctx, spec.PG)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	team := &Team{Options: []Option{WithStore(st), Logger(logger)},
		LLM: []openai.Option{openai.BaseURL(spec.Model), openai.APIKey("test"), openai.Logger(logger)}}
	llm, err := team.Agent(spec.Agent, "You answer with the tool.")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := amqpspace.New(ctx, amqpspace.Config{URL: spec.AMQP, Exchange: spec.Exchange, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Add(ctx, llm.Agent()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = sp.Close(cctx)
}

// durableChild is a running child process.
type durableChild struct {
	cmd  *exec.Cmd
	exit chan struct{}
}

func startDurable(t *testing.T, spec durableSpec) *durableChild {
	t.Helper()
	env, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDurableChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), durableEnv+"="+string(env))
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &durableChild{cmd: cmd, exit: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			if sc.Text() == "ready" {
				once.Do(func() { close(ready) })
			}
		}
		_ = cmd.Wait()
		close(c.exit)
	}()
	t.Cleanup(c.kill)
	select {
	case <-ready:
	case <-c.exit:
		t.Fatal("the child ended before it was ready")
	case <-time.After(30 * time.Second):
		t.Fatal("the child was not ready in 30s")
	}
	return c
}

// kill kills the child with SIGKILL, as a power cut would, and waits for
// it.
func (c *durableChild) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exit
}

// stop ends the child as an operator would.
func (c *durableChild) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exit:
	case <-time.After(15 * time.Second):
		c.kill()
	}
}

// The kill points of a turn: during the model request that makes the
// tool call, during the tool call, 0, 5 and 20 ms after the tool's
// handler returned, and during the final model request.
var durableKills = []string{"model", "tool", "after-0ms", "after-5ms", "after-20ms", "final"}

// Issue 28: a turn of an LLM agent of a Team, in a child process on
// RabbitMQ with its store on SQLite or PostgreSQL, is cut by SIGKILL at
// each kill point, and the child is started again on the same store.
// Without anything else called, the agent takes the turn up again: the
// question is answered (a say with in_reply_to the question's id), the
// tool's effect happened once (its handler, wrapped in plan.Idempotent,
// ran once, and every request of the call carried the same
// idempotency_key and tool_call_id), and every model request after the
// restart has a consistent history: the question once, each tool call
// once and followed by its result, no result without its call.
//
// Each kill point runs once per store (about 1.5 s each); with
// AGENCY_LONG_TESTS=1 it runs 10 times, each round on a fresh space and
// conversation over the same store.
func TestDurableTurns(t *testing.T) {
	url := amqptest.URL(t)
	rounds := 1
	if os.Getenv("AGENCY_LONG_TESTS") == "1" {
		rounds = 10
	}
	stores := map[string]func(t *testing.T) (durableSpec, func() (store.Store, error)){
		"SQLite": func(t *testing.T) (durableSpec, func() (store.Store, error)) {
			path := filepath.Join(t.TempDir(), "d.db")
			return durableSpec{SQLite: path}, func() (store.Store, error) { return sqlitestore.Open(t.Context(), path) }
		},
		"PostgreSQL": func(t *testing.T) (durableSpec, func() (store.Store, error)) {
			dsn := pgtest.DSN(t)
			return durableSpec{PG: dsn}, func() (store.Store, error) { return pgstore.Open(t.Context(), dsn) }
		},
	}
	for _, db := range []string{"SQLite", "PostgreSQL"} {
		for _, at := range durableKills {
			t.Run(db+"/"+at, func(t *testing.T) {
				// Each kill point has its own store, exchange and
				// agents: they run side by side, mostly waiting for
				// processes to start.
				t.Parallel()
				spec, open := stores[db](t)
				for round := range rounds {
					durableRound(t, url, spec, open, at, fmt.Sprintf("c%d", round))
				}
			})
		}
	}
}

// The key of a model's tool call travels where plan.Idempotent reads it.
func TestIdempotencyKeyIsPlans(t *testing.T) {
	if openai.IdempotencyKey != plan.IdempotencyKey {
		t.Errorf("openai sends the key as %q, plan.Idempotent reads %q", openai.IdempotencyKey, plan.IdempotencyKey)
	}
}

// toolCall is what the tool saw of one request.
type toolCall struct{ key, callID string }

func durableRound(t *testing.T, url string, spec durableSpec, open func() (store.Store, error), at, conv string) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	sfx := strings.TrimPrefix(amqptest.Name(""), "-")
	spec.AMQP, spec.Exchange, spec.Agent = url, amqptest.Exchange(t), "Assistant-"+sfx
	userID, toolID := "User-"+sfx, "Tool-"+sfx

	var child atomic.Pointer[durableChild]
	killed := make(chan struct{})
	var killOnce sync.Once
	kill := func() {
		killOnce.Do(func() {
			child.Load().kill()
			close(killed)
		})
	}

	// The model: a tool call for the question, the answer for the result.
	// At "model" and "final" the first such request waits until the
	// child is killed.
	var hangModel, hangFinal atomic.Bool
	hangModel.Store(at == "model")
	hangFinal.Store(at == "final")
	var slow atomic.Bool
	slow.Store(strings.HasPrefix(at, "after-"))
	srv := openaitest.NewServer(t)
	step := openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		last := r.Messages[len(r.Messages)-1]
		hang := &hangModel
		if last.Role == "tool" {
			hang = &hangFinal
		}
		if hang.CompareAndSwap(true, false) {
			go kill()
			<-r.Context().Done()
			return openaitest.Step{Status: 500, Error: "gone"}
		}
		if last.Role == "tool" && slow.CompareAndSwap(true, false) {
			// The model takes its time, so that the kill after the tool
			// returned comes before the answer.
			select {
			case <-r.Context().Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		if last.Role == "tool" {
			return openaitest.Step{Text: "The answer is " + last.Content + "."}
		}
		return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: toolID + "__work", Arguments: `{"n":21}`}}}
	}}
	for range 10 {
		srv.Add(step)
	}
	spec.Model = srv.URL

	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: spec.Exchange})
	// The tool: its handler runs once per idempotency key; at "tool" it
	// waits until the child is killed, at "after-Nms" it kills the child
	// N ms after it returns.
	var runs atomic.Int32
	var mu sync.Mutex
	var calls []toolCall
	type workArgs struct {
		N int `json:"n"`
	}
	work := plan.Idempotent(store.NewMemory(), func(ctx context.Context, a workArgs) (int, error) {
		runs.Add(1)
		switch at {
		case "tool":
			go kill()
			<-killed
		case "after-0ms", "after-5ms", "after-20ms":
			var ms int
			fmt.Sscanf(at, "after-%dms", &ms)
			time.AfterFunc(time.Duration(ms)*time.Millisecond, kill)
		}
		return a.N * 2, nil
	})
	tool := agency.MustNewAgent(toolID, agency.Concurrency(4))
	agency.Handle(tool, "work", func(ctx context.Context, a workArgs) (int, error) {
		m := agency.MessageFrom(ctx)
		key, _ := m.Meta[plan.IdempotencyKey].(string)
		id, _ := m.Meta["tool_call_id"].(string)
		mu.Lock()
		calls = append(calls, toolCall{key, id})
		mu.Unlock()
		return work(ctx, a)
	}, agency.Describe("Doubles n, with an effect"))

	type said struct {
		text, inReplyTo string
	}
	heard := make(chan said, 16)
	user := agency.MustNewAgent(userID)
	agency.Handle(user, "say", func(ctx context.Context, a openai.SayArgs) (string, error) {
		m := agency.MessageFrom(ctx)
		r, _ := m.Meta["in_reply_to"].(string)
		heard <- said{a.Content, r}
		return "ok", nil
	})
	for _, a := range []*agency.Agent{tool, user} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	child.Store(startDurable(t, spec))
	q := &agency.Message{To: spec.Agent, Action: "say", Args: openai.SayArgs{Content: "What is 21 doubled?"},
		Meta: map[string]any{metaConversation: conv}}
	qid, err := user.SendMessage(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatalf("killed %s: the child never reached the kill point", at)
	}
	before := len(srv.Requests())
	child.Store(startDurable(t, spec))

	var answer said
	deadline := time.After(30 * time.Second)
	for answer.text == "" {
		select {
		case s := <-heard:
			if s.inReplyTo == qid {
				answer = s
			}
		case <-deadline:
			t.Fatalf("killed %s: the question was not answered within 30s of the restart", at)
		}
	}
	if answer.text != "The answer is 42." {
		t.Errorf("killed %s: answered %q", at, answer.text)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("killed %s: the tool's effect happened %d times", at, n)
	}
	mu.Lock()
	for _, c := range calls {
		if c != calls[0] || c.key == "" || c.callID == "" {
			t.Errorf("killed %s: the tool's requests carried %+v", at, calls)
			break
		}
	}
	mu.Unlock()
	reqs := srv.Requests()
	if len(reqs) == before {
		t.Errorf("killed %s: no model request after the restart", at)
	}
	for i, r := range reqs[before:] {
		if err := consistent(r.Messages); err != nil {
			t.Errorf("killed %s: model request %d after the restart: %v", at, i+1, err)
		}
	}
	child.Load().stop()

	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := &memory{st: st, agent: spec.Agent}
	h, err := m.Load(ctx, openai.ConversationKey(userID, conv))
	if err != nil {
		t.Fatal(err)
	}
	hm := make([]openaitest.Message, len(h))
	for i, x := range h {
		hm[i] = openaitest.Message{Role: x.Role, Content: x.Content, ToolCallID: x.ToolCallID}
		for _, c := range x.ToolCalls {
			hm[i].ToolCalls = append(hm[i].ToolCalls, openaitest.ToolCall{ID: c.ID, Name: c.Name})
		}
	}
	if err := consistent(hm); err != nil || h[len(h)-1].Content != "The answer is 42." {
		t.Errorf("killed %s: the stored history (%v): %+v", at, err, h)
	}
	if ps, err := m.Pending(ctx); err != nil || len(ps) != 0 {
		t.Errorf("killed %s: pending turns left: %+v, %v", at, ps, err)
	}
}

// consistent checks a history: the question once; each reply's tool
// calls answered right after it, each once; no result without its call;
// no call twice.
func consistent(msgs []openaitest.Message) error {
	questions := 0
	seen := map[string]bool{}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case "user":
			questions++
		case "tool":
			return fmt.Errorf("message %d: a tool result without its call: %+v", i, m)
		case "assistant":
			want := map[string]bool{}
			for _, c := range m.ToolCalls {
				if seen[c.ID] {
					return fmt.Errorf("message %d: the call %s is in the history twice", i, c.ID)
				}
				seen[c.ID], want[c.ID] = true, true
			}
			for len(want) > 0 {
				i++
				if i >= len(msgs) || msgs[i].Role != "tool" || !want[msgs[i].ToolCallID] {
					return fmt.Errorf("message %d: the calls %v of message are not answered right after it", i, want)
				}
				delete(want, msgs[i].ToolCallID)
			}
		}
	}
	if questions != 1 {
		return fmt.Errorf("the question is in the history %d times", questions)
	}
	return nil
}
