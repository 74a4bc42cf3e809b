package openai

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	gopenai "github.com/sashabaranov/go-openai"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// turnSteps is the script of one turn: a call of Calculator.add, then the
// answer.
var turnSteps = []openaitest.Step{
	{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":1,"b":2}`}}},
	{Text: "1 + 2 = 3"},
}

// BenchmarkTurn measures what the agent costs per turn beside the model:
// a turn of "model-only" is the two requests that the agent's turn makes,
// sent straight with go-openai to the same scripted server (which answers
// at once, in this process); "fresh view" is the agent's whole turn (a
// say, a model call, a tool call to a Calculator, a model call, the answer
// said back) with no help asked; "rediscover" the same with the space
// asked for help at the start of every turn (one broadcast, answered by
// the Calculator and the User). The agent's overhead is the difference
// with model-only.
func BenchmarkTurn(b *testing.B) {
	b.Run("model-only", func(b *testing.B) {
		reqs := capturedRequests(b)
		srv := openaitest.NewServer(b)
		cfg := gopenai.DefaultConfig("k")
		cfg.BaseURL, cfg.HTTPClient = srv.URL, srv.Client()
		client := gopenai.NewClientWithConfig(cfg)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			srv.Add(turnSteps...)
			b.StartTimer()
			for _, r := range reqs {
				if _, err := client.CreateChatCompletion(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, bc := range []struct {
		name  string
		every time.Duration
	}{{"fresh view", time.Hour}, {"rediscover", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			f := benchFixture(b, bc.every)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				f.srv.Add(turnSteps...)
				b.StartTimer()
				if _, err := agency.Call[string](f.ctx, f.user, "Assistant", "say", SayArgs{Content: "What is 1 + 2?"}); err != nil {
					b.Fatal(err)
				}
				<-f.heard
			}
		})
	}
}

// benchFixture is a space with a User, a Calculator and the Assistant,
// which knows both.
func benchFixture(b *testing.B, every time.Duration) *fixture {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	f := &fixture{ctx: ctx, sp: space.NewLocal(), srv: openaitest.NewServer(b), heard: make(chan string, 1)}
	b.Cleanup(func() { _ = f.sp.Close(context.Background()) })
	f.user = agency.MustNewAgent("User")
	agency.Handle(f.user, "say", func(ctx context.Context, args SayArgs) (string, error) {
		f.heard <- args.Content
		return "heard", nil
	})
	var calls received
	for _, a := range []*agency.Agent{f.user, calculator(&calls)} {
		if err := f.sp.Add(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
	llm, err := New("Assistant", APIKey("k"), BaseURL(f.srv.URL), HTTPClient(f.srv.Client()), Rediscover(every, time.Second),
		History(4)) // the history stays the same size from turn to turn
	if err != nil {
		b.Fatal(err)
	}
	f.llm = llm
	if err := f.sp.Add(ctx, llm.Agent()); err != nil {
		b.Fatal(err)
	}
	for {
		llm.catalog.mu.Lock()
		n, changed := len(llm.catalog.agents), llm.catalog.changed
		llm.catalog.mu.Unlock()
		if n == 2 {
			break
		}
		<-changed
	}
	calls.mu.Lock()
	calls.calls = nil // unbounded otherwise
	calls.mu.Unlock()
	return f
}

// capturedRequests runs a few turns of the agent and returns the two
// requests of the last, as go-openai requests.
func capturedRequests(b *testing.B) []gopenai.ChatCompletionRequest {
	f := benchFixture(b, time.Hour)
	for range 3 {
		f.srv.Add(turnSteps...)
		if _, err := agency.Call[string](f.ctx, f.user, "Assistant", "say", SayArgs{Content: "What is 1 + 2?"}); err != nil {
			b.Fatal(err)
		}
		<-f.heard
	}
	sent := f.srv.Requests()
	var out []gopenai.ChatCompletionRequest
	for _, r := range sent[len(sent)-2:] {
		var req gopenai.ChatCompletionRequest
		if err := json.Unmarshal(r.Body, &req); err != nil {
			b.Fatal(err)
		}
		out = append(out, req)
	}
	return out
}
