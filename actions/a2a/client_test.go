package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/a2a"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// joined adds the remote agent at url to a new space with a user agent.
func joined(t *testing.T, cfg a2a.RemoteConfig, more ...*agency.Agent) (*a2a.Remote, *agency.Agent) {
	t.Helper()
	ctx := testCtx(t)
	r, err := a2a.NewRemote(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sp := space.NewLocal()
	user := agency.MustNewAgent("User")
	for _, a := range append([]*agency.Agent{r.Agent(), user}, more...) {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sp.Close(ctx)
		_ = r.Close()
	})
	return r, user
}

// A Calculator served over A2A, joined to another space, is called like
// any agent: its skills are actions with their schemas, errors keep their
// type and text.
func TestRemoteAgency(t *testing.T) {
	w := newWorld(t, "", true)
	r, user := joined(t, a2a.RemoteConfig{URL: w.http.URL + "/agents/Calculator/", ID: "RemoteCalc", Token: "alice-token", PollInterval: 20 * time.Millisecond})
	ctx := testCtx(t)

	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "RemoteCalc", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := help["add"]; h.Description != "Adds two numbers" || !strings.Contains(string(h.Args), `"first addend"`) {
		t.Fatalf("help of add: %+v", h)
	}
	if _, ok := help["secret"]; !ok {
		t.Fatalf("alice's token shows secret: %v", help)
	}
	if _, ok := help["say"]; ok {
		t.Fatal("a say the Calculator does not have")
	}
	sum, err := agency.Call[float64](ctx, user, "RemoteCalc", "add", map[string]any{"a": 1, "b": 2})
	if err != nil || sum != 3 {
		t.Fatalf("add = %v, %v", sum, err)
	}
	_, err = agency.Call[float64](ctx, user, "RemoteCalc", "divide", map[string]any{"a": 1, "b": 0})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "divisor b other than 0") {
		t.Fatalf("divide by 0: %v", err)
	}
	_, err = agency.Call[float64](ctx, user, "RemoteCalc", "add", map[string]any{"a": 1})
	// Checked here, with the card's schema, before the call.
	if !errors.Is(err, agency.ErrInvalidArgs) || !strings.Contains(err.Error(), `missing properties: ["b"]`) {
		t.Fatalf("add without b: %v", err)
	}
	// So is a value of the wrong type.
	_, err = agency.Call[float64](ctx, user, "RemoteCalc", "add", map[string]any{"a": 1, "b": "two"})
	if !errors.Is(err, agency.ErrInvalidArgs) {
		t.Fatalf("add with a string: %v", err)
	}
	// A call that waits for approval waits for it through the remote.
	done := make(chan error, 1)
	go func() {
		_, err := agency.Call[string](ctx, user, "RemoteCalc", "reset", nil)
		done <- err
	}()
	if who := <-w.ap.asked; who != "alice" {
		t.Fatalf("asked for %q", who)
	}
	w.ap.decide <- true
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.Card().Name != "Calculator" {
		t.Fatalf("card %q", r.Card().Name)
	}
}

// An LLM agent calls the remote agent's skills as tools.
func TestRemoteForLLM(t *testing.T) {
	w := newWorld(t, "", false)
	model := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "RemoteCalc__add", Arguments: `{"a":20,"b":22}`}}},
		openaitest.Step{Text: "42"},
	)
	llm, err := openai.New("Assistant", openai.BaseURL(model.URL), openai.APIKey("test"), openai.HTTPClient(model.Client()))
	if err != nil {
		t.Fatal(err)
	}
	_, user := joined(t, a2a.RemoteConfig{URL: w.http.URL + "/.well-known/agent-card.json", ID: "RemoteCalc"}, llm.Agent())
	answer, err := agency.Call[string](testCtx(t), user, "Assistant", "say", openai.SayArgs{Content: "20+22?"})
	if err != nil || answer != "42" {
		t.Fatalf("answer %q, %v", answer, err)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(dump(reqs[1]), "42") {
		t.Fatalf("the model was not given the tool's result: %s", dump(reqs))
	}
}

