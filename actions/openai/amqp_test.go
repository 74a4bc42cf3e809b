package openai

import (
	"context"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// The LLM agent uses only agency's public API, so it works unchanged on a
// space whose messages cross RabbitMQ: it discovers the Calculator by a
// broadcast help, calls add as a tool, and says the answer back.
func TestOnAMQP(t *testing.T) {
	sp := amqptest.NewSpace(t, amqpspace.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	calcID, userID, asstID := amqptest.Name("Calculator"), amqptest.Name("User"), amqptest.Name("Assistant")
	srv := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: calcID + "__add", Arguments: `{"a": 2, "b": 3}`}}},
		openaitest.Step{Text: "2 + 3 = 5"},
	)

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
	llm, err := New(asstID, APIKey("test-key"), BaseURL(srv.URL), HTTPClient(srv.Client()), Retries(3, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{calc, user, llm.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// The answers to the Assistant's broadcast help cross the broker.
	for {
		llm.catalog.mu.Lock()
		_, known := llm.catalog.agents[calcID]
		changed := llm.catalog.changed
		llm.catalog.mu.Unlock()
		if known {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the Assistant never learned the Calculator's actions")
		}
	}

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
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d times, want 2", len(reqs))
	}
	m := reqs[1].Messages
	if last := m[len(m)-1]; last.Role != "tool" || last.Content != "5" {
		t.Errorf("the tool result sent to the model is %+v, want 5", last)
	}
}
