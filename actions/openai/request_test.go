package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
)

// Allow and Deny choose what the model is offered; every say is left out
// unless an Allow names it.
func TestToolControl(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want []string
	}{
		{"default", nil, []string{"Calculator__add", "Weather__forecast"}},
		{"allow one agent", []Option{Allow("Calculator")}, []string{"Calculator__add"}},
		{"allow one action", []Option{Allow("Weather", "forecast")}, []string{"Weather__forecast"}},
		{"deny one agent", []Option{Deny("Weather")}, []string{"Calculator__add"}},
		{"deny wins", []Option{Allow("*"), Deny("*", "say"), Deny("Calculator", "add")}, []string{"Weather__forecast"}},
		{"allow every say", []Option{Allow("*", "say")}, []string{"User__say"}},
		{"allow everything", []Option{Allow("*")}, []string{"Calculator__add", "User__say", "Weather__forecast"}},
		{"allow adds up", []Option{Allow("User", "say"), Allow("Calculator")}, []string{"Calculator__add", "User__say"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, openaitest.Step{Text: "ok"})
			var calls received
			f.add(calculator(&calls))
			f.add(weather("Weather", &calls))
			f.start([]string{"Calculator", "Weather", "User"}, tc.opts...)
			if _, err := f.say(f.user, "hi"); err != nil {
				t.Fatal(err)
			}
			if got := toolNamesOf(f.requests(1)[0]); !slices.Equal(got, tc.want) {
				t.Errorf("tools %v, want %v", got, tc.want)
			}
		})
	}
	clearEnv(t)
	for _, bad := range []Option{Allow(""), Deny(""), Allow("A", "")} {
		if _, err := New("Assistant", APIKey("k"), bad); !errors.Is(err, agency.ErrInvalidOption) {
			t.Errorf("got %v", err)
		}
	}
}

