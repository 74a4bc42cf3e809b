package mcp_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// TestLLMAgentCallsJoinedTools: an LLM agent (actions/openai, with a
// scripted model) sees a joined MCP server's tools like any action, with
// the server's schema, and calls one.
func TestLLMAgentCallsJoinedTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcp.NewClient(ctx, "Tools", mcp.Command([]string{"MCP_TEST_SERVER=1"}, exe))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Tools__sum", Arguments: `{"a":20,"b":22}`}}},
		openaitest.Step{Text: "It is 42."})
	llm, err := openai.New("Assistant", openai.BaseURL(srv.URL), openai.HTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 1)
	user := agency.MustNewAgent("User")
	agency.Handle(user, "say", func(_ context.Context, args openai.SayArgs) (string, error) {
		heard <- args.Content
		return "heard", nil
	})
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	for _, a := range []*agency.Agent{c.Agent(), user, llm.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := user.Request(ctx, "Assistant", "say", openai.SayArgs{Content: "What is 20 + 22?"}); err != nil {
		t.Fatal(err)
	}
	select {
	case said := <-heard:
		if said != "It is 42." {
			t.Fatalf("said %q", said)
		}
	case <-ctx.Done():
		t.Fatal("no answer")
	}
	reqs := srv.Requests()
	tool, ok := reqs[0].Tool("Tools__sum")
	if !ok || !strings.Contains(string(tool.Parameters), `"required":["a","b"]`) || !strings.Contains(tool.Description, "Adds a and b") {
		t.Fatalf("the model was offered %+v (%v)", tool, ok)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if !strings.Contains(last.Content, `"sum":42`) {
		t.Fatalf("the tool's result as the model saw it: %q", last.Content)
	}
}
