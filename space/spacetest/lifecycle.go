package spacetest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// lifecycleTests cover Add, Remove and Close, and the hooks around them and
// around each action.
var lifecycleTests = []test{
	{"AddAndRemoveHooks", testAddRemoveHooks},
	{"AddExistingID", testAddExistingID},
	{"RemoveUnknownID", testRemoveUnknownID},
	{"RemoveAndReAdd", testRemoveAndReAdd},
	{"RemoveDrains", testRemoveDrains},
	{"ActionHooks", testActionHooks},
	{"AfterAddBeforeActions", testAfterAddBeforeActions},
	{"RemoveSelf", testRemoveSelf},
	{"RemoveExpired", testRemoveExpired},
	{"RequestWhileRemoved", testRequestWhileRemoved},
	{"RequestWhileDraining", testRequestWhileDraining},
	{"Close", testClose},
}

// lifecycle is a hook value that counts AfterAdd and BeforeRemove calls and,
// when target is set, sends target a note from each.
type lifecycle struct {
	target   string
	added    atomic.Int32
	removing atomic.Int32
	errs     record[error]
}

var (
	_ agency.AfterAdder    = (*lifecycle)(nil)
	_ agency.BeforeRemover = (*lifecycle)(nil)
)

func (l *lifecycle) AfterAdd(ctx context.Context) {
	l.added.Add(1)
	l.note(ctx, "added")
}

func (l *lifecycle) BeforeRemove(ctx context.Context) {
	l.removing.Add(1)
	l.note(ctx, "removing")
}

func (l *lifecycle) note(ctx context.Context, text string) {
	if l.target == "" {
		return
	}
	a := agency.AgentFrom(ctx)
	if a == nil {
		l.errs.add(errors.New("AgentFrom(ctx) is nil in a lifecycle hook"))
		return
	}
	if _, err := a.Send(ctx, l.target, "note", textArgs{Text: text}); err != nil {
		l.errs.add(err)
	}
}

// AfterAdd runs before Add returns and may Send; BeforeRemove runs before
// Remove returns and may Send too.
func testAddRemoveHooks(e *env) {
	var got record[note]
	observer := e.newAgent("Observer")
	handleNote(observer, &got)
	l := &lifecycle{target: observer.ID()}
	subject := e.newAgent("Subject", agency.Hooks(l))
	e.add(observer, subject)

	if n := l.added.Load(); n != 1 {
		e.t.Fatalf("AfterAdd ran %d times before Add returned, want 1", n)
	}
	got.waitFor(e.t, "the note sent from AfterAdd", func(ns []note) bool {
		return len(notes(ns, observer.ID(), subject.ID(), "added")) == 1
	})
	if n := l.removing.Load(); n != 0 {
		e.t.Errorf("BeforeRemove ran %d times before Remove", n)
	}
	e.remove(subject.ID())
	if n := l.removing.Load(); n != 1 {
		e.t.Fatalf("BeforeRemove ran %d times before Remove returned, want 1", n)
	}
	got.waitFor(e.t, "the note sent from BeforeRemove", func(ns []note) bool {
		return len(notes(ns, observer.ID(), subject.ID(), "removing")) == 1
	})
	for _, err := range l.errs.all() {
		e.t.Errorf("Send from a lifecycle hook: %v", err)
	}
}

// Adding an agent whose id is live is ErrAgentExists; the agent already
// there keeps working, and the one refused is in no space, so it can be
// added once the id is free.
func testAddExistingID(e *env) {
	first := e.newAgent("Twin")
	agency.Handle(first, "ping", pong)
	second, err := agency.NewAgent(first.ID())
	if err != nil {
		e.t.Fatal(err)
	}
	agency.Handle(second, "ping", func(context.Context, empty) (string, error) { return "second", nil })
	caller := e.newAgent("Caller")
	e.add(first, caller)

	if err := e.sp.Add(e.ctx(), second); !errors.Is(err, space.ErrAgentExists) {
		e.t.Fatalf("Add of a live id: %v, want ErrAgentExists", err)
	}
	if err := e.sp.Add(e.ctx(), first); err == nil {
		e.t.Fatal("Add of an agent already in the space succeeded")
	}
	if _, err := second.Send(e.ctx(), caller.ID(), "ping", nil); !errors.Is(err, agency.ErrNotAdded) {
		e.t.Errorf("Send from the refused agent: %v, want ErrNotAdded", err)
	}
	if v := call[string](e, caller, first.ID(), "ping", nil); v != "pong" {
		e.t.Errorf("ping to the first agent = %q, want pong", v)
	}
	e.remove(first.ID())
	e.add(second)
	if v := call[string](e, caller, second.ID(), "ping", nil); v != "second" {
		e.t.Errorf("ping to the agent added after the id was freed = %q, want second", v)
	}
}