// bodyOf decodes the raw body of a request.
func bodyOf(t *testing.T, r openaitest.Request) map[string]any {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// The model parameters reach the request as the API names them.
func TestModelParameters(t *testing.T) {
	f := newFixture(t, openaitest.Step{Text: `{"answer":3}`}, openaitest.Step{Text: "plain"})
	var calls received
	f.add(calculator(&calls))
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"number"}},"required":["answer"],"additionalProperties":false}`)
	f.start([]string{"Calculator"}, Model("agent-model"), Temperature(0.25), TopP(0.5), MaxTokens(300), Seed(7),
		ToolChoice("Calculator__add"), ParallelToolCalls(false),
		Format(ResponseFormat{Name: "result", Schema: schema, Strict: true}))
	if _, err := f.say(f.user, "hi"); err != nil {
		t.Fatal(err)
	}
	b := bodyOf(t, f.requests(1)[0])
	for key, want := range map[string]any{
		"model":               "agent-model",
		"temperature":         0.25,
		"top_p":               0.5,
		"max_tokens":          300.0,
		"seed":                7.0,
		"parallel_tool_calls": false,
		"tool_choice":         map[string]any{"type": "function", "function": map[string]any{"name": "Calculator__add"}},
	} {
		if !reflect.DeepEqual(b[key], want) {
			t.Errorf("%s = %#v, want %#v", key, b[key], want)
		}
	}
	rf, _ := b["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["name"] != "result" || js["strict"] != true {
		t.Errorf("response_format %v", b["response_format"])
	}
	var wantSchema any
	_ = json.Unmarshal(schema, &wantSchema)
	if !reflect.DeepEqual(js["schema"], wantSchema) {
		t.Errorf("schema %v", js["schema"])
	}

	// A temperature of 0 is sent (as the smallest float32), and tool
	// parameters are left out when there is no tool.
	g := newFixture(t, openaitest.Step{Text: "x"})
	g.start([]string{"User"}, Temperature(0), ToolChoice("required"), ParallelToolCalls(true), Format(ResponseFormat{}))
	if _, err := g.say(g.user, "hi"); err != nil {
		t.Fatal(err)
	}
	b = bodyOf(t, g.requests(1)[0])
	if temp, ok := b["temperature"].(float64); !ok || temp <= 0 || temp > 1e-30 {
		t.Errorf("temperature %v, want the smallest float32", b["temperature"])
	}
	if _, ok := b["tool_choice"]; ok {
		t.Errorf("tool_choice without tools: %v", b["tool_choice"])
	}
	if _, ok := b["parallel_tool_calls"]; ok {
		t.Errorf("parallel_tool_calls without tools")
	}
	if rf, _ := b["response_format"].(map[string]any); rf["type"] != "json_object" {
		t.Errorf("response_format %v", b["response_format"])
	}

	clearEnv(t)
	for name, opt := range map[string]Option{
		"temperature": Temperature(3), "top_p": TopP(0), "max tokens": MaxTokens(0), "tool choice": ToolChoice(""),
		"schema without name": Format(ResponseFormat{Schema: schema}), "schema not an object": Format(ResponseFormat{Name: "x", Schema: json.RawMessage(`[]`)}),
		"settle": Rediscover(0, 0), "concurrency": Concurrency(0), "request timeout": RequestTimeout(0),
		"no hook": Extend(Extension{}), "nil stream": Stream(nil), "nil usage": OnUsage(nil), "nil memory": WithMemory(nil),
	} {
		if _, err := New("Assistant", APIKey("k"), opt); !errors.Is(err, agency.ErrInvalidOption) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := New("Assistant", APIKey("k"), History(3), WithMemory(NewMemory(3, 3))); !errors.Is(err, agency.ErrInvalidOption) {
		t.Errorf("History with WithMemory: %v", err)
	}
}

// Streaming: the text of each reply reaches the callback in pieces, in
// order, then a closing chunk that says whether the reply was the answer;
// the answer is the whole text; the usage comes with the stream.
func TestStream(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Text: "Let me add.", ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":2,"b":3}`}}, Usage: openaitest.Usage{PromptTokens: 10, CompletionTokens: 4}},
		openaitest.Step{Text: "The sum is 5.", Pieces: []string{"The s", "um is", " 5."}, Usage: openaitest.Usage{PromptTokens: 20, CompletionTokens: 5}},
	)
	var calls received
	f.add(calculator(&calls))
	var mu sync.Mutex
	var chunks []Chunk
	var usages []Usage
	f.start([]string{"Calculator"}, Stream(func(ctx context.Context, c Chunk) {
		mu.Lock()
		defer mu.Unlock()
		chunks = append(chunks, c)
	}), OnUsage(func(ctx context.Context, _, conv string, turn, sum Usage) {
		mu.Lock()
		defer mu.Unlock()
		usages = append(usages, turn)
	}))
	got, err := f.sayIn(f.user, "c1", "2+3?")
	if err != nil || got != "The sum is 5." {
		t.Fatalf("answer %q, %v", got, err)
	}
	want := []Chunk{
		{Conversation: "c1", Step: 1, Text: "Let "}, {Conversation: "c1", Step: 1, Text: "me "}, {Conversation: "c1", Step: 1, Text: "add."},
		{Conversation: "c1", Step: 1, Done: true},
		{Conversation: "c1", Step: 2, Text: "The s"}, {Conversation: "c1", Step: 2, Text: "um is"}, {Conversation: "c1", Step: 2, Text: " 5."},
		{Conversation: "c1", Step: 2, Done: true, Answer: true},
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(chunks, want) {
		t.Errorf("chunks\n %+v\nwant\n %+v", chunks, want)
	}
	reqs := f.requests(2)
	if !reqs[0].Stream {
		t.Error("the request did not ask for a stream")
	}
	if c := calls.get(); len(c) != 1 || c[0].Meta["thoughts"] != "Let me add." {
		t.Errorf("the streamed tool call: %v", c)
	}
	if m := reqs[1].Messages; m[len(m)-1].Content != "5" || m[len(m)-2].ToolCalls[0].Arguments != `{"a":2,"b":3}` {
		t.Errorf("messages %+v", m)
	}
	if want := (Usage{Calls: 2, PromptTokens: 30, CompletionTokens: 9, TotalTokens: 39}); !slices.Equal(usages, []Usage{want}) {
		t.Errorf("usage %+v, want %+v", usages, want)
	}
}

