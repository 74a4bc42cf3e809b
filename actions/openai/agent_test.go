package openai

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
)

// Discovery across several agents: the model gets one tool per action the
// Assistant may call, with the args schema of each agent's own help, and
// nothing of its own.
func TestDiscovery(t *testing.T) {
	f := newFixture(t, openaitest.Step{Text: "Hello! I can add numbers and tell the weather."})
	var calls received
	var v vault
	f.add(calculator(&calls))
	f.add(weather("Weather", &calls))
	f.add(newVault(&v))
	f.start([]string{"Calculator", "Weather", "Vault", "User"}, Model("test-model"))

	got, err := f.say(f.user, "What can you do?")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Hello! I can add numbers and tell the weather."; got != want || f.heardNext() != want {
		t.Fatalf("answer %q, want %q said back and returned", got, want)
	}

	req := f.requests(1)[0]
	if req.Model != "test-model" {
		t.Errorf("model %q", req.Model)
	}
	if auth := req.Header.Get("Authorization"); auth != "Bearer test-key" {
		t.Errorf("Authorization %q", auth)
	}
	wantNames := []string{"Calculator__add", "Vault__open", "Weather__forecast"}
	if names := toolNamesOf(req); !slices.Equal(names, wantNames) {
		t.Fatalf("tools %v, want %v (no say, no Vault__wipe)", names, wantNames)
	}
	// Every schema is the one the agent's help shows the Assistant.
	for _, name := range wantNames {
		agent, action, _ := strings.Cut(name, "__")
		help := f.helpAsSeenBy(f.llm.Agent(), agent)[action]
		tool, _ := req.Tool(name)
		if !sameJSON(tool.Parameters, help.Args) {
			t.Errorf("%s parameters\n %s\nwant the help args\n %s", name, tool.Parameters, help.Args)
		}
		if !strings.Contains(tool.Description, `"`+agent+`"`) || !strings.Contains(tool.Description, help.Description) {
			t.Errorf("%s description %q names neither the agent nor %q", name, tool.Description, help.Description)
		}
	}
	if tool, _ := req.Tool("Vault__open"); !strings.Contains(tool.Description, "approval") {
		t.Errorf("requested access is not mentioned: %q", tool.Description)
	}
	// The User may see wipe; the Assistant may not, so it is no tool.
	if _, ok := f.helpAsSeenBy(f.user, "Vault")["wipe"]; !ok {
		t.Error("the User's help lacks Vault.wipe")
	}

	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[1].Role != "user" || req.Messages[1].Content != "What can you do?" {
		t.Fatalf("messages %+v", req.Messages)
	}
	if !strings.Contains(req.Messages[0].Content, `"User"`) || !strings.Contains(req.Messages[0].Content, "Assistant") {
		t.Errorf("the system prompt names neither the partner nor the agent: %q", req.Messages[0].Content)
	}
}

// A valid tool call: the Calculator gets the arguments and the model's text
// as thoughts; the model gets the result after its call, in order; the
// conversation carries over to the next turn.
func TestToolCall(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Text: "I will add them.", ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a": 1, "b": 2}`}}},
		openaitest.Step{Text: "1 + 2 = 3"},
		openaitest.Step{Text: "You are welcome."},
	)
	var calls received
	f.add(calculator(&calls))
	f.start([]string{"Calculator", "User"})

	got, err := f.say(f.user, "What is 1 + 2?")
	if err != nil || got != "1 + 2 = 3" {
		t.Fatalf("answer %q, %v", got, err)
	}
	if h := f.heardNext(); h != got {
		t.Errorf("the user heard %q", h)
	}

	c := calls.get()
	if len(c) != 1 {
		t.Fatalf("the Calculator got %d calls", len(c))
	}
	if c[0].From != "Assistant" || c[0].Meta["thoughts"] != "I will add them." || !sameJSON(c[0].Args.(json.RawMessage), []byte(`{"a":1,"b":2}`)) {
		t.Errorf("the Calculator got from %q, meta %v, args %s", c[0].From, c[0].Meta, c[0].Args)
	}

	reqs := f.requests(2)
	m := reqs[1].Messages
	if len(m) != 4 {
		t.Fatalf("second request has %d messages: %+v", len(m), m)
	}
	if m[1].Role != "user" || m[2].Role != "assistant" || m[2].Content != "I will add them." || len(m[2].ToolCalls) != 1 ||
		m[2].ToolCalls[0].Name != "Calculator__add" {
		t.Fatalf("messages %+v", m)
	}
	if m[3].Role != "tool" || m[3].ToolCallID != m[2].ToolCalls[0].ID || m[3].Content != "3" {
		t.Fatalf("tool result %+v", m[3])
	}

	// The next turn with the same partner starts from this one.
	if _, err := f.say(f.user, "Thanks"); err != nil {
		t.Fatal(err)
	}
	f.heardNext()
	next := f.requests(3)[2].Messages
	roles := []string{}
	for _, msg := range next {
		roles = append(roles, msg.Role)
	}
	if want := []string{"system", "user", "assistant", "tool", "assistant", "user"}; !slices.Equal(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
}

