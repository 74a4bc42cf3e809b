package otelagency_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// waitSpans waits until the exporter holds a span of each name, and
// returns what it holds.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, names ...string) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans := exp.GetSpans()
		have := map[string]bool{}
		for _, s := range spans {
			have[s.Name] = true
		}
		missing := ""
		for _, n := range names {
			if !have[n] {
				missing = n
			}
		}
		if missing == "" {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q among %v", missing, have)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A scripted model turn with a tool call: the model calls are client
// spans with the GenAI attributes and token usage, the tool call is an
// execute_tool span whose Request to the Calculator is its child, every
// span is in the caller's trace, the HTTP requests to the model carry the
// traceparent of their chat span, and the tokens are counted.
func TestGenAIModelTurn(t *testing.T) {
	in, tracer, exp, reader := instrumented(t)
	hooks := agency.Hooks(in)
	srv := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":1,"b":2}`}},
			Usage: openaitest.Usage{PromptTokens: 30, CompletionTokens: 7}},
		openaitest.Step{Text: "3", Usage: openaitest.Usage{PromptTokens: 40, CompletionTokens: 2}},
	)
	calc := agency.MustNewAgent("Calculator", hooks)
	agency.Handle(calc, "add", func(_ context.Context, a addArgs) (int, error) { return a.A + a.B, nil },
		agency.Describe("Adds two numbers"))
	user := agency.MustNewAgent("User", hooks)
	heard := make(chan string, 2)
	agency.Handle(user, "say", func(_ context.Context, a openai.SayArgs) (string, error) {
		heard <- a.Content
		return "heard", nil
	})
	llm, err := openai.New("Assistant", openai.APIKey("k"), openai.BaseURL(srv.URL), openai.HTTPClient(srv.Client()),
		openai.Model("gpt-test"), openai.AgentOptions(hooks))
	if err != nil {
		t.Fatal(err)
	}
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range []*agency.Agent{calc, user, llm.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	rootStart := time.Now()
	ctx, root := tracer.Start(ctx, "root")
	got, err := agency.Call[string](ctx, user, "Assistant", "say", openai.SayArgs{Content: "1 + 2?"})
	root.End()
	if err != nil || got != "3" {
		t.Fatalf("say: %q, %v", got, err)
	}
	<-heard
	// The help answers of the Assistant's survey on joining, then root,
	// request/process say, 2 chats, execute_tool, request/process add, and
	// the say back to the User (send, process).
	var spans []sdktrace.ReadOnlySpan
	for _, s := range waitSpans(t, exp, "process Assistant.say", "process User.say", "process Calculator.add", "request Assistant.say").Snapshots() {
		if !s.StartTime().Before(rootStart) {
			spans = append(spans, s)
		}
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var chats []sdktrace.ReadOnlySpan
	var tool, addReq sdktrace.ReadOnlySpan
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() && attrs(s)["agency.action"] != "help" {
			// (the help answers of the survey the Assistant started on
			// joining may come after root starts)
			t.Errorf("span %q is not in the caller's trace", s.Name())
		}
		switch s.Name() {
		case "chat gpt-test":
			chats = append(chats, s)
		case "execute_tool Calculator__add":
			tool = s
		case "request Calculator.add":
			addReq = s
		}
	}
	if len(chats) != 2 || tool == nil || addReq == nil {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("spans %q: want two chat spans, an execute_tool and a request", names)
	}
	tokens := map[string]int64{}
	for _, c := range chats {
		a := attrs(c)
		if c.SpanKind() != trace.SpanKindClient {
			t.Errorf("chat span kind %v", c.SpanKind())
		}
		for k, v := range map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
			"gen_ai.request.model": "gpt-test", "gen_ai.agent.name": "Assistant",
		} {
			if a[attribute.Key(k)] != v {
				t.Errorf("chat span: %s = %q, want %q", k, a[attribute.Key(k)], v)
			}
		}
		if a["gen_ai.conversation.id"] == "" {
			t.Error("chat span has no gen_ai.conversation.id")
		}
		tokens[a["gen_ai.usage.input_tokens"]+"/"+a["gen_ai.usage.output_tokens"]]++
		if p := byID[c.Parent().SpanID()]; p == nil || p.Name() != "process Assistant.say" {
			t.Errorf("chat span's parent is %v, not the say's handling", p)
		}
	}
	if tokens["30/7"] != 1 || tokens["40/2"] != 1 {
		t.Errorf("token usage on the chat spans: %v", tokens)
	}
	ta := attrs(tool)
	if ta["gen_ai.operation.name"] != "execute_tool" || ta["gen_ai.tool.name"] != "Calculator__add" || ta["gen_ai.tool.call.id"] == "" {
		t.Errorf("execute_tool attributes %v", ta)
	}
	if addReq.Parent().SpanID() != tool.SpanContext().SpanID() {
		t.Error("the Calculator request is not a child of the execute_tool span")
	}

	// The HTTP requests to the model carry the traceparent of their chat span.
	chatIDs := map[string]bool{}
	for _, c := range chats {
		chatIDs[c.SpanContext().SpanID().String()] = true
	}
	for i, r := range srv.Requests() {
		tp := r.Header.Get("traceparent")
		if len(tp) != 55 || tp[3:35] != root.SpanContext().TraceID().String() || !chatIDs[tp[36:52]] {
			t.Errorf("model request %d: traceparent %q, want one of a chat span of trace %s", i, tp, root.SpanContext().TraceID())
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[int64]); ok && m.Name == "gen_ai.client.token.usage" {
				for _, dp := range h.DataPoints {
					typ, _ := dp.Attributes.Value("gen_ai.token.type")
					sums[typ.AsString()] += dp.Sum
				}
			}
		}
	}
	if sums["input"] != 70 || sums["output"] != 9 {
		t.Errorf("gen_ai.client.token.usage sums %v, want input 70, output 9", sums)
	}
}
