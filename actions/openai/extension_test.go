package openai

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
)

// transfer is an extension shaped like a handoff: Before offers a transfer
// tool (and turns parallel tool calls off), puts the turn's variables in
// the tool requests' meta and in the system prompt; calling the tool ends
// the turn, which hands the history to a callback once it is recorded; a
// second transfer in the same reply is refused.
type transfer struct {
	vars      map[string]any
	handedOff chan []Message
	added     atomic.Int32
}

func (x *transfer) extension() Extension {
	return Extension{
		Before: func(ctx context.Context, t *Turn, r *Request) error {
			r.Tools = append(r.Tools,
				Tool{Name: "transfer_to_refunds", Description: "Use for refunds."},
				Tool{Name: "transfer_to_sales", Description: "Use for sales."})
			off := false
			r.Params.ParallelToolCalls = &off
			r.Meta = map[string]any{"context_vars": x.vars}
			r.System = "You are Triage. Tier: " + x.vars["tier"].(string)
			return nil
		},
		Call: func(ctx context.Context, t *Turn, c ToolCall) (string, error) {
			if t.Ended() {
				return "", errors.New("only one handoff per reply; " + c.Name + " was not made")
			}
			t.End(func(ctx context.Context, t *Turn) { x.handedOff <- slices.Clone(t.History) })
			return "Transferred to Refunds. Adopt persona immediately.", nil
		},
		Added: func(ctx context.Context) { x.added.Add(1) },
	}
}

// A transfer: the tool ends the turn; the other calls of the reply still
// get results (a second transfer an error, a catalog call its value); no
// further model call and no say back; the handoff gets the whole history,
// results included; the say's value is empty.
func TestExtensionEndsTurnFromCall(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Text: "Let me transfer you.", ToolCalls: []openaitest.ToolCall{
			{Name: "transfer_to_refunds", Arguments: `{}`},
			{Name: "transfer_to_sales", Arguments: `{}`},
			{Name: "Calculator__add", Arguments: `{"a":1,"b":1}`},
		}},
	)
	var calls received
	f.add(calculator(&calls))
	x := &transfer{vars: map[string]any{"tier": "Gold"}, handedOff: make(chan []Message, 1)}
	f.start([]string{"Calculator", "User"}, Extend(x.extension()))
	if x.added.Load() != 1 {
		t.Errorf("Added ran %d times", x.added.Load())
	}

	got, err := f.sayIn(f.user, "c1", "I want a refund")
	if err != nil || got != "" {
		t.Fatalf("answer %q, %v: want an empty value", got, err)
	}
	var h []Message
	select {
	case h = <-x.handedOff:
	case <-f.ctx.Done():
		t.Fatal("no handoff")
	}
	roles := []string{}
	for _, m := range h {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"user", "assistant", "tool", "tool", "tool"}) {
		t.Fatalf("handed-off history %+v", h)
	}
	if h[2].Content != "Transferred to Refunds. Adopt persona immediately." ||
		h[3].Content != "error: only one handoff per reply; transfer_to_sales was not made" || h[4].Content != "2" {
		t.Errorf("results %q, %q, %q", h[2].Content, h[3].Content, h[4].Content)
	}
	if h[1].Name != "Assistant" || h[0].Name != "User" {
		t.Errorf("names %q, %q", h[0].Name, h[1].Name)
	}
	stored, _ := f.llm.memory.Load(f.ctx, ConversationKey("User", "c1"))
	if len(stored) != 5 {
		t.Errorf("the memory holds %d messages", len(stored))
	}

	req := f.requests(1)[0]
	if req.ParallelToolCalls == nil || *req.ParallelToolCalls {
		t.Errorf("parallel_tool_calls %v, want false", req.ParallelToolCalls)
	}
	if names := toolNamesOf(req); !slices.Equal(names, []string{"Calculator__add", "transfer_to_refunds", "transfer_to_sales"}) {
		t.Errorf("tools %v", names)
	}
	if tool, _ := req.Tool("transfer_to_refunds"); !sameJSON(tool.Parameters, []byte(`{"type":"object","properties":{}}`)) {
		t.Errorf("parameters %s", tool.Parameters)
	}
	if req.Messages[0].Content != "You are Triage. Tier: Gold" {
		t.Errorf("system prompt %q", req.Messages[0].Content)
	}
	c := calls.get()
	if len(c) != 1 || c[0].Meta["conversation"] != "c1" || c[0].Meta["tool_call_id"] == nil {
		t.Fatalf("calls %v", c)
	}
	if vars, _ := c[0].Meta["context_vars"].(map[string]any); vars["tier"] != "Gold" {
		t.Errorf("the tool request's meta %v", c[0].Meta)
	}
	select {
	case s := <-f.heard:
		t.Errorf("the user heard %q", s)
	default:
	}
}