// Invalid arguments: the model reads the invalid_args text the Calculator
// gives, corrects its call, and the handler runs only for the corrected one.
func TestInvalidArgsCorrected(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a": 1}`}}},
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a": 1, "b": 2}`}}},
		openaitest.Step{Text: "3"},
	)
	var calls received
	f.add(calculator(&calls))
	f.start([]string{"Calculator"})

	if got, err := f.say(f.user, "1 + ?"); err != nil || got != "3" {
		t.Fatalf("answer %q, %v", got, err)
	}
	_, direct := f.llm.Agent().Request(f.ctx, "Calculator", "add", json.RawMessage(`{"a": 1}`))
	if !errors.Is(direct, agency.ErrInvalidArgs) {
		t.Fatalf("a direct call gives %v", direct)
	}
	reqs := f.requests(3)
	first := reqs[1].Messages[len(reqs[1].Messages)-1]
	if want := "error: " + direct.Error(); first.Role != "tool" || first.Content != want {
		t.Errorf("first tool result %q, want %q", first.Content, want)
	}
	t.Logf("the model read: %s", first.Content)
	if !strings.HasPrefix(first.Content, "error: invalid_args: ") || !strings.Contains(first.Content, "b") {
		t.Errorf("the error does not name the missing field: %q", first.Content)
	}
	if second := reqs[2].Messages[len(reqs[2].Messages)-1]; second.Content != "3" {
		t.Errorf("second tool result %q", second.Content)
	}
	if n := len(calls.get()); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
}

