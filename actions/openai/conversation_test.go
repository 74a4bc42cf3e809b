package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
)

// sayIn has from say content to the Assistant in a conversation and
// returns the answer.
func (f *fixture) sayIn(from *agency.Agent, conv, content string) (string, error) {
	f.t.Helper()
	m := &agency.Message{To: "Assistant", Action: "say", Args: SayArgs{Content: content}, Meta: map[string]any{"conversation": conv}}
	r, err := from.RequestMessage(f.ctx, m)
	if err != nil {
		return "", err
	}
	return agency.Value[string](r)
}

// listener is a user agent whose say records the messages it gets.
type listener struct {
	*agency.Agent
	got chan *agency.Message
}

func newListener(id string) *listener {
	l := &listener{Agent: agency.MustNewAgent(id), got: make(chan *agency.Message, 16)}
	agency.Handle(l.Agent, "say", func(ctx context.Context, args SayArgs) (string, error) {
		l.got <- agency.MessageFrom(ctx)
		return "heard", nil
	})
	return l
}

// contentOf returns the content of a say, whether its arguments came as
// they were sent (in process) or as JSON (over a wire).
func contentOf(m *agency.Message) string {
	switch a := m.Args.(type) {
	case SayArgs:
		return a.Content
	case json.RawMessage:
		var s SayArgs
		_ = json.Unmarshal(a, &s)
		return s.Content
	}
	return fmt.Sprintf("%v", m.Args)
}

func (l *listener) next(t *testing.T, ctx context.Context) *agency.Message {
	t.Helper()
	select {
	case m := <-l.got:
		return m
	case <-ctx.Done():
		t.Fatalf("%s heard nothing", l.ID())
		return nil
	}
}

// lastUser returns the content of the request's last user message.
func lastUser(r openaitest.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// Two users talk to one assistant at once, each in a conversation of its
// own. Their turns overlap: the model's answer to Ann waits until Bob's
// request has reached the model, which a turn at a time per agent would
// never let happen. Neither sees the other's turns; every message the
// Assistant sends carries the conversation's id, tool requests included.
func TestConversationsInterleaved(t *testing.T) {
	bobAsked := make(chan struct{})
	var once sync.Once
	step := openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "tool":
			return openaitest.Step{Text: "result " + last.Content}
		case strings.HasPrefix(last.Content, "Ann 1"):
			select { // Bob's turn must be able to reach the model meanwhile
			case <-bobAsked:
			case <-r.Context().Done():
			}
			return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":1,"b":1}`}}}
		case strings.HasPrefix(last.Content, "Bob 1"):
			once.Do(func() { close(bobAsked) })
			return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":2,"b":2}`}}}
		default:
			return openaitest.Step{Text: "ok " + last.Content}
		}
	}}
	f := newFixture(t, slices.Repeat([]openaitest.Step{step}, 6)...)
	var calls received
	f.add(calculator(&calls))
	ann, bob := newListener("Ann"), newListener("Bob")
	f.add(ann.Agent)
	f.add(bob.Agent)
	f.start([]string{"Calculator", "Ann", "Bob"})

	var wg sync.WaitGroup
	answers := map[string]string{}
	var mu sync.Mutex
	for _, u := range []*listener{ann, bob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := f.sayIn(u.Agent, "c-"+u.ID(), u.ID()+" 1")
			if err != nil {
				t.Errorf("%s: %v", u.ID(), err)
			}
			mu.Lock()
			answers[u.ID()] = got
			mu.Unlock()
		}()
	}
	wg.Wait()
	if answers["Ann"] != "result 2" || answers["Bob"] != "result 4" {
		t.Fatalf("answers %v", answers)
	}
	for _, u := range []*listener{ann, bob} {
		m := u.next(t, f.ctx)
		if m.Meta["conversation"] != "c-"+u.ID() || contentOf(m) != answers[u.ID()] {
			t.Errorf("%s heard %v with meta %v", u.ID(), m.Args, m.Meta)
		}
	}
	for _, c := range calls.get() {
		a := string(c.Args.(json.RawMessage))
		want := map[string]string{`{"a":1,"b":1}`: "c-Ann", `{"a":2,"b":2}`: "c-Bob"}[a]
		if c.Meta["conversation"] != want {
			t.Errorf("the tool call %s carries conversation %v, want %s", a, c.Meta["conversation"], want)
		}
	}

	// The second turns see their own conversation only.
	for _, u := range []*listener{ann, bob} {
		if _, err := f.sayIn(u.Agent, "c-"+u.ID(), u.ID()+" 2"); err != nil {
			t.Fatal(err)
		}
		u.next(t, f.ctx)
	}
	for _, r := range f.requests(6) {
		who := strings.Fields(lastUser(r))[0]
		for _, m := range r.Messages[1:] {
			if m.Role == "user" && !strings.HasPrefix(m.Content, who) {
				t.Errorf("%s's request holds %q", who, m.Content)
			}
		}
		if lastUser(r) == who+" 2" && len(r.Messages) != 6 { // system, user, call, result, answer, user
			t.Errorf("%s's second turn sends %d messages: %+v", who, len(r.Messages), r.Messages)
		}
	}
}