// Before may end the turn without any model call (a condition on the
// variables hands off at once).
func TestExtensionEndsTurnBeforeModel(t *testing.T) {
	f := newFixture(t)
	var ran []string
	f.start([]string{"User"}, Extend(Extension{
		Before: func(ctx context.Context, t *Turn, r *Request) error {
			t.End(func(ctx context.Context, t *Turn) { ran = append(ran, "then "+t.History[len(t.History)-1].Content) })
			return nil
		},
	}), Extend(Extension{
		Before: func(ctx context.Context, t *Turn, r *Request) error {
			ran = append(ran, "second extension") // never: the first ended the turn
			return nil
		},
	}))
	got, err := f.sayIn(f.user, "c1", "Hello")
	if err != nil || got != "" {
		t.Fatalf("answer %q, %v", got, err)
	}
	f.requests(0)
	if !slices.Equal(ran, []string{"then Hello"}) {
		t.Errorf("ran %q", ran)
	}
}

// Result sees every catalog result and may rewrite it or end the turn;
// Answer may change the text, add meta to the say, or have the model
// called again.
func TestExtensionResultAndAnswer(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":1,"b":2}`}}},
		openaitest.Step{Text: "first"},
		openaitest.Step{Text: "second"},
	)
	var calls received
	f.add(calculator(&calls))
	var results []string
	answers := 0
	f.start([]string{"Calculator", "User"}, Extend(Extension{
		Result: func(ctx context.Context, t *Turn, r *Result) error {
			v, err := agency.Value[float64](r.Response)
			results = append(results, r.Agent+"."+r.Action+" "+r.Call.Name)
			if err != nil || v != 3 {
				return errors.New("unexpected value")
			}
			r.Content = `{"sum":3}`
			return nil
		},
		Answer: func(ctx context.Context, t *Turn, a *Answer) error {
			answers++
			a.Text = strings.ToUpper(a.Text)
			if answers == 1 {
				a.Again = true
				return nil
			}
			a.Meta = map[string]any{"final": true}
			return nil
		},
	}))
	l := newListener("Ann")
	f.add(l.Agent)
	m := &agency.Message{To: "Assistant", Action: "say", Args: SayArgs{Content: "1+2"}, Meta: map[string]any{"conversation": "c2"}}
	r, err := l.RequestMessage(f.ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := agency.Value[string](r); v != "SECOND" {
		t.Errorf("value %q", v)
	}
	first, second := l.next(t, f.ctx), l.next(t, f.ctx)
	if contentOf(first) != "FIRST" || contentOf(second) != "SECOND" {
		t.Errorf("said %v then %v", first.Args, second.Args)
	}
	if first.Meta["final"] != nil || second.Meta["final"] != true || second.Meta["conversation"] != "c2" || second.Meta["in_reply_to"] != m.ID {
		t.Errorf("meta %v then %v", first.Meta, second.Meta)
	}
	reqs := f.requests(3)
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Content != `{"sum":3}` {
		t.Errorf("the model read %q", last.Content)
	}
	if last := reqs[2].Messages[len(reqs[2].Messages)-1]; last.Role != "assistant" || last.Content != "FIRST" {
		t.Errorf("the third call ends with %+v", last)
	}
	if !slices.Equal(results, []string{"Calculator.add Calculator__add"}) {
		t.Errorf("results %q", results)
	}
}

// An extension's error fails the turn like a model error does; a tool with
// a bad name is a programmer's error, which fails it too.
func TestExtensionErrors(t *testing.T) {
	f := newFixture(t)
	f.start([]string{"User"}, Extend(Extension{
		Before: func(ctx context.Context, t *Turn, r *Request) error {
			if strings.Contains(t.History[len(t.History)-1].Content, "bad name") {
				r.Tools = append(r.Tools, Tool{Name: "has__two"})
				return nil
			}
			return errors.New("the store is down")
		},
	}))
	_, err := f.say(f.user, "hi")
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "the store is down") {
		t.Fatalf("error %v", err)
	}
	if h := f.heardNext(); !strings.HasPrefix(h, "Sorry, something went wrong on my side") {
		t.Errorf("the user heard %q", h)
	}
	if _, err := f.say(f.user, "bad name"); err == nil || !strings.Contains(err.Error(), `"has__two"`) {
		t.Errorf("error %v", err)
	}
	f.requests(0)
}