// A stream that breaks part-way ends with a Done chunk that carries the
// error, so that a terminal can tell the text it showed was abandoned; the
// request is not tried again, and the partner hears why.
func TestStreamBroken(t *testing.T) {
	f := newFixture(t, openaitest.Step{Text: "The sum", Pieces: []string{"The", " sum"}, Broken: true, Error: "the server is overloaded"})
	var mu sync.Mutex
	var chunks []Chunk
	f.start([]string{"User"}, Stream(func(ctx context.Context, c Chunk) {
		mu.Lock()
		defer mu.Unlock()
		chunks = append(chunks, c)
	}))
	if _, err := f.sayIn(f.user, "c1", "2+3?"); err == nil {
		t.Error("the say succeeded")
	}
	if heard := f.heardNext(); !strings.HasPrefix(heard, "Sorry, ") || !strings.Contains(heard, "the server is overloaded") {
		t.Errorf("the user heard %q", heard)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(chunks) != 3 || chunks[0].Text != "The" || chunks[1].Text != " sum" {
		t.Fatalf("chunks %+v, want the two pieces and a closing chunk", chunks)
	}
	last := chunks[2]
	if !last.Done || last.Answer || last.Text != "" || last.Err == nil || !strings.Contains(last.Err.Error(), "the server is overloaded") || last.Step != 1 || last.Conversation != "c1" {
		t.Errorf("the closing chunk %+v, want Done with the stream's error", last)
	}
	f.requests(1) // not tried again
	if h, _ := f.llm.memory.Load(f.ctx, ConversationKey("User", "c1")); len(h) != 1 {
		t.Errorf("the history %+v holds the abandoned text", h)
	}
}

// Usage is reported per turn and summed per conversation.
func TestUsage(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":1,"b":1}`}}, Usage: openaitest.Usage{PromptTokens: 100, CompletionTokens: 10}},
		openaitest.Step{Text: "2", Usage: openaitest.Usage{PromptTokens: 120, CompletionTokens: 1}},
		openaitest.Step{Text: "hello", Usage: openaitest.Usage{PromptTokens: 50, CompletionTokens: 2}},
		openaitest.Step{Text: "bye", Usage: openaitest.Usage{PromptTokens: 130, CompletionTokens: 3}},
	)
	var calls received
	f.add(calculator(&calls))
	type report struct {
		conv      string
		turn, sum Usage
	}
	var mu sync.Mutex
	var reports []report
	f.start([]string{"Calculator"}, OnUsage(func(ctx context.Context, owner, conv string, turn, sum Usage) {
		mu.Lock()
		defer mu.Unlock()
		if owner != "User" {
			t.Errorf("usage of %s's conversation %s, want User's", owner, conv)
		}
		reports = append(reports, report{conv, turn, sum})
	}))
	for _, s := range []struct{ conv, text string }{{"a", "1+1"}, {"b", "hi"}, {"a", "bye"}} {
		if _, err := f.sayIn(f.user, s.conv, s.text); err != nil {
			t.Fatal(err)
		}
	}
	want := []report{
		{"a", Usage{2, 220, 11, 231}, Usage{2, 220, 11, 231}},
		{"b", Usage{1, 50, 2, 52}, Usage{1, 50, 2, 52}},
		{"a", Usage{1, 130, 3, 133}, Usage{3, 350, 14, 364}},
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(reports, want) {
		t.Errorf("reports %+v\nwant %+v", reports, want)
	}
	if got := f.llm.Usage("User", "a"); got != want[2].sum {
		t.Errorf("Usage(a) = %+v", got)
	}
	if got := f.llm.Usage("User", "nobody"); got != (Usage{}) {
		t.Errorf("Usage(nobody) = %+v", got)
	}
}

// A model request that outlasts RequestTimeout is given up and tried
// again.
func TestRequestTimeout(t *testing.T) {
	f := newFixture(t, openaitest.Step{Hang: true}, openaitest.Step{Text: "back"})
	f.start([]string{"User"}, RequestTimeout(50*time.Millisecond))
	if got, err := f.say(f.user, "hi"); err != nil || got != "back" {
		t.Fatalf("answer %q, %v", got, err)
	}
	f.requests(2)

	g := newFixture(t, openaitest.Step{Hang: true}, openaitest.Step{Hang: true})
	g.retries = Retries(1, time.Millisecond)
	g.start([]string{"User"}, RequestTimeout(50*time.Millisecond))
	_, err := g.say(g.user, "hi")
	if err == nil || !strings.Contains(err.Error(), "did not answer in time") || !strings.Contains(err.Error(), "2 attempts") {
		t.Errorf("error %v", err)
	}
}

// The wait before a retry is the one the server asked for, in
// retry-after-ms or Retry-After (seconds or a date), unless it is over a
// minute; else the backoff, doubling.
func TestRetryAfter(t *testing.T) {
	h := func(k, v string) http.Header { return http.Header{k: {v}} }
	f := newFixture(t,
		openaitest.Step{Status: 429, Error: "slow down", Header: h("Retry-After", "3")},
		openaitest.Step{Status: 503, Error: "busy", Header: h("Retry-After-Ms", "1500")},
		openaitest.Step{Status: 429, Error: "much later", Header: h("Retry-After", "120")},
		openaitest.Step{Status: 500, Error: "no header"},
		openaitest.Step{Text: "made it"},
	)
	f.retries = Retries(4, 100*time.Millisecond)
	f.start([]string{"User"})
	var waits []time.Duration
	f.llm.sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	if got, err := f.say(f.user, "hi"); err != nil || got != "made it" {
		t.Fatalf("answer %q, %v", got, err)
	}
	want := []time.Duration{3 * time.Second, 1500 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	if !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if d, ok := parseRetryAfter(h("Retry-After", now.Add(7*time.Second).Format(http.TimeFormat)), now); !ok || d != 7*time.Second {
		t.Errorf("a date: %v, %v", d, ok)
	}
	if _, ok := parseRetryAfter(h("Retry-After", "soon"), now); ok {
		t.Error("a bad header is read")
	}
}

// Only what a user calls is exported: the hooks are not methods of Agent.
func TestAgentMethods(t *testing.T) {
	var names []string
	typ := reflect.TypeFor[*Agent]()
	for i := range typ.NumMethod() {
		names = append(names, typ.Method(i).Name)
	}
	if want := []string{"Agent", "Continue", "Usage"}; !slices.Equal(names, want) {
		t.Errorf("*Agent has methods %v, want %v", names, want)
	}
}