// Parallel tool calls: two calls of one reply run at once. Each handler
// waits until both have started, so a sequential run would fail the first
// call.
func TestParallelToolCalls(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Text: "Asking both.", ToolCalls: []openaitest.ToolCall{
			{Name: "Left__wait", Arguments: `{}`},
			{Name: "Right__wait", Arguments: `{}`},
		}},
		openaitest.Step{Text: "Both answered."},
	)
	var (
		mu      sync.Mutex
		started int
		both    = make(chan struct{})
		thought = map[string]any{}
	)
	for _, id := range []string{"Left", "Right"} {
		a := agency.MustNewAgent(id)
		agency.Handle(a, "wait", func(ctx context.Context, _ NoArgs) (string, error) {
			mu.Lock()
			thought[id] = agency.MessageFrom(ctx).Meta["thoughts"]
			if started++; started == 2 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
				return strings.ToLower(id), nil
			case <-time.After(safety / 2):
				return "", errors.New("the other call never started: the calls ran one after the other")
			}
		}, agency.Describe("Waits for the other side"))
		f.add(a)
	}
	f.start([]string{"Left", "Right"})

	if got, err := f.say(f.user, "Ask both"); err != nil || got != "Both answered." {
		t.Fatalf("answer %q, %v", got, err)
	}
	m := f.requests(2)[1].Messages
	results := m[len(m)-2:]
	calls := m[len(m)-3].ToolCalls
	for i, want := range []string{`"left"`, `"right"`} {
		if results[i].Role != "tool" || results[i].ToolCallID != calls[i].ID || results[i].Content != want {
			t.Errorf("result %d: %+v, want %s for %s", i, results[i], want, calls[i].ID)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if thought["Left"] != "Asking both." || thought["Right"] != "Asking both." {
		t.Errorf("thoughts %v", thought)
	}
}

// A denied action: the permission_denied text reaches the model; the action
// denied outright is not offered at all.
func TestDeniedAction(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Vault__open", Arguments: `{}`}}},
		openaitest.Step{Text: "I may not open the vault."},
	)
	var v vault
	f.add(newVault(&v))
	f.start([]string{"Vault"})

	if got, err := f.say(f.user, "Open the vault"); err != nil || got != "I may not open the vault." {
		t.Fatalf("answer %q, %v", got, err)
	}
	reqs := f.requests(2)
	if slices.Contains(toolNamesOf(reqs[0]), "Vault__wipe") {
		t.Error("Vault__wipe, denied to the Assistant, is offered")
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if want := `error: permission_denied: "Vault.open" not permitted for "Assistant"`; last.Content != want {
		t.Errorf("tool result %q, want %q", last.Content, want)
	}
	if asked := v.asked.get(); len(asked) != 1 || asked[0].From != "Assistant" {
		t.Errorf("permission asked %d times", len(asked))
	}
}

// An agent that leaves: its tool call gets ErrNoRecipient, it is dropped
// from the catalog, and the next model call no longer offers it.
func TestAgentLeaves(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Weather__forecast", Arguments: `{"city": "Paris"}`}}},
		openaitest.Step{Text: "The weather service is gone."},
	)
	var calls received
	f.add(weather("Weather", &calls))
	f.add(calculator(&calls))
	f.start([]string{"Weather", "Calculator"})
	if err := f.sp.Remove(f.ctx, "Weather"); err != nil {
		t.Fatal(err)
	}

	if _, err := f.say(f.user, "Weather in Paris?"); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests(2)
	if !slices.Contains(toolNamesOf(reqs[0]), "Weather__forecast") {
		t.Fatalf("first tools %v", toolNamesOf(reqs[0]))
	}
	if names := toolNamesOf(reqs[1]); slices.Contains(names, "Weather__forecast") || !slices.Contains(names, "Calculator__add") {
		t.Errorf("second tools %v: want Weather's gone and Calculator's kept", names)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if !strings.HasPrefix(last.Content, "error: no_recipient: ") || !strings.Contains(last.Content, `"Weather"`) {
		t.Errorf("tool result %q", last.Content)
	}
	if slices.Contains(f.catalogAgents(), "Weather") {
		t.Error("Weather is still in the catalog")
	}
	if len(calls.get()) != 0 {
		t.Error("a handler ran")
	}
}

// A tool that fails with not_found makes the Assistant ask that agent for
// help again: an agent replaced by one with other actions is seen anew
// within the same turn.
func TestNotFoundRefreshes(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Shop__buy", Arguments: `{}`}}},
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Shop__order", Arguments: `{}`}}},
		openaitest.Step{Text: "Ordered."},
	)
	shop := agency.MustNewAgent("Shop")
	agency.Handle(shop, "buy", func(context.Context, NoArgs) (string, error) { return "bought", nil })
	f.add(shop)
	f.start([]string{"Shop"})
	if err := f.sp.Remove(f.ctx, "Shop"); err != nil {
		t.Fatal(err)
	}
	shop2 := agency.MustNewAgent("Shop")
	agency.Handle(shop2, "order", func(context.Context, NoArgs) (string, error) { return "ordered", nil })
	f.add(shop2)

	if got, err := f.say(f.user, "Buy it"); err != nil || got != "Ordered." {
		t.Fatalf("answer %q, %v", got, err)
	}
	reqs := f.requests(3)
	if names := toolNamesOf(reqs[1]); !slices.Contains(names, "Shop__order") || slices.Contains(names, "Shop__buy") {
		t.Errorf("tools after not_found: %v", names)
	}
	m := reqs[1].Messages
	if last := m[len(m)-1].Content; !strings.HasPrefix(last, "error: not_found: ") {
		t.Errorf("tool result %q", last)
	}
	if m := reqs[2].Messages; m[len(m)-1].Content != `"ordered"` {
		t.Errorf("tool result %q", m[len(m)-1].Content)
	}
}

// An agent the catalog does not know that talks to the Assistant is asked
// for help; its actions are tools from the model call after its answer
// came on (the answer is read while the turn runs, so the first call may
// or may not have them). Conversations are kept per partner.
func TestUnknownSender(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Text: "Hi Late."},
		openaitest.Step{Text: "Hi again."},
	)
	f.start([]string{"User"})
	late := agency.MustNewAgent("Late")
	agency.Handle(late, "ping", func(context.Context, NoArgs) (string, error) { return "pong", nil }, agency.Describe("Pings"))
	f.add(late)

	if _, err := f.say(late, "Hello"); err != nil {
		t.Fatal(err)
	}
	f.waitCatalog(func(agents map[string][]toolSpec) bool { _, ok := agents["Late"]; return ok })
	if _, err := f.say(late, "Hello again"); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests(2)
	if !slices.Contains(toolNamesOf(reqs[1]), "Late__ping") {
		t.Errorf("tools %v then %v", toolNamesOf(reqs[0]), toolNamesOf(reqs[1]))
	}
	if n := len(reqs[1].Messages); n != 4 { // system, user, assistant, user
		t.Errorf("second turn sends %d messages: %+v", n, reqs[1].Messages)
	}
	if !strings.Contains(reqs[1].Messages[0].Content, `"Late"`) {
		t.Errorf("system prompt %q", reqs[1].Messages[0].Content)
	}
	if h, _ := f.llm.memory.Load(f.ctx, ConversationKey("User", "User")); len(h) != 0 {
		t.Errorf("a conversation with the User appeared: %+v", h)
	}
}