// Continue runs a turn on a history handed over by another agent: the
// model is called at once on that history, and the answer goes to the
// partner in the conversation.
func TestContinue(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Text: "I see you want a refund for shoes."},
		openaitest.Step{Text: "Done."},
	)
	var data []any // Turn.Data of each model call
	f.start([]string{"User"}, Extend(Extension{Before: func(ctx context.Context, t *Turn, r *Request) error {
		data = append(data, t.Data)
		return nil
	}}))
	history := []Message{
		{Role: RoleUser, Name: "Ann", Content: "I want a refund"},
		{Role: RoleAssistant, Name: "Triage", ToolCalls: []ToolCall{{ID: "t1", Name: "transfer_to_refunds", Arguments: "{}"}}},
		{Role: RoleTool, ToolCallID: "t1", Content: "Transferred."},
	}
	ann := newListener("Ann")
	f.add(ann.Agent)
	got, err := f.llm.Continue(f.ctx, Continuation{Conversation: "c3", Partner: "Ann", History: history, Data: "from Triage"})
	if err != nil || got != "I see you want a refund for shoes." {
		t.Fatalf("Continue: %q, %v", got, err)
	}
	m := ann.next(t, f.ctx)
	if m.From != "Assistant" || m.Meta["conversation"] != "c3" || contentOf(m) != got {
		t.Errorf("Ann heard %v from %s with %v", m.Args, m.From, m.Meta)
	}
	req := f.requests(1)[0]
	if len(req.Messages) != 4 || req.Messages[1].Name != "Ann" || req.Messages[2].Name != "Triage" || req.Messages[3].Role != "tool" {
		t.Fatalf("messages %+v", req.Messages)
	}
	if !strings.Contains(req.Messages[0].Content, `"Ann"`) {
		t.Errorf("system prompt %q", req.Messages[0].Content)
	}
	// Ann's next say in c3 continues there.
	if _, err := f.sayIn(ann.Agent, "c3", "Thanks"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests(2)[1].Messages); n != 6 {
		t.Errorf("the next turn sends %d messages", n)
	}
	// The handler's Data reached the hooks of the continued turn only.
	if !slices.Equal(data, []any{"from Triage", nil}) {
		t.Errorf("Turn.Data of the two turns: %v", data)
	}
	if _, err := f.llm.Continue(f.ctx, Continuation{Partner: "Ann"}); err == nil {
		t.Error("Continue without a conversation")
	}
}

// The messages sent to the model carry who said them, where the name is
// one the API takes.
func TestNamesSentToModel(t *testing.T) {
	m := toChat(Message{Role: RoleAssistant, Name: "Triage", Content: "x"})
	if m.Name != "Triage" {
		t.Errorf("name %q", m.Name)
	}
	for _, bad := range []string{"svc.calc", "Café", strings.Repeat("a", 65)} {
		if m := toChat(Message{Role: RoleUser, Name: bad}); m.Name != "" {
			t.Errorf("name %q sent", m.Name)
		}
	}
	if b, _ := json.Marshal(toChat(Message{Role: RoleTool, Name: "x", ToolCallID: "1"})); strings.Contains(string(b), `"name"`) {
		t.Errorf("a tool message with a name: %s", b)
	}
}

// Removing runs once when the agent leaves its space, before its turns
// are drained: the place to stop what Added started.
func TestExtensionRemoving(t *testing.T) {
	f := newFixture(t)
	var added, removing atomic.Int32
	f.start([]string{"User"}, Extend(Extension{
		Added:    func(ctx context.Context) { added.Add(1) },
		Removing: func(ctx context.Context) { removing.Add(1) },
	}))
	if added.Load() != 1 || removing.Load() != 0 {
		t.Fatalf("after Add: Added %d, Removing %d", added.Load(), removing.Load())
	}
	if err := f.sp.Remove(f.ctx, "Assistant"); err != nil {
		t.Fatal(err)
	}
	if removing.Load() != 1 {
		t.Errorf("after Remove: Removing ran %d times", removing.Load())
	}
	if _, err := New("X", APIKey("k"), Extend(Extension{Removing: func(context.Context) {}})); err != nil {
		t.Errorf("an extension with only Removing: %v", err)
	}
}
