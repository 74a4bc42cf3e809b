package openai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

// echo is a model that answers each request with the user messages it
// was sent, joined by " | ": what a turn saw of its conversation.
var echo = openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
	var seen []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			seen = append(seen, m.Content)
		}
	}
	return openaitest.Step{Text: strings.Join(seen, " | "), Usage: openaitest.Usage{PromptTokens: 1, CompletionTokens: 1}}
}}

// borrowing runs the rule that a conversation belongs to the agent that
// started it: Bob names Ann's conversation (her id, the default one, and
// an explicit one of hers) and gets a conversation of his own; neither
// he nor the model for him sees Ann's turns, and Ann's conversation goes
// on as if Bob had never spoken.
func borrowing(t *testing.T, ctx context.Context, add func(*agency.Agent), ids func(string) string, srv *openaitest.Server) {
	annID, bobID, asstID := ids("Ann"), ids("Bob"), ids("Assistant")
	ann, bob := newListener(annID), newListener(bobID)
	llm, err := New(asstID, APIKey("test-key"), BaseURL(srv.URL), HTTPClient(srv.Client()), Retries(3, time.Millisecond),
		Rediscover(0, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{ann.Agent, bob.Agent, llm.Agent()} {
		add(a)
	}
	say := func(from *listener, conv, text string) string {
		t.Helper()
		m := &agency.Message{To: asstID, Action: "say", Args: SayArgs{Content: text}}
		if conv != "" {
			m.Meta = map[string]any{"conversation": conv}
		}
		r, err := from.RequestMessage(ctx, m)
		if err != nil {
			t.Fatalf("%s: %v", from.ID(), err)
		}
		v, err := agency.Value[string](r)
		if err != nil {
			t.Fatal(err)
		}
		from.next(t, ctx) // the say back
		return v
	}
	if got := say(ann, "", "Ann's secret"); got != "Ann's secret" {
		t.Fatalf("Ann's first turn saw %q", got)
	}
	if got := say(ann, "trip", "Ann's trip"); got != "Ann's trip" {
		t.Fatalf("Ann's trip saw %q", got)
	}
	for _, conv := range []string{annID, "trip"} {
		if got := say(bob, conv, "Bob in "+conv); got != "Bob in "+conv {
			t.Errorf("Bob naming conversation %q saw %q, want only his own turn", conv, got)
		}
	}
	if got := say(bob, "trip", "Bob again"); got != "Bob in trip | Bob again" {
		t.Errorf("Bob's own conversation trip: %q", got)
	}
	if got := say(ann, "", "Ann 2"); got != "Ann's secret | Ann 2" {
		t.Errorf("Ann's conversation after Bob named it: %q", got)
	}
	if got := say(ann, "trip", "Ann's trip 2"); got != "Ann's trip | Ann's trip 2" {
		t.Errorf("Ann's trip after Bob named it: %q", got)
	}
	if u := llm.Usage(annID, "trip"); u.Calls != 2 {
		t.Errorf("usage of Ann's trip %+v, want 2 calls", u)
	}
	if u := llm.Usage(bobID, "trip"); u.Calls != 2 {
		t.Errorf("usage of Bob's trip %+v, want 2 calls", u)
	}
	for _, r := range srv.Requests() {
		if last := lastUser(r); strings.HasPrefix(last, "Bob") {
			for _, m := range r.Messages {
				if strings.HasPrefix(m.Content, "Ann") {
					t.Errorf("the model request for Bob's %q carries Ann's %q", last, m.Content)
				}
			}
		}
	}
}

func TestConversationBelongsToItsStarter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	srv := openaitest.NewServer(t, repeat(echo, 7)...)
	borrowing(t, ctx, func(a *agency.Agent) {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}, func(s string) string { return s }, srv)
}

func TestConversationBelongsToItsStarterOnAMQP(t *testing.T) {
	sp := amqptest.NewSpace(t, amqpspace.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	srv := openaitest.NewServer(t, repeat(echo, 7)...)
	borrowing(t, ctx, func(a *agency.Agent) {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}, amqptest.Name, srv)
}

func repeat(s openaitest.Step, n int) []openaitest.Step {
	out := make([]openaitest.Step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// Only an agent named with Relays may speak for another: its say with
// __meta__.on_behalf_of continues that one's conversation; the same say
// from any other agent is refused with permission_denied.
func TestTrustedRelay(t *testing.T) {
	f := newFixture(t, repeat(echo, 2)...)
	ann, bob, web := newListener("Ann"), newListener("Bob"), newListener("Web")
	for _, a := range []*agency.Agent{ann.Agent, bob.Agent, web.Agent} {
		f.add(a)
	}
	f.start(nil, Relays("Web"))
	if _, err := f.sayIn(ann.Agent, "trip", "Ann's trip"); err != nil {
		t.Fatal(err)
	}
	ann.next(t, f.ctx)
	behalf := func(from *listener) (string, error) {
		m := &agency.Message{To: "Assistant", Action: "say", Args: SayArgs{Content: "via " + from.ID()},
			Meta: map[string]any{"conversation": "trip", MetaOnBehalfOf: "Ann"}}
		r, err := from.RequestMessage(f.ctx, m)
		if err != nil {
			return "", err
		}
		return agency.Value[string](r)
	}
	if _, err := behalf(bob); !errors.Is(err, agency.ErrPermissionDenied) {
		t.Errorf("Bob speaking for Ann: %v, want permission_denied", err)
	}
	got, err := behalf(web)
	if err != nil || got != "Ann's trip | via Web" {
		t.Errorf("the relay speaking for Ann: %q, %v", got, err)
	}
	if m := web.next(t, f.ctx); m.Meta["conversation"] != "trip" {
		t.Errorf("the answer to the relay: %v", m.Meta)
	}
	if _, err := New("X", APIKey("k"), Relays()); !errors.Is(err, agency.ErrInvalidOption) {
		t.Errorf("Relays(): %v", err)
	}
}

// A conversation stays its owner's on the second hop: when Bob names
// Ann's conversation to the Assistant, which asks an Expert (another LLM
// agent) as a tool, the Expert's model never sees what the Assistant told
// it in Ann's turn, and Ann's conversation with the Expert goes on as if
// Bob had never spoken.
func TestConversationBelongsToItsStarterOnTheSecondHop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	// The Assistant hands each user line to the Expert and answers with
	// what the Expert said.
	relay := openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return openaitest.Step{Text: last.Content}
		}
		args, _ := json.Marshal(SayArgs{Content: last.Content})
		return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Expert__say", Arguments: string(args)}}}
	}}
	asstSrv, expertSrv := openaitest.NewServer(t, repeat(relay, 6)...), openaitest.NewServer(t, repeat(echo, 3)...)
	expert, err := New("Expert", APIKey("k"), BaseURL(expertSrv.URL), HTTPClient(expertSrv.Client()), Retries(3, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	asst, err := New("Assistant", APIKey("k"), BaseURL(asstSrv.URL), HTTPClient(asstSrv.Client()), Retries(3, time.Millisecond),
		CallTimeout(safety), Allow("Expert", "say"))
	if err != nil {
		t.Fatal(err)
	}
	ann, bob := newListener("Ann"), newListener("Bob")
	for _, a := range []*agency.Agent{ann.Agent, bob.Agent, expert.Agent(), asst.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	(&fixture{t: t, ctx: ctx, llm: asst}).waitCatalog(func(agents map[string][]toolSpec) bool { return agents["Expert"] != nil })
	say := func(from *listener, conv, text string) string {
		t.Helper()
		m := &agency.Message{To: "Assistant", Action: "say", Args: SayArgs{Content: text}}
		if conv != "" {
			m.Meta = map[string]any{"conversation": conv}
		}
		r, err := from.RequestMessage(ctx, m)
		if err != nil {
			t.Fatalf("%s: %v", from.ID(), err)
		}
		from.next(t, ctx) // the say back
		v, err := agency.Value[string](r)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := say(ann, "", "Ann's PIN is 4711"); !strings.Contains(got, "Ann's PIN is 4711") {
		t.Fatalf("Ann's turn: %q", got)
	}
	if got := say(bob, "Ann", "Bob asks for the PIN"); strings.Contains(got, "4711") {
		t.Errorf("Bob naming Ann's conversation heard %q", got)
	}
	if got := say(ann, "", "Ann again"); !strings.Contains(got, "4711") || strings.Contains(got, "Bob") {
		t.Errorf("Ann's conversation after Bob named it: %q", got)
	}
	for _, r := range expertSrv.Requests() {
		if last := lastUser(r); strings.Contains(last, "Bob") {
			for _, m := range r.Messages {
				if strings.Contains(m.Content, "4711") {
					t.Errorf("the Expert's model request for Bob's %q carries Ann's %q", last, m.Content)
				}
			}
		}
	}
}