// Removing an id that is not in the space is ErrUnknownAgent, the second
// time too.
func testRemoveUnknownID(e *env) {
	if err := e.sp.Remove(e.ctx(), e.id("Nobody")); !errors.Is(err, space.ErrUnknownAgent) {
		e.t.Errorf("Remove of an unknown id: %v, want ErrUnknownAgent", err)
	}
	a := e.newAgent("Once")
	e.add(a)
	e.remove(a.ID())
	if err := e.sp.Remove(e.ctx(), a.ID()); !errors.Is(err, space.ErrUnknownAgent) {
		e.t.Errorf("second Remove: %v, want ErrUnknownAgent", err)
	}
}

// After Remove, a Request to the agent is ErrNoRecipient, a Send to it is no
// error, and the agent itself cannot send. It can be added again, and then
// serves as before.
func testRemoveAndReAdd(e *env) {
	l := &lifecycle{}
	worker := e.newAgent("Worker", agency.Hooks(l))
	agency.Handle(worker, "ping", pong)
	caller := e.newAgent("Caller")
	e.add(worker, caller)

	if v := call[string](e, caller, worker.ID(), "ping", nil); v != "pong" {
		e.t.Fatalf("ping = %q, want pong", v)
	}
	e.remove(worker.ID())
	if _, err := e.request(caller, worker.ID(), "ping", nil); !errors.Is(err, agency.ErrNoRecipient) {
		e.t.Errorf("Request to a removed agent: %v, want ErrNoRecipient", err)
	}
	if _, err := caller.Send(e.ctx(), worker.ID(), "ping", nil); err != nil {
		e.t.Errorf("Send to a removed agent: %v, want no error", err)
	}
	if _, err := worker.Send(e.ctx(), caller.ID(), "ping", nil); !errors.Is(err, agency.ErrNotAdded) {
		e.t.Errorf("Send from a removed agent: %v, want ErrNotAdded", err)
	}

	e.add(worker)
	if v := call[string](e, caller, worker.ID(), "ping", nil); v != "pong" {
		e.t.Errorf("ping after re-adding = %q, want pong", v)
	}
	if h := call[helpMap](e, worker, caller.ID(), agency.HelpAction, nil); len(h) != 0 {
		e.t.Errorf("help from the re-added agent to %s lists %v, want nothing", caller.ID(), helpNames(h))
	}
	if a, r := l.added.Load(), l.removing.Load(); a != 2 || r != 1 {
		e.t.Errorf("AfterAdd ran %d times and BeforeRemove %d, want 2 and 1", a, r)
	}
}

// beforeRemove is a hook value that signals when BeforeRemove runs.
type beforeRemove chan struct{}

func (b beforeRemove) BeforeRemove(context.Context) { signal(b, struct{}{}) }

// Remove drains: the messages queued for the agent are handled and its
// running action finishes before Remove returns.
func testRemoveDrains(e *env) {
	removing := make(beforeRemove, 1)
	worker := e.newAgent("Worker", agency.Hooks(removing))
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	var finished atomic.Bool
	agency.Handle(worker, "hold", func(context.Context, empty) (bool, error) {
		signal(held, struct{}{})
		select {
		case <-release:
		case <-e.stop:
		}
		finished.Store(true)
		return true, nil
	})
	var done record[int]
	agency.Handle(worker, "work", func(_ context.Context, args numArgs) (bool, error) {
		done.add(args.N)
		return true, nil
	})
	sender := e.newAgent("Sender")
	e.add(worker, sender)

	e.send(sender, worker.ID(), "hold", nil)
	want := []int{1, 2, 3, 4, 5}
	for _, n := range want {
		e.send(sender, worker.ID(), "work", numArgs{N: n})
	}
	receive(e.t, held, "the first action to start")

	removed := make(chan error, 1)
	ctx := e.ctx()
	go func() { removed <- e.sp.Remove(ctx, worker.ID()) }()
	receive(e.t, removing, "Remove to call BeforeRemove")
	select {
	case err := <-removed:
		e.t.Fatalf("Remove returned (%v) while an action was still running", err)
	default:
	}
	if got := done.all(); len(got) != 0 {
		e.t.Fatalf("queued actions ran (%v) while the first was still running", got)
	}
	close(release)
	if err := receive(e.t, removed, "Remove to return"); err != nil {
		e.t.Fatalf("Remove: %v", err)
	}
	if !finished.Load() {
		e.t.Error("Remove returned before the running action finished")
	}
	if got := done.all(); !slices.Equal(got, want) {
		e.t.Errorf("when Remove returned the queued actions had run for %v, want %v", got, want)
	}
}

// actionHooks is a hook value that records BeforeAction and AfterAction
// calls.
type actionHooks struct {
	before record[hookCall]
	after  record[hookCall]
}

// hookCall is one call of BeforeAction or AfterAction.
type hookCall struct {
	msg    *agency.Message
	ctxMsg *agency.Message // what MessageFrom(ctx) returned
	agent  *agency.Agent   // what AgentFrom(ctx) returned
	value  any
	err    error
}