// A remote that does not answer, or has gone, is an error, never a hang.
func TestRemoteGone(t *testing.T) {
	w := newWorld(t, "", false)
	stuck := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "agent-card.json") {
			w.srv.ServeHTTP(rw, req) // the real card, pointing at the real server…
			return
		}
		select { // …but a proxy that never answers a call
		case <-req.Context().Done():
		case <-stuck:
		}
	}))
	defer hang.Close()
	defer close(stuck)

	_, user := joined(t, a2a.RemoteConfig{URL: w.http.URL + "/agents/Calculator/", ID: "RemoteCalc", Timeout: 300 * time.Millisecond})
	w.stop() // the remote goes away
	start := time.Now()
	_, err := agency.Call[float64](testCtx(t), user, "RemoteCalc", "add", map[string]any{"a": 1, "b": 2})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), a2a.ErrRemote.Error()) {
		t.Fatalf("a remote that has gone: %v", err)
	}
	t.Logf("gone: %v after %v", err, time.Since(start))

	// A remote that takes the call and never answers.
	w2 := newWorld(t, "", false)
	r, err := a2a.NewRemote(testCtx(t), a2a.RemoteConfig{URL: w2.http.URL + "/agents/Calculator/", ID: "Slow", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	card := r.Card()
	card.SupportedInterfaces[0].URL = hang.URL + "/agents/Calculator/"
	b, _ := json.Marshal(card)
	cardSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write(b) }))
	defer cardSrv.Close()
	_, user2 := joined(t, a2a.RemoteConfig{URL: cardSrv.URL + "/.well-known/agent-card.json", ID: "Slow", Timeout: 300 * time.Millisecond})
	start = time.Now()
	_, err = agency.Call[float64](testCtx(t), user2, "Slow", "add", map[string]any{"a": 1, "b": 2})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("a remote that never answers: %v", err)
	}
	t.Logf("stuck: %v after %v", err, time.Since(start))

	if _, err := a2a.NewRemote(testCtx(t), a2a.RemoteConfig{URL: "http://127.0.0.1:1/"}); !errors.Is(err, a2a.ErrRemote) {
		t.Fatalf("no card: %v", err)
	}
}

// The remote context a say continues is its sender's conversation for
// one owner: an agent that serves two owners who name one conversation
// (__meta__.conversation_owner, as an LLM agent's tool calls carry it)
// reaches two remote contexts, so the remote never shows one owner what
// it was told for the other.
func TestRemoteKeepsOwnersApart(t *testing.T) {
	teller := agency.MustNewAgent("Teller")
	agency.Handle(teller, "say", func(ctx context.Context, args openai.SayArgs) (string, error) {
		c, _ := agency.MessageFrom(ctx).Meta["conversation"].(string)
		return c, nil
	}, agency.Describe("Tells the conversation it was said in"))
	w := newWorld(t, "", false, teller)
	_, asst := joined(t, a2a.RemoteConfig{URL: w.http.URL + "/agents/Teller/", ID: "RemoteTeller", PollInterval: 20 * time.Millisecond})
	ctx := testCtx(t)
	say := func(owner string) string {
		t.Helper()
		r, err := asst.RequestMessage(ctx, &agency.Message{To: "RemoteTeller", Action: "say", Args: openai.SayArgs{Content: "hi"},
			Meta: map[string]any{"conversation": "Ann", openai.MetaConversationOwner: owner, "tool_call_id": "t"}})
		if err != nil {
			t.Fatal(err)
		}
		v, err := agency.Value[string](r)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ann, bob := say("Ann"), say("Bob")
	if ann == bob {
		t.Errorf("Ann's and Bob's says reached one remote context, %q", ann)
	}
	if again := say("Ann"); again != ann {
		t.Errorf("Ann's second say reached %q, her first %q", again, ann)
	}
}
