package openai

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// pinger returns an agent with one action, ping.
func pinger(id string) *agency.Agent {
	a := agency.MustNewAgent(id)
	agency.Handle(a, "ping", func(context.Context, NoArgs) (string, error) { return "pong", nil }, agency.Describe("Pings"))
	return a
}

// An agent that joins after the Assistant is offered at the next turn: the
// turn surveys the space before its first model call (on space.Local,
// until every agent has answered). An agent that leaves is no longer
// offered at the next turn: it does not answer the survey, is asked
// directly, and the space says it is gone.
func TestDiscoveryFollowsTheSpace(t *testing.T) {
	step := openaitest.Step{Text: "ok"}
	f := newFixture(t, step, step, step)
	f.start([]string{"User"}, Rediscover(0, time.Second))

	if _, err := f.say(f.user, "one"); err != nil {
		t.Fatal(err)
	}
	f.add(pinger("Late"))
	if _, err := f.say(f.user, "two"); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests(2)
	if slices.Contains(toolNamesOf(reqs[0]), "Late__ping") || !slices.Contains(toolNamesOf(reqs[1]), "Late__ping") {
		t.Fatalf("tools %v, then after Late joined %v", toolNamesOf(reqs[0]), toolNamesOf(reqs[1]))
	}

	if err := f.sp.Remove(f.ctx, "Late"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.say(f.user, "three"); err != nil {
		t.Fatal(err)
	}
	if names := toolNamesOf(f.requests(3)[2]); slices.Contains(names, "Late__ping") {
		t.Errorf("Late, gone, is still offered: %v", names)
	}
	if slices.Contains(f.catalogAgents(), "Late") {
		t.Error("Late is still in the catalog")
	}
}

// An agent that left is no longer offered at the next turn however long
// the space takes to say that it is gone: settle bounds the wait for an
// answer to the direct help, not the wait for the space's word that the
// help has no recipient. (Under load a broker returns an unroutable
// message late: a tool agent of another process was still offered after
// it had stopped.)
func TestLeaverDroppedWhenTheSpaceIsSlowToSaySo(t *testing.T) {
	const settle = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	sp := newTapSpace(t)
	sp.lag = 4 * settle
	srv := openaitest.NewServer(t, openaitest.Step{Text: "ok"})
	user := agency.MustNewAgent("User")
	agency.Handle(user, "say", func(context.Context, SayArgs) (string, error) { return "heard", nil })
	llm, err := New("Assistant", APIKey("k"), BaseURL(srv.URL), HTTPClient(srv.Client()), Rediscover(0, settle),
		Logger(failureLog(t)))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, llm: llm}
	for _, a := range []*agency.Agent{user, pinger("Late"), llm.Agent()} {
		if err := sp.add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCatalog(func(agents map[string][]toolSpec) bool { _, ok := agents["Late"]; return ok })
	f.surveyed()
	if err := sp.remove(ctx, "Late"); err != nil {
		t.Fatal(err)
	}
	sp.takeHelps()

	if _, err := agency.Call[string](ctx, user, "Assistant", "say", SayArgs{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if got := sp.takeHelps(); !slices.Equal(got, []string{agency.Broadcast, "Late"}) {
		t.Errorf("the turn sent help to %v, want a broadcast, then Late, which did not answer it", got)
	}
	if names := toolNamesOf(srv.Requests()[0]); slices.Contains(names, "Late__ping") {
		t.Errorf("Late, gone, is still offered: %v", names)
	}
	if slices.Contains(f.catalogAgents(), "Late") {
		t.Error("Late is still in the catalog")
	}
}

// An agent whose help has a shape of its own (CustomHelp), which a survey
// does not keep, is asked directly when a survey first finds it.
func TestDiscoveryCustomHelp(t *testing.T) {
	f := newFixture(t, openaitest.Step{Text: "ok"})
	f.start([]string{"User"}, Rediscover(0, time.Second))
	odd := agency.MustNewAgent("Odd")
	agency.Handle(odd, "legacy", func(context.Context, NoArgs) (string, error) { return "ok", nil },
		agency.CustomHelp(map[string]any{"usage": "send {\"n\": 1}"}))
	f.add(odd)
	if _, err := f.say(f.user, "hi"); err != nil {
		t.Fatal(err)
	}
	tool, ok := f.requests(1)[0].Tool("Odd__legacy")
	if !ok || !strings.Contains(tool.Description, `send {\"n\": 1}`) {
		t.Errorf("the custom help reached the model as %+v", tool)
	}
}

// tapSpace is a small in-process space that records the help messages the
// Assistant sends: one entry per message, its recipient (agency.Broadcast
// for a broadcast).
type tapSpace struct {
	mu    sync.Mutex
	conns map[string]*driver.Conn
	helps []string
	sent  []*agency.Message // every message the Assistant sent
	// mute, if set, swallows the messages it picks, as a broker does
	// with a message no queue is bound for.
	mute func(m *agency.Message) bool
	// lag, if set, is how long the space takes to say that a message
	// has no recipient, as a broker under load returns an unroutable
	// message late; a sender that stops waiting meanwhile gets its
	// context's error instead. Set before the first agent is added.
	lag time.Duration
}

func newTapSpace(t *testing.T) *tapSpace {
	s := &tapSpace{conns: make(map[string]*driver.Conn)}
	t.Cleanup(func() {
		s.mu.Lock()
		conns := s.conns
		s.conns = map[string]*driver.Conn{}
		s.mu.Unlock()
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	})
	return s
}

func (s *tapSpace) add(ctx context.Context, a *agency.Agent) error {
	c, err := driver.Connect(a, tapRouter{s})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.conns[a.ID()] = c
	s.mu.Unlock()
	c.Added(ctx)
	return nil
}

func (s *tapSpace) remove(ctx context.Context, id string) error {
	s.mu.Lock()
	c := s.conns[id]
	delete(s.conns, id)
	s.mu.Unlock()
	return c.Close(ctx)
}

// tapRouter is the Router of one agent in a tapSpace: a BroadcastRouter,
// as space.Local's is, so that a survey knows whom it waits for.
type tapRouter struct{ s *tapSpace }

func (r tapRouter) Route(ctx context.Context, m *agency.Message) error {
	_, err := r.s.route(ctx, m)
	return err
}

func (r tapRouter) RouteBroadcast(ctx context.Context, m *agency.Message) ([]string, error) {
	return r.s.route(ctx, m)
}

func (s *tapSpace) route(ctx context.Context, m *agency.Message) ([]string, error) {
	s.mu.Lock()
	if m.From == "Assistant" {
		s.sent = append(s.sent, m)
		if m.Action == agency.HelpAction {
			s.helps = append(s.helps, m.To)
		}
	}
	if s.mute != nil && s.mute(m) {
		s.mu.Unlock()
		return nil, nil
	}
	var to []*driver.Conn
	if m.To == agency.Broadcast {
		for _, c := range s.conns {
			to = append(to, c)
		}
	} else if c, ok := s.conns[m.To]; ok {
		to = append(to, c)
	}
	s.mu.Unlock()
	if len(to) == 0 && m.To != agency.Broadcast {
		if s.lag > 0 {
			t := time.NewTimer(s.lag)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return nil, agency.ErrNoRecipient
	}
	var reached []string
	for _, c := range to {
		if c.Deliver(m) == nil {
			reached = append(reached, c.Agent().ID())
		}
	}
	return reached, nil
}

// takeHelps returns the help messages recorded since the last call.
func (s *tapSpace) takeHelps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.helps
	s.helps = nil
	return h
}

// The help requests per turn stay bounded whatever the number of agents:
// none while the view is fresh; one broadcast per turn when it is always
// stale; plus one direct request to each agent that has gone silent, once.
func TestHelpRequestsPerTurn(t *testing.T) {
	const tools = 10
	for _, tc := range []struct {
		name   string
		opt    Option
		remove bool
		want   [][]string // help messages sent per turn
	}{
		{"fresh view", Rediscover(time.Hour, time.Second), false, [][]string{nil, nil, nil}},
		{"stale view every turn", Rediscover(0, 10*time.Second), false, [][]string{{"*"}, {"*"}, {"*"}}},
		{"an agent left", Rediscover(0, 100*time.Millisecond), true, [][]string{{"*", "Tool-3"}, {"*"}, {"*"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), safety)
			defer cancel()
			sp := newTapSpace(t)
			srv := openaitest.NewServer(t, slices.Repeat([]openaitest.Step{{Text: "ok"}}, len(tc.want))...)
			user := agency.MustNewAgent("User")
			agency.Handle(user, "say", func(context.Context, SayArgs) (string, error) { return "heard", nil })
			ids := []string{"User"}
			for i := range tools {
				id := fmt.Sprintf("Tool-%d", i)
				ids = append(ids, id)
				if err := sp.add(ctx, pinger(id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := sp.add(ctx, user); err != nil {
				t.Fatal(err)
			}
			llm, err := New("Assistant", APIKey("k"), BaseURL(srv.URL), HTTPClient(srv.Client()), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			f := &fixture{t: t, ctx: ctx, llm: llm}
			if err := sp.add(ctx, llm.Agent()); err != nil {
				t.Fatal(err)
			}
			f.waitCatalog(func(agents map[string][]toolSpec) bool { return len(agents) == len(ids) })
			f.surveyed()
			if got := sp.takeHelps(); !slices.Equal(got, []string{"*"}) {
				t.Errorf("on joining the Assistant sent help to %v, want one broadcast", got)
			}
			if tc.remove {
				if err := sp.remove(ctx, "Tool-3"); err != nil {
					t.Fatal(err)
				}
			}
			for turn, want := range tc.want {
				if _, err := agency.Call[string](ctx, user, "Assistant", "say", SayArgs{Content: "hi"}); err != nil {
					t.Fatal(err)
				}
				got := sp.takeHelps()
				t.Logf("turn %d: help to %v", turn+1, got)
				if !slices.Equal(got, want) {
					t.Errorf("turn %d: help to %v, want %v", turn+1, got, want)
				}
			}
			want := tools
			if tc.remove {
				want--
			}
			if n := len(toolNamesOf(srv.Requests()[len(tc.want)-1])); n != want {
				t.Errorf("the last turn offers %d tools, want %d", n, want)
			}
		})
	}
}

// Every message the Assistant sends while serving a conversation carries
// its id: the survey's broadcast help, the help to an unknown sender, the
// tool requests, the answer. One does not: the [response] that agency
// sends for the say itself, which answers by parent_id.
func TestMessagesCarryConversation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	sp := newTapSpace(t)
	srv := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":1,"b":2}`}}},
		openaitest.Step{Text: "3"},
	)
	var calls received
	stranger := newListener("Stranger")
	for _, a := range []*agency.Agent{calculator(&calls), stranger.Agent} {
		if err := sp.add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	llm, err := New("Assistant", APIKey("k"), BaseURL(srv.URL), HTTPClient(srv.Client()), Rediscover(0, safety))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.add(ctx, llm.Agent()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, llm: llm}
	f.waitCatalog(func(agents map[string][]toolSpec) bool { return len(agents) == 2 })
	f.surveyed()
	llm.catalog.drop("Stranger") // unknown to the Assistant: it will ask
	sp.mu.Lock()
	sp.sent = nil
	sp.mu.Unlock()

	m := &agency.Message{To: "Assistant", Action: "say", Args: SayArgs{Content: "1+2"}, Meta: map[string]any{"conversation": "c1"}}
	if _, err := stranger.RequestMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	stranger.next(t, ctx)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var kinds []string
	for _, m := range sp.sent {
		if m.IsResponse() {
			continue
		}
		kinds = append(kinds, m.To+"."+m.Action)
		if m.Meta["conversation"] != "c1" {
			t.Errorf("%s.%s carries conversation %v", m.To, m.Action, m.Meta["conversation"])
		}
	}
	slices.Sort(kinds)
	if want := []string{"*.help", "Calculator.add", "Stranger.help", "Stranger.say"}; !slices.Equal(kinds, want) {
		t.Errorf("the Assistant sent %v, want %v", kinds, want)
	}
}

// The first turn of an agent just added waits for the survey it made on
// joining: an agent that was busy with a long action when the Assistant
// joined, and answers help only once the turn has begun, is offered on
// that turn's first model call, with the default Rediscover (whose
// interval has not passed).
func TestFirstTurnWaitsForDiscovery(t *testing.T) {
	f := newFixture(t, openaitest.Step{Text: "ok"})
	busy := agency.MustNewAgent("Busy")
	release := make(chan struct{})
	started := make(chan struct{})
	agency.Handle(busy, "work", func(ctx context.Context, _ NoArgs) (string, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "done", nil
	}, agency.Describe("Works for a long time"))
	f.add(busy)
	// Busy works (it answers help after that), while the Assistant joins.
	go func() { _, _ = f.user.Request(f.ctx, "Busy", "work", NoArgs{}) }()
	<-started
	var once sync.Once
	llm, err := New("Assistant", APIKey("test-key"), BaseURL(f.srv.URL), HTTPClient(f.srv.Client()),
		Rediscover(time.Hour, safety),
		Extend(Extension{Before: func(context.Context, *Turn, *Request) error {
			once.Do(func() { close(release) }) // Busy is free to answer now
			return nil
		}}))
	if err != nil {
		t.Fatal(err)
	}
	f.llm = llm
	f.add(llm.Agent())
	if _, err := f.say(f.user, "hi"); err != nil {
		t.Fatal(err)
	}
	if names := toolNamesOf(f.requests(1)[0]); !slices.Contains(names, "Busy__work") {
		t.Errorf("the first model call offered %v, without Busy__work", names)
	}
}

// The helps sent to agents that never answer (an operand/agency agent on a
// broker in its own shape, say) are bounded: one per agent until it is
// time to ask again, however often the agent talks, and at most maxAsking
// at once, however many such agents talk.
func TestUnansweredHelpsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	sp := newTapSpace(t)
	sp.mute = func(m *agency.Message) bool { return m.Action == agency.HelpAction && strings.HasPrefix(m.To, "Mute") }
	srv := openaitest.NewServer(t)
	llm, err := New("Assistant", APIKey("k"), BaseURL(srv.URL), HTTPClient(srv.Client()), Rediscover(time.Hour, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.add(ctx, llm.Agent()); err != nil {
		t.Fatal(err)
	}
	(&fixture{t: t, ctx: ctx, llm: llm}).surveyed()
	sp.takeHelps()
	for range 100 {
		llm.notice(ctx, "Mute", "")
	}
	if got := sp.takeHelps(); !slices.Equal(got, []string{"Mute"}) {
		t.Errorf("100 messages from an agent that does not answer: help sent to %v, want once", got)
	}
	// Once it is time to ask again, the next message asks again.
	c := &llm.catalog
	c.mu.Lock()
	h, _ := c.asking.Get("Mute")
	h.at = h.at.Add(-llm.helpAgain())
	c.asking.Add("Mute", h)
	c.mu.Unlock()
	llm.notice(ctx, "Mute", "")
	llm.notice(ctx, "Mute", "")
	if got := sp.takeHelps(); !slices.Equal(got, []string{"Mute"}) {
		t.Errorf("after helpAgain: help sent to %v, want once more", got)
	}
	for i := range 3 * maxAsking {
		llm.notice(ctx, fmt.Sprintf("Mute-%d", i), "")
	}
	c.mu.Lock()
	n := c.asking.Len()
	c.mu.Unlock()
	if n > maxAsking {
		t.Errorf("%d helps awaited at once, want at most %d", n, maxAsking)
	}
	if got := sp.takeHelps(); len(got) != 3*maxAsking {
		t.Errorf("%d helps sent to %d agents, want one each: %v", len(got), 3*maxAsking, got)
	}
}
