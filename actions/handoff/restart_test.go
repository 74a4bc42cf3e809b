package handoff

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
)

// openSQLite opens a store in a file of the test's temporary folder.
func openSQLite(t *testing.T, ctx context.Context, path string) store.Store {
	t.Helper()
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// restart closes the space and the store, and builds every agent again on
// a new space and the same file, with a new user front.
func (s *support) restart(path string) {
	s.t.Helper()
	if err := s.sp.Close(s.ctx); err != nil {
		s.t.Fatalf("closing the space: %v", err)
	}
	if err := s.st.Close(); err != nil {
		s.t.Fatal(err)
	}
	s.st = openSQLite(s.t, s.ctx, path)
	s.screen = human.NewScript()
	s.build("Triage")
}

// A-restart: the conversation survives a rebuild of every agent on a
// SQLite file. The user agent built again speaks to the holder the store
// names, and Refunds' model gets the whole earlier history.
func TestSupportRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "support.db")
	s := newSupport(t, nil, 6)
	s.st = openSQLite(t, s.ctx, path)
	scriptMain(s)
	s.build("Triage")
	for _, line := range userLines[:3] {
		s.say(line)
	}
	if got := shown(s.screen); !slices.Equal(got, []string{"Triage: " + triage1, "Refunds: " + refunds1, "Refunds: " + refunds2}) {
		t.Fatalf("before the restart the user was shown %q", got)
	}

	s.restart(path)
	if h := s.user.Holder(); h != "Refunds" {
		t.Fatalf("after the restart the user speaks to %q", h)
	}
	for _, line := range userLines[3:] {
		s.say(line)
	}
	want := []string{"Refunds: " + refunds5, "Refunds: " + refunds6, "Human: Hello this is manager", "Human: Thanks."}
	if got := shown(s.screen); !slices.Equal(got, want) {
		t.Errorf("after the restart the user was shown\n%q\nwant\n%q", got, want)
	}
	rr := s.refundSrv.Requests()
	if len(rr) != 7 {
		t.Fatalf("Refunds' model got %d requests", len(rr))
	}
	// Request 3, the first after the restart, holds all that came before.
	wantR3 := []msg{
		{role: "user", name: "User", content: "I want a refund"},
		{role: "assistant", name: "Triage", content: triage1},
		{role: "user", name: "User", content: "A pair of shoes I bought"},
		{role: "assistant", name: "Triage", call: "transfer_to_issues_and_repairs"},
		{role: "tool", content: transfer, callID: "tool"},
		{role: "assistant", name: "Refunds", content: refunds1},
		{role: "user", name: "User", content: "The shoes are too small"},
		{role: "assistant", name: "Refunds", content: refunds2},
		{role: "user", name: "User", content: "no I want a refund"},
	}
	if got := messages(rr[2]); !slices.Equal(got, wantR3) {
		t.Errorf("Refunds' request 3:\n%+v\nwant\n%+v", got, wantR3)
	}
	log, err := Log(s.ctx, s.st, "User", "c1")
	if err != nil || len(log) != 3 {
		t.Errorf("the log after the restart: %+v, %v", log, err)
	}
	if s.triageSrv.Left()+s.refundSrv.Left() != 0 {
		t.Errorf("steps left: Triage %d, Refunds %d", s.triageSrv.Left(), s.refundSrv.Left())
	}
}

// A-outbox: the process stops right after Triage committed its handoff
// (in the store, not yet sent). Once every agent is built again, Triage's
// relay sends the handoff, once, and Refunds answers as it would have;
// Triage's model is not asked again.
func TestSupportOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "support.db")
	s := newSupport(t, nil, 6)
	s.st = openSQLite(t, s.ctx, path)
	scriptMain(s)
	s.build("Triage")
	s.say(userLines[0])

	committed := make(chan Transfer, 1)
	s.team.policies["Triage"].committed = func(ctx context.Context, tr Transfer) {
		committed <- tr
		<-ctx.Done() // the process dies here: nothing is sent
	}
	said := make(chan error, 1)
	user := s.user
	go func() { said <- user.Say(s.ctx, userLines[1]) }()
	var tr Transfer
	select {
	case tr = <-committed:
	case <-s.ctx.Done():
		t.Fatal("Triage never committed the handoff")
	}
	// Close waits for the turn held in the hook until its context ends.
	closeCtx, cancel := context.WithTimeout(s.ctx, 200*time.Millisecond)
	_ = s.sp.Close(closeCtx)
	cancel()
	<-said
	if n := len(s.refundSrv.Requests()); n != 0 {
		t.Fatalf("Refunds' model was asked %d times before the restart", n)
	}
	if c, _ := LoadConversation(s.ctx, s.st, "User", "c1"); c.Active != "Refunds" || c.Version != tr.Version {
		t.Fatalf("the committed conversation: %+v (handoff at version %d)", c, tr.Version)
	}

	s.restart(path)
	// Refunds answers the user agent built again.
	if _, err := s.screen.WaitShown(s.ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.say(userLines[2])
	if got := shown(s.screen); !slices.Equal(got, []string{"Refunds: " + refunds1, "Refunds: " + refunds2}) {
		t.Errorf("after the restart the user was shown %q", got)
	}
	if n := len(s.triageSrv.Requests()); n != 2 {
		t.Errorf("Triage's model got %d requests, want 2", n)
	}
	if got := messages(s.refundSrv.Requests()[0]); len(got) != 5 || got[3].call != "transfer_to_issues_and_repairs" {
		t.Errorf("Refunds' request 1: %+v", got)
	}
	if acc := s.events.of(EventAccepted); len(acc) != 1 || acc[0].Version != tr.Version+1 {
		t.Errorf("handoffs accepted: %+v", acc)
	}
	if ref := s.events.of(EventRefused); len(ref) != 0 {
		t.Errorf("refused: %+v", ref)
	}
	// Sent once: nothing is left in the outbox.
	if left, err := s.st.Claim(s.ctx, "Triage", 10, time.Second); err != nil || len(left) != 0 {
		t.Errorf("the outbox still holds %v, %v", left, err)
	}
}