// HTTP 429 and 5xx are retried with backoff; the same request is sent each
// time.
func TestRetryThenSuccess(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Status: 429, Error: "Rate limit reached"},
		openaitest.Step{Status: 503, Error: "overloaded"},
		openaitest.Step{Text: "made it"},
	)
	f.start([]string{"User"})
	if got, err := f.say(f.user, "hi"); err != nil || got != "made it" {
		t.Fatalf("answer %q, %v", got, err)
	}
	reqs := f.requests(3)
	if !sameJSON(reqs[0].Body, reqs[1].Body) || !sameJSON(reqs[0].Body, reqs[2].Body) {
		t.Error("the retries sent other requests")
	}
	if f.heardNext() != "made it" {
		t.Error("the user heard another answer")
	}
}

// Retries run out: the user hears why.
func TestRetriesExhausted(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Status: 500, Error: "boom"},
		openaitest.Step{Status: 500, Error: "boom"},
	)
	f.retries = Retries(1, time.Millisecond)
	f.start([]string{"User"})
	_, err := f.say(f.user, "hi")
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "gave up after 2 attempts") {
		t.Fatalf("error %v", err)
	}
	if h := f.heardNext(); !strings.HasPrefix(h, "Sorry, ") || !strings.Contains(h, "boom") {
		t.Errorf("the user heard %q", h)
	}
	f.requests(2)
}

// HTTP 401: not retried; the user gets a say with the error, the caller an
// action_failed, and the agent keeps serving.
func TestUnauthorized(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Status: 401, Error: "Incorrect API key provided"},
		openaitest.Step{Text: "back"},
	)
	f.start([]string{"User"})
	_, err := f.say(f.user, "hi")
	var ae *agency.ActionError
	if !errors.As(err, &ae) || ae.Type != agency.TypeActionFailed || !strings.HasPrefix(ae.Text, "Sorry, ") {
		t.Fatalf("error %v", err)
	}
	h := f.heardNext()
	t.Logf("the user heard: %s", h)
	if h != ae.Text || !strings.Contains(h, "401") || !strings.Contains(h, "Incorrect API key provided") || !strings.Contains(h, "OPENAI_API_KEY") {
		t.Errorf("the user heard %q; the error is %q", h, ae.Text)
	}
	f.requests(1)

	if got, err := f.say(f.user, "again"); err != nil || got != "back" {
		t.Fatalf("after a 401: %q, %v", got, err)
	}
	// The failed turn's user message is kept: the model sees both.
	if m := f.requests(2)[1].Messages; len(m) != 3 || m[1].Content != "hi" || m[2].Content != "again" {
		t.Errorf("messages after the 401: %+v", m)
	}
}

// A turn that reaches MaxSteps says so.
func TestMaxSteps(t *testing.T) {
	call := openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a": 1, "b": 1}`}}}
	f := newFixture(t, call, call)
	var calls received
	f.add(calculator(&calls))
	f.start([]string{"Calculator"}, MaxSteps(2))
	got, err := f.say(f.user, "Add forever")
	if err != nil || !strings.Contains(got, "limit of 2 steps") {
		t.Fatalf("answer %q, %v", got, err)
	}
	f.requests(2)
	if n := len(calls.get()); n != 2 {
		t.Errorf("%d calls", n)
	}
}

// Tool calls the model gets wrong never reach an agent: an unknown tool,
// arguments that are not an object.
func TestBadToolCalls(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{
			{Name: "Nobody__nothing", Arguments: `{}`},
			{Name: "Calculator__add", Arguments: `[1, 2]`},
		}},
		openaitest.Step{Text: "ok"},
	)
	var calls received
	f.add(calculator(&calls))
	f.start([]string{"Calculator"})
	if _, err := f.say(f.user, "?"); err != nil {
		t.Fatal(err)
	}
	m := f.requests(2)[1].Messages
	if c := m[len(m)-2].Content; !strings.HasPrefix(c, "error: not_found: ") {
		t.Errorf("unknown tool: %q", c)
	}
	if c := m[len(m)-1].Content; !strings.HasPrefix(c, "error: invalid_args: ") {
		t.Errorf("array arguments: %q", c)
	}
	if len(calls.get()) != 0 {
		t.Error("the Calculator ran")
	}
}