// One turn at a time per conversation: three says sent at once in one
// conversation never reach the model together, and each turn sees the
// turns before it.
func TestOneTurnPerConversation(t *testing.T) {
	var mu sync.Mutex
	inFlight := 0
	step := openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		mu.Lock()
		inFlight++
		n := inFlight
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		if n > 1 {
			t.Errorf("%d model calls of one conversation at once", n)
		}
		return openaitest.Step{Text: fmt.Sprintf("answer after %d messages", len(r.Messages))}
	}}
	f := newFixture(t, step, step, step)
	f.start([]string{"User"})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.sayIn(f.user, "c1", fmt.Sprint("message ", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var lens []int
	for _, r := range f.requests(3) {
		lens = append(lens, len(r.Messages))
	}
	slices.Sort(lens)
	if !slices.Equal(lens, []int{2, 4, 6}) { // each turn adds a user message and an answer
		t.Errorf("the turns sent %v messages", lens)
	}
}

// Says of one conversation are answered in the order they arrived: five
// sent one after another without waiting reach the model in that order,
// each turn seeing the ones before it.
func TestSaysInArrivalOrder(t *testing.T) {
	const n = 5
	step := openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		return openaitest.Step{Text: "ok: " + lastUser(r)}
	}}
	steps := make([]openaitest.Step, n)
	for i := range steps {
		steps[i] = step
	}
	f := newFixture(t, steps...)
	f.start([]string{"User"})
	for i := range n {
		m := &agency.Message{To: "Assistant", Action: "say", Args: SayArgs{Content: fmt.Sprint("message ", i)}, Meta: map[string]any{"conversation": "c1"}}
		if _, err := f.user.SendMessage(f.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		f.heardNext()
	}
	for i, r := range f.requests(n) {
		if got, want := lastUser(r), fmt.Sprint("message ", i); got != want {
			t.Errorf("model call %d was for %q, want %q", i, got, want)
		}
		if got := len(r.Messages); got != 2+2*i {
			t.Errorf("model call %d sent %d messages, want %d", i, got, 2+2*i)
		}
	}
}

// A say without a conversation id belongs to the conversation named after
// its sender; the answer carries that id.
func TestConversationDefaultsToSender(t *testing.T) {
	f := newFixture(t, openaitest.Step{Text: "one"}, openaitest.Step{Text: "two"})
	f.start([]string{"User"})
	if _, err := f.say(f.user, "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sayIn(f.user, "User", "again"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests(2)[1].Messages); n != 4 {
		t.Errorf("the explicit conversation User is not the default one: %d messages", n)
	}
	h, _ := f.llm.memory.Load(f.ctx, ConversationKey("User", "User"))
	if len(h) != 4 || h[0].Name != "User" || h[1].Name != "Assistant" {
		t.Errorf("history %+v", h)
	}
}

// recordingMemory is a Memory that records its calls.
type recordingMemory struct {
	Memory
	mu    sync.Mutex
	calls []string
}

func (m *recordingMemory) note(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, s)
}

func (m *recordingMemory) Load(ctx context.Context, c string) ([]Message, error) {
	m.note("load " + c)
	return m.Memory.Load(ctx, c)
}

func (m *recordingMemory) Append(ctx context.Context, c string, msgs ...Message) error {
	var roles []string
	for _, x := range msgs {
		roles = append(roles, x.Role)
	}
	m.note("append " + c + " " + strings.Join(roles, ","))
	return m.Memory.Append(ctx, c, msgs...)
}

// The agent keeps history through its Memory: loaded once per turn, each
// step appended as it is done: a reply with tool calls before the calls
// are sent, their results together once they returned.
func TestMemory(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":1,"b":2}`}}},
		openaitest.Step{Text: "3"},
	)
	var calls received
	f.add(calculator(&calls))
	mem := &recordingMemory{Memory: NewMemory(10, 10)}
	f.start([]string{"Calculator"}, WithMemory(mem))
	if _, err := f.sayIn(f.user, "c9", "1+2?"); err != nil {
		t.Fatal(err)
	}
	want := []string{"load User c9", "append User c9 user", "append User c9 assistant", "append User c9 tool", "append User c9 assistant"}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if !slices.Equal(mem.calls, want) {
		t.Errorf("memory calls %q, want %q", mem.calls, want)
	}
}

// The default memory is bounded: messages per conversation, and
// conversations, the one unused longest forgotten first.
func TestMemoryBounds(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(3, 2)
	for i := range 5 {
		if err := m.Append(ctx, "a", Message{Role: RoleUser, Content: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	h, _ := m.Load(ctx, "a")
	if len(h) != 3 || h[0].Content != "2" || h[2].Content != "4" {
		t.Errorf("history %+v", h)
	}
	_ = m.Append(ctx, "b", Message{Role: RoleUser, Content: "b"})
	_, _ = m.Load(ctx, "a") // a is used after b
	_ = m.Append(ctx, "c", Message{Role: RoleUser, Content: "c"})
	if h, _ := m.Load(ctx, "b"); len(h) != 0 {
		t.Errorf("b, unused longest, is kept: %+v", h)
	}
	if h, _ := m.Load(ctx, "a"); len(h) != 3 {
		t.Errorf("a is lost: %+v", h)
	}
	_ = m.Replace(ctx, "a", []Message{{Role: RoleTool, Content: "orphan"}, {Role: RoleUser, Content: "x"}})
	if h, _ := m.Load(ctx, "a"); len(h) != 1 || h[0].Content != "x" {
		t.Errorf("after Replace: %+v", h)
	}
}
