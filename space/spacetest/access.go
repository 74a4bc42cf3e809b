package spacetest

import (
	"context"
	"sync/atomic"

	"github.com/seed72275b23/agency-go/agency"
)

// accessTests cover access policies: denied, requested (granted, rejected,
// without a PermissionRequester, decided by asking another agent), per
// sender and per message.
var accessTests = []test{
	{"Denied", testDenied},
	{"RequestedGranted", testRequestedGranted},
	{"RequestedRejected", testRequestedRejected},
	{"RequestedWithoutRequester", testRequestedWithoutRequester},
	{"BySender", testAccessBySender},
	{"ByMessage", testAccessByMessage},
	{"RequestedWhileRequesting", testRequestedWhileRequesting},
	{"Approve", testApprove},
	{"ApproveAsksAnotherAgent", testApproveAsksAnotherAgent},
	{"ApproveBeforePermissionRequester", testApproveBeforePermissionRequester},
	{"BySenderPrefix", testAccessBySenderPrefix},
}

// gate is a PermissionRequester that records what it is asked and lets
// decide answer.
type gate struct {
	asked  record[*agency.Message]
	decide func(ctx context.Context, m *agency.Message) bool
}

var _ agency.PermissionRequester = (*gate)(nil)

func (g *gate) RequestPermission(ctx context.Context, m *agency.Message) bool {
	g.asked.add(m)
	return g.decide(ctx, m)
}

// counted registers the action name on a with the given options; it returns
// "ok" and counts its runs in ran.
func counted(a *agency.Agent, name string, ran *atomic.Int32, opts ...agency.ActionOption) {
	agency.Handle(a, name, func(context.Context, empty) (string, error) {
		ran.Add(1)
		return "ok", nil
	}, opts...)
}

// A denied action is permission_denied, through Request and through the
// ErrorHandler; the handler never runs.
func testDenied(e *env) {
	var ran atomic.Int32
	target := e.newAgent("Target")
	counted(target, "secret", &ran, agency.AccessForAll(agency.Denied))
	in := &inbox{}
	caller := e.newAgent("Caller", agency.Hooks(in))
	e.add(target, caller)

	_, err := e.request(caller, target.ID(), "secret", nil)
	wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	id := e.send(caller, target.ID(), "secret", nil)
	wantActionError(e.t, in.repliesTo(e.t, id, 1)[0].err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	if n := ran.Load(); n != 0 {
		e.t.Errorf("denied handler ran %d times", n)
	}
}

// A requested action runs when the PermissionRequester grants it, which
// sees the incoming message.
func testRequestedGranted(e *env) {
	var ran atomic.Int32
	g := &gate{decide: func(context.Context, *agency.Message) bool { return true }}
	target := e.newAgent("Target", agency.Hooks(g))
	counted(target, "guarded", &ran, agency.AccessForAll(agency.Requested))
	caller := e.newAgent("Caller")
	e.add(target, caller)

	if v := call[string](e, caller, target.ID(), "guarded", nil); v != "ok" {
		e.t.Errorf("guarded = %q, want ok", v)
	}
	asked := g.asked.all()
	if len(asked) != 1 || asked[0].Action != "guarded" || asked[0].From != caller.ID() || asked[0].To != target.ID() {
		e.t.Errorf("permission asked for %v, want once for guarded from %s", asked, caller.ID())
	}
	if n := ran.Load(); n != 1 {
		e.t.Errorf("handler ran %d times, want 1", n)
	}
}

// A requested action that the PermissionRequester rejects is
// permission_denied; the handler never runs.
func testRequestedRejected(e *env) {
	var ran atomic.Int32
	g := &gate{decide: func(context.Context, *agency.Message) bool { return false }}
	target := e.newAgent("Target", agency.Hooks(g))
	counted(target, "guarded", &ran, agency.AccessForAll(agency.Requested))
	caller := e.newAgent("Caller")
	e.add(target, caller)

	_, err := e.request(caller, target.ID(), "guarded", nil)
	wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	if asked := g.asked.all(); len(asked) != 1 {
		e.t.Errorf("permission asked %d times, want once", len(asked))
	}
	if n := ran.Load(); n != 0 {
		e.t.Errorf("rejected handler ran %d times", n)
	}
}

// A requested action with nothing to approve it cannot be registered; a
// call that an AccessFunc makes requested, on an agent with neither an
// approver nor a PermissionRequester, is denied.
func testRequestedWithoutRequester(e *env) {
	var ran atomic.Int32
	target := e.newAgent("Target")
	if err := agency.Register(target, "guarded", pong, agency.AccessForAll(agency.Requested)); err == nil {
		e.t.Error("Register of a requested action that nothing approves: no error")
	}
	counted(target, "guarded", &ran, agency.AccessFunc(func(*agency.Message) agency.Access { return agency.Requested }))
	caller := e.newAgent("Caller")
	e.add(target, caller)

	_, err := e.request(caller, target.ID(), "guarded", nil)
	wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	if n := ran.Load(); n != 0 {
		e.t.Errorf("handler ran %d times without permission", n)
	}
}

// AccessBySender: a policy per sender id, with a default for the rest.
func testAccessBySender(e *env) {
	var ran atomic.Int32
	g := &gate{decide: func(context.Context, *agency.Message) bool { return true }}
	target := e.newAgent("Target", agency.Hooks(g))
	friend, asker, stranger := e.newAgent("Friend"), e.newAgent("Asker"), e.newAgent("Stranger")
	counted(target, "op", &ran, agency.AccessBySender(map[string]agency.Access{
		friend.ID(): agency.Permitted,
		asker.ID():  agency.Requested,
	}, agency.Denied))
	e.add(target, friend, asker, stranger)

	if v := call[string](e, friend, target.ID(), "op", nil); v != "ok" {
		e.t.Errorf("op for a permitted sender = %q, want ok", v)
	}
	if v := call[string](e, asker, target.ID(), "op", nil); v != "ok" {
		e.t.Errorf("op for a requested, granted sender = %q, want ok", v)
	}
	_, err := e.request(stranger, target.ID(), "op", nil)
	wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)

	asked := g.asked.all()
	if len(asked) != 1 || asked[0].From != asker.ID() {
		e.t.Errorf("permission asked for %v, want once, for %s", asked, asker.ID())
	}
	if n := ran.Load(); n != 2 {
		e.t.Errorf("handler ran %d times, want 2", n)
	}
}

