package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// An extension steers the turns of an LLM agent from outside it. This one
// keeps a tab per conversation: it offers the model a tool of its own,
// "add_to_tab", which no agent serves; it tells the model the tab's total
// in the system prompt of every call; and once the user says "that's all",
// it answers with the bill itself, without calling the model, and marks
// the answer as the conversation's last (__meta__.final).
//
// A scripted server plays the model (actions/openai/openaitest).
func Example_extension() {
	ctx := context.Background()
	srv := openaitest.Serve(
		openaitest.Step{Text: "Noted.", ToolCalls: []openaitest.ToolCall{{Name: "add_to_tab", Arguments: `{"item":"coffee","price":3}`}}},
		openaitest.Step{Text: "One coffee, 3 euros."},
	)
	defer srv.Close()

	tabs := map[string]int{} // conversation → total; the hooks of one conversation never run at once
	bar := openai.Extension{
		Before: func(ctx context.Context, t *openai.Turn, r *openai.Request) error {
			if t.History[len(t.History)-1].Content == "that's all" {
				t.End(func(ctx context.Context, t *openai.Turn) {
					_, err := t.Agent().SendMessage(ctx, &agency.Message{To: t.Partner, Action: "say",
						Args: openai.SayArgs{Content: fmt.Sprintf("Your bill: %d euros.", tabs[t.Conversation])},
						Meta: map[string]any{"conversation": t.Conversation, "final": true}})
					if err != nil {
						log.Print(err)
					}
				})
				return nil
			}
			r.System = fmt.Sprintf("You are a waiter. The tab stands at %d euros.", tabs[t.Conversation])
			r.Tools = append(r.Tools, openai.Tool{
				Name:        "add_to_tab",
				Description: "Adds an item to the customer's tab",
				Parameters:  []byte(`{"type":"object","properties":{"item":{"type":"string"},"price":{"type":"integer"}},"required":["item","price"]}`),
			})
			return nil
		},
		Call: func(ctx context.Context, t *openai.Turn, c openai.ToolCall) (string, error) {
			var item struct {
				Item  string `json:"item"`
				Price int    `json:"price"`
			}
			if err := json.Unmarshal([]byte(c.Arguments), &item); err != nil {
				return "", fmt.Errorf("invalid_args: %v", err)
			}
			tabs[t.Conversation] += item.Price
			return fmt.Sprintf("added %s; the tab is %d euros", item.Item, tabs[t.Conversation]), nil
		},
	}

	llm, err := openai.New("Waiter", openai.BaseURL(srv.URL), openai.HTTPClient(srv.Client()), openai.Extend(bar))
	if err != nil {
		log.Fatal(err)
	}
	heard := make(chan *agency.Message, 4)
	guest := agency.MustNewAgent("Guest")
	agency.Handle(guest, "say", func(ctx context.Context, args openai.SayArgs) (string, error) {
		heard <- agency.MessageFrom(ctx)
		return "heard", nil
	})
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range []*agency.Agent{guest, llm.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			log.Fatal(err)
		}
	}

	for _, line := range []string{"A coffee, please.", "that's all"} {
		m := &agency.Message{To: "Waiter", Action: "say", Args: openai.SayArgs{Content: line},
			Meta: map[string]any{"conversation": "table-7"}}
		if _, err := guest.RequestMessage(ctx, m); err != nil {
			log.Fatal(err)
		}
		said := <-heard
		fmt.Printf("%s: %s (final: %v)\n", said.From, said.Args.(openai.SayArgs).Content, said.Meta["final"] == true)
	}
	reqs := srv.Requests()
	fmt.Println("model calls:", len(reqs))
	fmt.Println("second call's system prompt:", reqs[1].Messages[0].Content)
	fmt.Println("the tool's result:", reqs[1].Messages[len(reqs[1].Messages)-1].Content)
	// Output:
	// Waiter: One coffee, 3 euros. (final: false)
	// Waiter: Your bill: 3 euros. (final: true)
	// model calls: 2
	// second call's system prompt: You are a waiter. The tab stands at 3 euros.
	// the tool's result: added coffee; the tab is 3 euros
}