var (
	_ agency.BeforeActioner = (*actionHooks)(nil)
	_ agency.AfterActioner  = (*actionHooks)(nil)
)

func (h *actionHooks) BeforeAction(ctx context.Context, m *agency.Message) {
	h.before.add(hookCall{msg: m, ctxMsg: agency.MessageFrom(ctx), agent: agency.AgentFrom(ctx)})
}

func (h *actionHooks) AfterAction(ctx context.Context, m *agency.Message, value any, err error) {
	h.after.add(hookCall{msg: m, ctxMsg: agency.MessageFrom(ctx), agent: agency.AgentFrom(ctx), value: value, err: err})
}

// BeforeAction sees each permitted action's message; AfterAction sees the
// message with the value or the error its caller receives. Neither runs for
// a denied action.
func testActionHooks(e *env) {
	h := &actionHooks{}
	target := e.newAgent("Target", agency.Hooks(h))
	agency.Handle(target, "add", add)
	agency.Handle(target, "fail", func(context.Context, empty) (string, error) {
		return "", errors.New("something went wrong")
	})
	agency.Handle(target, "secret", pong, agency.AccessForAll(agency.Denied))
	caller := e.newAgent("Caller")
	e.add(target, caller)

	addMsg := &agency.Message{To: target.ID(), Action: "add", Args: addArgs{A: 1, B: 2}}
	if _, err := caller.RequestMessage(e.ctx(), addMsg); err != nil {
		e.t.Fatal(err)
	}
	failMsg := &agency.Message{To: target.ID(), Action: "fail"}
	if _, err := caller.RequestMessage(e.ctx(), failMsg); !errors.Is(err, agency.ErrActionFailed) {
		e.t.Fatalf("fail: %v, want action_failed", err)
	}
	_, err := e.request(caller, target.ID(), "secret", nil)
	wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	// A call's hooks run before it is answered, so hook calls for the denied
	// action, had there been any, would be recorded by now.
	before := h.before.waitLen(e.t, "BeforeAction calls", 2)
	after := h.after.waitLen(e.t, "AfterAction calls", 2)

	for i, want := range []*agency.Message{addMsg, failMsg} {
		for _, c := range []struct {
			hook  string
			calls []hookCall
		}{{"BeforeAction", before}, {"AfterAction", after}} {
			got := c.calls[i]
			if got.msg.ID != want.ID || got.msg.Action != want.Action || got.msg.From != caller.ID() {
				e.t.Errorf("%s call %d saw %v, want %s from %s with id %s", c.hook, i+1, got.msg, want.Action, caller.ID(), want.ID)
			}
			if got.ctxMsg != got.msg || got.agent != target {
				e.t.Errorf("%s call %d: MessageFrom(ctx) = %v and AgentFrom(ctx) = %v, want the message and %s", c.hook, i+1, got.ctxMsg, got.agent, target.ID())
			}
		}
	}
	if len(before) != 2 || len(after) != 2 {
		e.t.Errorf("BeforeAction ran %d times and AfterAction %d, want 2 each (none for the denied action)", len(before), len(after))
	}
	if a := after[0]; a.err != nil || !sameJSON(e.t, a.value, 3) {
		e.t.Errorf("AfterAction for add saw value %v and error %v, want 3 and none", a.value, a.err)
	}
	if a := after[1]; !errors.Is(a.err, agency.ErrActionFailed) {
		e.t.Errorf("AfterAction for fail saw error %v (%T), want the action_failed its caller receives", a.err, a.err)
	} else {
		mustContain(e.t, "AfterAction error", a.err.Error(), "something went wrong")
	}
}

// Close removes every agent (running BeforeRemove), is idempotent, and
// makes Add fail with ErrClosed.
func testClose(e *env) {
	l := &lifecycle{}
	a := e.newAgent("Member", agency.Hooks(l))
	b := e.newAgent("Member")
	e.add(a, b)

	if err := e.sp.Close(e.ctx()); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	if n := l.removing.Load(); n != 1 {
		e.t.Errorf("BeforeRemove ran %d times during Close, want 1", n)
	}
	if _, err := a.Send(e.ctx(), b.ID(), "ping", nil); !errors.Is(err, agency.ErrNotAdded) {
		e.t.Errorf("Send after Close: %v, want ErrNotAdded", err)
	}
	if err := e.sp.Close(e.ctx()); err != nil {
		e.t.Errorf("second Close: %v, want nil", err)
	}
	if err := e.sp.Add(e.ctx(), e.newAgent("Late")); !errors.Is(err, space.ErrClosed) {
		e.t.Errorf("Add after Close: %v, want ErrClosed", err)
	}
	if err := e.sp.Add(e.ctx(), a); !errors.Is(err, space.ErrClosed) {
		e.t.Errorf("Add of a removed agent after Close: %v, want ErrClosed", err)
	}
}