// AccessFunc: a policy decided per incoming message, here by a meta key.
func testAccessByMessage(e *env) {
	var ran atomic.Int32
	target := e.newAgent("Target")
	counted(target, "op", &ran, agency.AccessFunc(func(m *agency.Message) agency.Access {
		if m.Meta["role"] == "admin" {
			return agency.Permitted
		}
		return agency.Denied
	}))
	caller := e.newAgent("Caller")
	e.add(target, caller)

	m, err := caller.RequestMessage(e.ctx(), &agency.Message{
		To: target.ID(), Action: "op", Meta: map[string]any{"role": "admin"},
	})
	if err != nil {
		e.t.Fatalf("op as admin: %v", err)
	}
	if v := value[string](e.t, m); v != "ok" {
		e.t.Errorf("op as admin = %q, want ok", v)
	}
	_, err = caller.RequestMessage(e.ctx(), &agency.Message{
		To: target.ID(), Action: "op", Meta: map[string]any{"role": "guest"},
	})
	wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	if n := ran.Load(); n != 1 {
		e.t.Errorf("handler ran %d times, want 1", n)
	}
}

type approveArgs struct {
	Action string `json:"action"`
	From   string `json:"from"`
}

// A PermissionRequester may take as long as a human needs, and may itself
// Request another agent: the answer reaches it although its own agent is
// busy deciding (responses do not wait behind the queue). Here the guarded
// agent asks a "human" agent, whose approve action blocks until the test
// answers.
func testRequestedWhileRequesting(e *env) {
	asked := make(chan approveArgs, 1)
	answers := make(chan bool)
	human := e.newAgent("Human")
	agency.Handle(human, "approve", func(_ context.Context, q approveArgs) (bool, error) {
		signal(asked, q)
		select {
		case ok := <-answers:
			return ok, nil
		case <-e.stop:
			return false, nil
		}
	})
	var ran atomic.Int32
	g := &gate{decide: func(ctx context.Context, m *agency.Message) bool {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		ok, err := agency.Call[bool](ctx, agency.AgentFrom(ctx), human.ID(), "approve", approveArgs{Action: m.Action, From: m.From})
		return err == nil && ok
	}}
	guarded := e.newAgent("Guarded", agency.Hooks(g))
	counted(guarded, "launch", &ran, agency.AccessForAll(agency.Requested))
	caller := e.newAgent("Caller")
	e.add(human, guarded, caller)

	for _, approve := range []bool{true, false} {
		ctx := e.ctx()
		result := make(chan error, 1)
		go func() {
			_, err := agency.Call[string](ctx, caller, guarded.ID(), "launch", nil)
			result <- err
		}()
		q := receive(e.t, asked, "the human to be asked")
		if q.Action != "launch" || q.From != caller.ID() {
			e.t.Errorf("human asked about %+v, want launch from %s", q, caller.ID())
		}
		select {
		case err := <-result:
			e.t.Fatalf("launch returned (%v) before the human answered", err)
		default:
		}
		select {
		case answers <- approve:
		case <-ctx.Done():
			e.t.Fatal("the human's action stopped waiting for an answer")
		}
		err := receive(e.t, result, "the answer to launch")
		switch {
		case approve && err != nil:
			e.t.Errorf("approved launch: %v", err)
		case !approve:
			wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
		}
	}
	if n := ran.Load(); n != 1 {
		e.t.Errorf("launch ran %d times, want once (approved once, rejected once)", n)
	}
}
