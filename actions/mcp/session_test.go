package mcp_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/space"
)

// TestSessionsAreConversations: two MCP sessions over streamable HTTP
// that talk to one LLM agent through one bridge are two conversations:
// what one says never reaches the model in the other's turn.
func TestSessionsAreConversations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	model := openaitest.NewServer(t, openaitest.Step{Text: "Noted."}, openaitest.Step{Text: "I do not know any PIN."})
	llm, err := openai.New("Assistant", openai.BaseURL(model.URL), openai.HTTPClient(model.Client()))
	if err != nil {
		t.Fatal(err)
	}
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := sp.Add(ctx, llm.Agent()); err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.NewServer("Bridge", mcp.Rediscover(0, 50*time.Millisecond), mcp.OnlyAgents("Assistant"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Add(ctx, srv.Agent()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close) // after the sessions' Close, which runs first
	session := func(name string) *sdk.ClientSession {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: name}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	ann, bob := session("ann"), session("bob")
	say := func(cs *sdk.ClientSession, content string) string {
		t.Helper()
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "Assistant.say", Arguments: openai.SayArgs{Content: content}})
		if err != nil || r.IsError {
			t.Fatalf("say %q: %v %v", content, err, r)
		}
		return text(r)
	}
	say(ann, "Ann's card PIN is 4711")
	say(bob, "What is the PIN?")
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	for _, m := range reqs[1].Messages {
		if strings.Contains(m.Content, "4711") {
			t.Fatalf("Bob's turn carries Ann's: %q", m.Content)
		}
	}
	// Each session keeps its own conversation: Ann's next turn has her first.
	model.Add(openaitest.Step{Text: "It is 4711."})
	say(ann, "What is my PIN?")
	reqs = model.Requests()
	found := false
	for _, m := range reqs[2].Messages {
		found = found || strings.Contains(m.Content, "4711")
	}
	if !found {
		t.Fatalf("Ann's second turn lost her first: %+v", reqs[2].Messages)
	}
}