// A tool call that outlasts CallTimeout comes back to the model as a
// timeout, and the turn goes on.
func TestToolCallTimeout(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Slow__work", Arguments: `{}`}}},
		openaitest.Step{Text: "It is too slow."},
	)
	release := make(chan struct{})
	defer close(release) // lets the handler end before the space closes
	slow := agency.MustNewAgent("Slow")
	agency.Handle(slow, "work", func(context.Context, NoArgs) (string, error) {
		<-release
		return "done", nil
	})
	f.add(slow)
	f.callTimeout = CallTimeout(20 * time.Millisecond)
	f.start([]string{"Slow"})
	if got, err := f.say(f.user, "Work"); err != nil || got != "It is too slow." {
		t.Fatalf("answer %q, %v", got, err)
	}
	m := f.requests(2)[1].Messages
	if c := m[len(m)-1].Content; !strings.HasPrefix(c, "error: timeout: ") || !strings.Contains(c, "Slow") {
		t.Errorf("tool result %q", c)
	}
}

// TestLLMCallsLLM has the Assistant call another LLM agent's say as a tool.
// The other answers only through the tool result, not with a say back that
// would start a turn nobody reads: the Assistant's next model call is the
// user's next message.
func TestLLMCallsLLM(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Helper__say", Arguments: `{"content": "hi"}`}}},
		openaitest.Step{Text: "Helper says hello"},
		openaitest.Step{Text: "second answer"},
	)
	other := openaitest.NewServer(t, openaitest.Step{Text: "hello from Helper"})
	helper, err := New("Helper", APIKey("test-key"), BaseURL(other.URL), HTTPClient(other.Client()), Retries(0, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	f.add(helper.Agent())
	f.start([]string{"User", "Helper"}, Allow("Helper", "say"))

	if got, err := f.say(f.user, "ask Helper"); err != nil || got != "Helper says hello" {
		t.Fatalf("answer %q, %v", got, err)
	}
	f.heardNext()
	reqs := f.requests(2)
	if m := reqs[1].Messages; m[len(m)-1].Role != "tool" || m[len(m)-1].Content != `"hello from Helper"` {
		t.Fatalf("the tool result: %+v", m[len(m)-1])
	}
	// A say back from Helper would be queued before this message and use up
	// the next step.
	if got, err := f.say(f.user, "and now?"); err != nil || got != "second answer" {
		t.Fatalf("next answer %q, %v", got, err)
	}
	m := f.requests(3)[2].Messages
	if last := m[len(m)-1]; last.Role != "user" || last.Content != "and now?" {
		t.Errorf("the third model call was about %+v", last)
	}
	if n := len(other.Requests()); n != 1 {
		t.Errorf("Helper's model got %d requests, want 1", n)
	}
}

// TestUnknownSenderAfterAGhost: a help that went to an agent already gone
// must not keep a later agent with the same id out of the catalog.
func TestUnknownSenderAfterAGhost(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Block__wait", Arguments: `{}`}}},
		openaitest.Step{Text: "released"},
		openaitest.Step{Text: "hi ghost"},
		openaitest.Step{Text: "synced"},
		openaitest.Step{Text: "hi again"},
	)
	started, release := make(chan struct{}), make(chan struct{})
	block := agency.MustNewAgent("Block")
	agency.Handle(block, "wait", func(ctx context.Context, _ NoArgs) (string, error) {
		close(started)
		<-release
		return "ok", nil
	})
	f.add(block)
	f.start([]string{"User", "Block"})

	blocked := make(chan error, 1)
	go func() { _, err := f.say(f.user, "wait for Block"); blocked <- err }()
	<-started
	// The ghost's say waits behind the User's turn, in the same
	// conversation; by the time the Assistant asks it for help, it is gone.
	ghost := agency.MustNewAgent("Ghost")
	f.add(ghost)
	m := &agency.Message{To: "Assistant", Action: "say", Args: SayArgs{Content: "hello"}, Meta: map[string]any{"conversation": "User"}}
	if _, err := ghost.SendMessage(f.ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := f.sp.Remove(f.ctx, "Ghost"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	f.heardNext()
	if _, err := f.say(f.user, "sync"); err != nil { // served after the ghost's, which waited longer
		t.Fatal(err)
	}
	f.heardNext()

	again := agency.MustNewAgent("Ghost")
	agency.Handle(again, "ping", func(context.Context, NoArgs) (string, error) { return "pong", nil })
	f.add(again)
	if _, err := agency.Call[string](f.ctx, again, "Assistant", "say", SayArgs{Content: "hello again"}); err != nil {
		t.Fatal(err)
	}
	f.waitCatalog(func(agents map[string][]toolSpec) bool {
		return len(agents["Ghost"]) == 1 && agents["Ghost"][0].Action == "ping"
	})
}
