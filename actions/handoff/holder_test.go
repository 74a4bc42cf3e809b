package handoff

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// One agent holds a conversation at a time: of two handoffs of one
// conversation at one version, made by its holder at the same moment to
// two agents that share the store, one is taken over and the other
// refused; a handoff sent again is refused as stale.
func TestOneHolder(t *testing.T) {
	s := newSupport(t, nil, 0)
	s.members = []string{"Ops"}
	s.refundSrv.Add(textStep("Refunds here."))
	s.salesSrv.Add(textStep("Sales here."))
	s.build("Triage")
	ops := agency.MustNewAgent("Ops")
	if err := s.sp.Add(s.ctx, ops); err != nil {
		t.Fatal(err)
	}
	// The store: Ops holds c1 at version 3.
	if _, err := updateConv(s.ctx, s.st, "User", "c1", func(c *Conversation, _ bool) (store.Changes, error) {
		*c = Conversation{Active: "Ops", User: "User", Version: 3, Status: StatusActive}
		return store.Changes{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	tr := Transfer{Conversation: "c1", User: "User", Name: "ops", Version: 4, Hops: 1, Path: []string{"Ops"}}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, to := range []string{"Refunds", "Sales"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = ops.Request(s.ctx, to, Action, tr)
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("the two handoffs: %v, %v; want one taken, one refused", errs[0], errs[1])
	}
	refused := errors.Join(errs...)
	if !strings.Contains(refused.Error(), "moved_on: conversation \"c1\" is at version 5, the handoff at 4") {
		t.Errorf("the refusal: %v", refused)
	}
	winner := "Refunds"
	if errs[0] != nil {
		winner = "Sales"
	}
	if _, err := s.screen.WaitShown(s.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := shown(s.screen); len(got) != 1 || !strings.HasPrefix(got[0], winner+": ") {
		t.Errorf("the user was shown %q", got)
	}
	if c, _ := LoadConversation(s.ctx, s.st, "User", "c1"); c.Active != winner || c.Version != 5 {
		t.Errorf("the store: %+v", c)
	}
	if n := len(s.events.of(EventRefused)); n != 1 {
		t.Errorf("%d refusals", n)
	}
	// The same handoff again: stale.
	if _, err := ops.Request(s.ctx, winner, Action, tr); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("a resent handoff: %v", err)
	}
}

// An agent whose conversation was taken over while its model thought
// cannot hand it on: its transfer reads why.
func TestHolderMovedOn(t *testing.T) {
	s := newSupport(t, nil, 0)
	s.members = []string{"Ops"}
	ops := agency.MustNewAgent("Ops")
	s.triageSrv.Add(openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		// Meanwhile the conversation goes to Ops, which hands it to
		// Refunds.
		c, err := updateConv(s.ctx, s.st, "User", "c1", func(c *Conversation, _ bool) (store.Changes, error) {
			c.Active = "Ops"
			c.Version++
			return store.Changes{}, nil
		})
		if err != nil {
			t.Error(err)
		}
		if _, err := ops.Request(s.ctx, "Refunds", Action, Transfer{Conversation: "c1", User: "User", Version: c.Version + 1}); err != nil {
			t.Errorf("Ops' handoff: %v", err)
		}
		return calls1("transfer_to_sales_agent", "{}")
	}}, textStep("Refunds has taken over."))
	s.refundSrv.Add(textStep("Refunds here."))
	s.build("Triage")
	if err := s.sp.Add(s.ctx, ops); err != nil {
		t.Fatal(err)
	}
	s.say("Help")
	if _, err := s.screen.WaitShown(s.ctx, 2); err != nil {
		t.Fatal(err)
	}
	r := s.triageSrv.Requests()
	if got := lastContent(r[1]); got != "error: not_holder: Triage does not hold this conversation any more: Refunds does" {
		t.Errorf("the transfer read %q", got)
	}
	if n := len(s.salesSrv.Requests()); n != 0 {
		t.Errorf("Sales was asked %d times", n)
	}
	if c, _ := LoadConversation(s.ctx, s.st, "User", "c1"); c.Active != "Refunds" {
		t.Errorf("the holder %q", c.Active)
	}
}

// A rule-driven handoff that its receiver refuses after the sender
// committed it (the receiver does not take handoffs from the sender): the
// sender holds the conversation again, with the hops of before, the user
// is told why, and the event says so. A resent copy changes nothing.
func TestRefusedHandoffGoesBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	srv := openaitest.NewServer(t)
	events := newRecorder()
	team := &Team{UserID: "User", Options: []Option{Observe(events)}, LLM: llmOptions(srv), Members: []string{"Outsider"}}
	a1, err := team.Agent("agent_1", "You route customers.", OnContext(To("Outsider"), "vip"))
	if err != nil {
		t.Fatal(err)
	}
	outsider := agency.MustNewAgent("Outsider")
	taken := make(chan Transfer, 1)
	if err := Accept(outsider, func(_ context.Context, tr Transfer) error { taken <- tr; return nil }, "Someone"); err != nil {
		t.Fatal(err)
	}
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	for _, a := range []*agency.Agent{a1.Agent(), outsider, team.UserAgent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	user := human.NewScript("exit")
	res, err := team.Run(ctx, Start{Agent: "agent_1", Message: "Hello", Conversation: "c1", Vars: Vars{"vip": true}, User: user})
	if err != nil {
		t.Fatal(err)
	}
	if res.Last != "agent_1" {
		t.Errorf("Run: last %q; want agent_1, telling the user", res.Last)
	}
	said := shown(user)
	if len(said) != 1 || !strings.HasPrefix(said[0], "agent_1: Sorry, I could not hand this conversation to Outsider") || !strings.Contains(said[0], "permission_denied") {
		t.Errorf("the user was shown %q", said)
	}
	// The same text ends agent_1's history: its model reads it next time.
	if h := res.History; len(h) != 2 || h[1].Role != openai.RoleAssistant || "agent_1: "+h[1].Content != said[0] {
		t.Errorf("agent_1's history %+v", h)
	}
	back := events.wait(t, ctx, EventReturned, 1)
	if e := back[0]; e.Agent != "agent_1" || e.To != "Outsider" || e.Hops != 0 || len(e.Path) != 0 || !strings.Contains(e.Err.Error(), "permission_denied") || !errors.Is(e.Err, ErrRefused) || !errors.Is(e.Err, agency.ErrPermissionDenied) {
		t.Errorf("the event: %+v", e)
	}
	c, err := LoadConversation(ctx, team.Store(), "User", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Active != "agent_1" || c.Hops != 0 || len(c.Path) != 0 || c.Status != StatusActive || c.Version != back[0].Version {
		t.Errorf("the store: %+v", c)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("agent_1's model got %d requests", n)
	}
	select {
	case tr := <-taken:
		t.Errorf("the outsider took %+v", tr)
	default:
	}

	// The same refusal again (the relay sent it twice): the conversation
	// went on, and stays where it is.
	p := team.policies["agent_1"]
	p.giveBack(ctx, "Outsider", Transfer{Conversation: "c1", User: "User", Version: back[0].Version - 1}, errors.New("refused again"))
	if c2, _ := LoadConversation(ctx, team.Store(), "User", "c1"); c2.Version != c.Version || c2.Active != "agent_1" {
		t.Errorf("a second refusal changed the store: %+v", c2)
	}
	if r := events.of(EventRefused); len(r) == 0 || !strings.Contains(r[len(r)-1].Err.Error(), "went on meanwhile") {
		t.Errorf("the second refusal's event: %+v", r)
	}
}

// Only the holder hands a conversation on, at the version it holds, and
// no handoff changes who the user is: with Ann's c1 held by Triage at
// version 2, another member's Transfer (naming Mallory as the user, or
// not, at any version) is refused with not_holder, and the holder's own
// Transfer that names another user is refused too; the store and the
// user stay as they were, and each refusal is an event.
func TestHandoffOnlyFromTheHolder(t *testing.T) {
	s := newSupport(t, nil, 0)
	s.members = []string{"Ops"}
	s.build("Triage")
	ops := agency.MustNewAgent("Ops")
	if err := s.sp.Add(s.ctx, ops); err != nil {
		t.Fatal(err)
	}
	hold := func(holder string) {
		t.Helper()
		if _, err := updateConv(s.ctx, s.st, "Ann", "c1", func(c *Conversation, _ bool) (store.Changes, error) {
			*c = Conversation{Active: holder, User: "Ann", Version: 2, Status: StatusActive}
			return store.Changes{}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	hold("Triage")
	for _, tr := range []Transfer{
		{Conversation: "c1", Owner: "Ann", User: "Mallory", Version: 99},
		{Conversation: "c1", Owner: "Ann", User: "Ann", Version: 3},
	} {
		_, err := ops.Request(s.ctx, "Refunds", Action, tr)
		if err == nil || !strings.Contains(err.Error(), "not_holder: Ops does not hold conversation \"c1\"") {
			t.Errorf("a handoff at version %d from a member that does not hold c1: %v", tr.Version, err)
		}
	}
	if c, _ := LoadConversation(s.ctx, s.st, "Ann", "c1"); c.Active != "Triage" || c.User != "Ann" || c.Version != 2 {
		t.Errorf("the store after the refusals: %+v", c)
	}
	hold("Ops")
	for _, c := range []struct {
		tr   Transfer
		want string
	}{
		{Transfer{Conversation: "c1", Owner: "Ann", User: "Mallory", Version: 3}, "refused: a handoff does not change the user of conversation \"c1\""},
	} {
		_, err := ops.Request(s.ctx, "Refunds", Action, c.tr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("the holder's handoff %+v: %v, want %q", c.tr, err, c.want)
		}
	}
	if c, _ := LoadConversation(s.ctx, s.st, "Ann", "c1"); c.Active != "Ops" || c.User != "Ann" || c.Version != 2 {
		t.Errorf("the store after the refusals: %+v", c)
	}
	if n := len(s.events.of(EventRefused)); n != 3 {
		t.Errorf("%d refusal events, want 3", n)
	}
}
