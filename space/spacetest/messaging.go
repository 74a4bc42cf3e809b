package spacetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// messagingTests cover sending, requesting, responses, errors and
// broadcasts: the rows of the semantics table.
var messagingTests = []test{
	{"SendAndReply", testSendAndReply},
	{"SendAndError", testSendAndError},
	{"SendAndRespond", testSendAndRespond},
	{"SendFromAction", testSendFromAction},
	{"RequestAndReply", testRequestAndReply},
	{"RequestAndRespond", testRequestAndRespond},
	{"RequestAndError", testRequestAndError},
	{"RequestTimeout", testRequestTimeout},
	{"RequestCancelled", testRequestCancelled},
	{"RequestDeadline", testRequestDeadline},
	{"ToAbsentAgent", testToAbsentAgent},
	{"UnknownActionPointToPoint", testUnknownActionPointToPoint},
	{"UnknownActionBroadcast", testUnknownActionBroadcast},
	{"OwnBroadcasts", testOwnBroadcasts},
	{"MetaUnchanged", testMetaUnchanged},
	{"InvalidArgs", testInvalidArgs},
	{"HandlerPanic", testHandlerPanic},
	{"SendToAbsentAgentReported", testSendToAbsentAgentReported},
	{"HandlerErrorText", testHandlerErrorText},
	{"AnyIsJSONShaped", testAnyIsJSONShaped},
	{"Traceparent", testTraceparent},
	{"TracePropagator", testTracePropagator},
}

// Send → the handler's return value reaches the sender's ValueHandler, as a
// [response] whose parent_id is the sent id.
func testSendAndReply(e *env) {
	calc := e.newAgent("Calculator")
	agency.Handle(calc, "add", add)
	in := &inbox{}
	sender := e.newAgent("Sender", agency.Hooks(in))
	e.add(calc, sender)

	id := e.send(sender, calc.ID(), "add", map[string]any{"a": 1, "b": 2})
	r := in.repliesTo(e.t, id, 1)[0]
	if r.err != nil {
		e.t.Fatalf("got an error, want a value: %v", r.err)
	}
	m := r.msg
	if m.Action != agency.ResponseAction || m.From != calc.ID() || m.To != sender.ID() || m.ParentID != id {
		e.t.Errorf("response %v: want a [response] from %s to %s with parent_id %s", m, calc.ID(), sender.ID(), id)
	}
	if m.ID == "" || m.ID == id {
		e.t.Errorf("response id %q: want an id of its own", m.ID)
	}
	if v := value[float64](e.t, m); v != 3 {
		e.t.Errorf("value %v, want 3", v)
	}
}

// Send → a handler error reaches the sender's ErrorHandler as action_failed.
func testSendAndError(e *env) {
	var ran atomic.Int32
	target := e.newAgent("Target")
	agency.Handle(target, "fail", func(context.Context, empty) (string, error) {
		ran.Add(1)
		return "", errors.New("something went wrong")
	})
	in := &inbox{}
	sender := e.newAgent("Sender", agency.Hooks(in))
	e.add(target, sender)

	id := e.send(sender, target.ID(), "fail", nil)
	r := in.repliesTo(e.t, id, 1)[0]
	if r.err == nil {
		e.t.Fatalf("got a value %v, want an error", r.msg)
	}
	if r.msg.Action != agency.ErrorAction || r.msg.From != target.ID() || r.msg.To != sender.ID() {
		e.t.Errorf("error response %v: want an [error] from %s to %s", r.msg, target.ID(), sender.ID())
	}
	ae := wantActionError(e.t, r.err, agency.ErrActionFailed, agency.TypeActionFailed)
	mustContain(e.t, "error text", ae.Text, "something went wrong")
	if err := r.msg.Err(); !errors.Is(err, agency.ErrActionFailed) {
		e.t.Errorf("Message.Err() = %v, want action_failed", err)
	}
	if n := ran.Load(); n != 1 {
		e.t.Errorf("handler ran %d times, want 1", n)
	}
}

// count responds 1, 2, …, n-1 with Respond and returns n.
func count(ctx context.Context, args numArgs) (int, error) {
	for i := 1; i < args.N; i++ {
		if err := agency.Respond(ctx, i); err != nil {
			return 0, fmt.Errorf("Respond(%d): %w", i, err)
		}
	}
	return args.N, nil
}

// Several responses to one Send (agency.Respond, then the return value) all
// reach the sender's ValueHandler, in order, each with the sent id as
// parent_id and an id of its own.
func testSendAndRespond(e *env) {
	counter := e.newAgent("Counter")
	agency.Handle(counter, "count", count)
	in := &inbox{}
	sender := e.newAgent("Sender", agency.Hooks(in))
	e.add(counter, sender)

	id := e.send(sender, counter.ID(), "count", numArgs{N: 3})
	rs := in.repliesTo(e.t, id, 3)
	var got []int
	ids := map[string]bool{id: true}
	for _, r := range rs {
		if r.err != nil {
			e.t.Fatalf("got an error: %v", r.err)
		}
		got = append(got, value[int](e.t, r.msg))
		if ids[r.msg.ID] {
			e.t.Errorf("response id %q is not unique", r.msg.ID)
		}
		ids[r.msg.ID] = true
	}
	if !slices.Equal(got, []int{1, 2, 3}) {
		e.t.Errorf("values %v, want [1 2 3]", got)
	}
}

// An action may Send to its sender: operand/agency's "send and reply". The
// message arrives as an ordinary action call, from the replying agent.
func testSendFromAction(e *env) {
	var heard record[note]
	receiver := e.newAgent("Receiver")
	agency.Handle(receiver, "greet", func(ctx context.Context, _ empty) (bool, error) {
		from := agency.MessageFrom(ctx).From
		_, err := agency.AgentFrom(ctx).Send(ctx, from, "note", textArgs{Text: "Hello, " + from + "!"})
		return err == nil, err
	})
	sender := e.newAgent("Sender")
	handleNote(sender, &heard)
	e.add(receiver, sender)

	e.send(sender, receiver.ID(), "greet", nil)
	n := heard.waitLen(e.t, "the greeting", 1)[0]
	want := note{receiver: sender.ID(), from: receiver.ID(), to: sender.ID(), text: "Hello, " + sender.ID() + "!"}
	if n != want {
		e.t.Errorf("got %+v, want %+v", n, want)
	}
}

// Request returns the handler's value.
func testRequestAndReply(e *env) {
	calc := e.newAgent("Calculator")
	agency.Handle(calc, "add", add)
	caller := e.newAgent("Caller")
	e.add(calc, caller)

	if v := call[float64](e, caller, calc.ID(), "add", addArgs{A: 1, B: 2}); v != 3 {
		e.t.Errorf("add(1, 2) = %v, want 3", v)
	}
	m, err := e.request(caller, calc.ID(), "add", map[string]any{"a": 0.5, "b": 0.25})
	if err != nil {
		e.t.Fatal(err)
	}
	if m.Action != agency.ResponseAction || m.From != calc.ID() || m.To != caller.ID() || m.ParentID == "" {
		e.t.Errorf("response %v: want a [response] from %s to %s with a parent_id", m, calc.ID(), caller.ID())
	}
	if v := value[float64](e.t, m); v != 0.75 {
		e.t.Errorf("add(0.5, 0.25) = %v, want 0.75", v)
	}
}

// Request returns the first of several responses; the later ones reach the
// ValueHandler.
func testRequestAndRespond(e *env) {
	counter := e.newAgent("Counter")
	agency.Handle(counter, "count", count)
	in := &inbox{}
	caller := e.newAgent("Caller", agency.Hooks(in))
	e.add(counter, caller)

	m, err := e.request(caller, counter.ID(), "count", numArgs{N: 3})
	if err != nil {
		e.t.Fatal(err)
	}
	if v := value[int](e.t, m); v != 1 {
		e.t.Errorf("Request returned %d, want the first response, 1", v)
	}
	rs := in.repliesTo(e.t, m.ParentID, 2)
	var got []int
	for _, r := range rs {
		if r.err != nil {
			e.t.Fatalf("got an error: %v", r.err)
		}
		got = append(got, value[int](e.t, r.msg))
	}
	if !slices.Equal(got, []int{2, 3}) {
		e.t.Errorf("later responses %v, want [2 3]", got)
	}
}

// Request returns a handler's error, and an error sent with RespondError, as
// action_failed.
func testRequestAndError(e *env) {
	target := e.newAgent("Target")
	agency.Handle(target, "fail", func(context.Context, empty) (string, error) {
		return "", errors.New("something went wrong")
	})
	agency.Handle(target, "refuse", func(ctx context.Context, _ empty) (string, error) {
		if err := agency.RespondError(ctx, errors.New("not today")); err != nil {
			return "", err
		}
		return "refused", nil
	})
	caller := e.newAgent("Caller")
	e.add(target, caller)

	m, err := e.request(caller, target.ID(), "fail", nil)
	if m != nil {
		e.t.Errorf("Request returned a message %v along with its error", m)
	}
	ae := wantActionError(e.t, err, agency.ErrActionFailed, agency.TypeActionFailed)
	mustContain(e.t, "error text", ae.Text, "something went wrong")

	_, err = e.request(caller, target.ID(), "refuse", nil)
	ae = wantActionError(e.t, err, agency.ErrActionFailed, agency.TypeActionFailed)
	mustContain(e.t, "error text", ae.Text, "not today")
}

// blocker registers "wait" on a: it signals started, then blocks until
// release (or the end of the test) and returns "done".
func blocker(e *env, a *agency.Agent) (started chan struct{}, release chan struct{}) {
	started = make(chan struct{}, 1)
	release = make(chan struct{})
	agency.Handle(a, "wait", func(ctx context.Context, _ empty) (string, error) {
		signal(started, struct{}{})
		select {
		case <-release:
		case <-e.stop:
		}
		return "done", nil
	})
	return started, release
}

// A Request whose deadline passes is a timeout (ErrTimeout and
// context.DeadlineExceeded). A response that comes late is not mistaken for
// the answer to a later request.
func testRequestTimeout(e *env) {
	slow := e.newAgent("Slow")
	started, release := blocker(e, slow)
	agency.Handle(slow, "ping", pong)
	caller := e.newAgent("Caller")
	e.add(slow, caller)

	// The action blocks until released, so the deadline passes first
	// whatever the speed of the space; it is long enough only for the
	// request to be on its way.
	ctx, cancel := context.WithTimeout(context.Background(), timeout/40)
	defer cancel()
	m, err := caller.Request(ctx, slow.ID(), "wait", nil)
	if m != nil {
		e.t.Errorf("Request returned a message %v along with its error", m)
	}
	if !errors.Is(err, agency.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		e.t.Fatalf("error %v (%T): want ErrTimeout and context.DeadlineExceeded", err, err)
	}
	var ae *agency.ActionError
	if errors.As(err, &ae) && ae.Type != agency.TypeTimeout {
		e.t.Errorf("error type %q, want %q", ae.Type, agency.TypeTimeout)
	}
	receive(e.t, started, "the action to start")
	close(release)
	if v := call[string](e, caller, slow.ID(), "ping", nil); v != "pong" {
		e.t.Errorf("ping after a timed-out request = %q, want pong (not the late response)", v)
	}
}

// A Request whose context is cancelled returns context.Canceled, not a
// timeout.
func testRequestCancelled(e *env) {
	slow := e.newAgent("Slow")
	started, release := blocker(e, slow)
	caller := e.newAgent("Caller")
	e.add(slow, caller)
	defer close(release)

	ctx, cancel := context.WithCancel(e.ctx())
	defer cancel()
	go func() {
		select {
		case <-started:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := caller.Request(ctx, slow.ID(), "wait", nil)
	if !errors.Is(err, context.Canceled) {
		e.t.Fatalf("error %v (%T): want context.Canceled", err, err)
	}
	if errors.Is(err, agency.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		e.t.Errorf("error %v: a cancellation is not a timeout", err)
	}
}

// To an id no agent has: Send returns no error (actor model), Request fails
// fast with ErrNoRecipient.
func testToAbsentAgent(e *env) {
	caller := e.newAgent("Caller")
	e.add(caller)
	ghost := e.id("Ghost")

	if _, err := caller.Send(e.ctx(), ghost, "ping", nil); err != nil {
		e.t.Errorf("Send to an absent agent: %v, want no error", err)
	}
	_, err := e.request(caller, ghost, "ping", nil)
	if !errors.Is(err, agency.ErrNoRecipient) {
		e.t.Errorf("Request to an absent agent: %v (%T), want ErrNoRecipient", err, err)
	}
}

// An unknown action sent point to point is not_found, through Request and
// through the ErrorHandler.
func testUnknownActionPointToPoint(e *env) {
	target := e.newAgent("Target")
	agency.Handle(target, "ping", pong)
	in := &inbox{}
	caller := e.newAgent("Caller", agency.Hooks(in))
	e.add(target, caller)

	_, err := e.request(caller, target.ID(), "no_such_action", nil)
	ae := wantActionError(e.t, err, agency.ErrNotFound, agency.TypeNotFound)
	mustContain(e.t, "error text", ae.Text, "no_such_action")

	id := e.send(caller, target.ID(), "no_such_action", map[string]any{"x": 1})
	r := in.repliesTo(e.t, id, 1)[0]
	wantActionError(e.t, r.err, agency.ErrNotFound, agency.TypeNotFound)
	if r.msg.From != target.ID() {
		e.t.Errorf("not_found came from %s, want %s", r.msg.From, target.ID())
	}
}

// A broadcast of an action an agent lacks is ignored silently. Proof without
// sleeping: a second broadcast, of ping, follows the first through the same
// path to every agent, and each agent answers the two in order over the same
// path back; so once every ping answer has arrived, any [error] for the
// first broadcast would have arrived before it.
func testUnknownActionBroadcast(e *env) {
	in := &inbox{}
	sender := e.newAgent("Sender", agency.Hooks(in)) // receives its own broadcasts
	agency.Handle(sender, "ping", pong)
	others := []*agency.Agent{e.newAgent("Other"), e.newAgent("Other")}
	for _, a := range others {
		agency.Handle(a, "ping", pong)
	}
	e.add(sender, others[0], others[1])
	ids := []string{sender.ID(), others[0].ID(), others[1].ID()}

	unknown := e.send(sender, agency.Broadcast, "no_such_action", nil)
	ping := e.send(sender, agency.Broadcast, "ping", nil)
	all := in.waitFor(e.t, "every agent's answer to the ping broadcast", func(rs []reply) bool {
		for _, id := range ids {
			if !slices.ContainsFunc(answering(rs, ping), func(r reply) bool { return r.msg.From == id }) {
				return false
			}
		}
		return true
	})
	for _, r := range answering(all, unknown) {
		e.t.Errorf("a broadcast of an unknown action was answered: %v", r)
	}
	for _, r := range answering(all, ping) {
		if r.err != nil {
			e.t.Errorf("ping broadcast answered with an error: %v", r)
		}
	}
}

// Every agent receives a broadcast, the sender too, unless it was added with
// OwnBroadcasts(false).
func testOwnBroadcasts(e *env) {
	var got record[note]
	own := e.newAgent("Own")                                    // default: receives its own
	notOwn := e.newAgent("NotOwn", agency.OwnBroadcasts(false)) // does not
	other := e.newAgent("Other")
	for _, a := range []*agency.Agent{own, notOwn, other} {
		handleNote(a, &got)
	}
	e.add(own, notOwn, other)

	// notOwn's broadcast reaches the others first; own's broadcast goes out
	// only after that, so by the time notOwn has handled own's, it would have
	// handled its own had it been delivered.
	e.send(notOwn, agency.Broadcast, "note", textArgs{Text: "from notOwn"})
	got.waitFor(e.t, "the others to receive notOwn's broadcast", func(ns []note) bool {
		return len(notes(ns, own.ID(), notOwn.ID(), "from notOwn")) > 0 &&
			len(notes(ns, other.ID(), notOwn.ID(), "from notOwn")) > 0
	})
	e.send(own, agency.Broadcast, "note", textArgs{Text: "from own"})
	ns := got.waitFor(e.t, "everyone to receive own's broadcast", func(ns []note) bool {
		for _, a := range []*agency.Agent{own, notOwn, other} {
			if len(notes(ns, a.ID(), own.ID(), "from own")) == 0 {
				return false
			}
		}
		return true
	})
	if n := notes(ns, notOwn.ID(), notOwn.ID(), ""); len(n) > 0 {
		e.t.Errorf("an agent with own broadcasts off received its own broadcast: %+v", n)
	}
	for _, want := range []struct{ receiver, from, text string }{
		{own.ID(), notOwn.ID(), "from notOwn"},
		{other.ID(), notOwn.ID(), "from notOwn"},
		{own.ID(), own.ID(), "from own"},
		{notOwn.ID(), own.ID(), "from own"},
		{other.ID(), own.ID(), "from own"},
	} {
		n := notes(ns, want.receiver, want.from, want.text)
		if len(n) != 1 {
			e.t.Errorf("%s received %q from %s %d times, want once", want.receiver, want.text, want.from, len(n))
			continue
		}
		if n[0].to != agency.Broadcast {
			e.t.Errorf("broadcast received with to = %q, want %q", n[0].to, agency.Broadcast)
		}
	}
}

// Meta keys other than id and parent_id travel end to end unchanged; an id
// the sender chose is kept.
func testMetaUnchanged(e *env) {
	var seen record[*agency.Message]
	target := e.newAgent("Target")
	agency.Handle(target, "inspect", func(ctx context.Context, _ empty) (bool, error) {
		seen.add(agency.MessageFrom(ctx))
		return true, nil
	})
	in := &inbox{}
	sender := e.newAgent("Sender", agency.Hooks(in))
	e.add(target, sender)

	meta := map[string]any{
		"thoughts": "I should inspect it",
		"trace": map[string]any{
			"span":    7,
			"ratio":   0.5,
			"sampled": true,
			"tags":    []any{"x", "y"},
			"parent":  nil,
		},
		"big": int64(1) << 53,
	}
	msg := &agency.Message{To: target.ID(), Action: "inspect", Meta: meta}
	// A context without deadline: a deadline would add the framework's own
	// __meta__.deadline (see testRequestDeadline).
	if _, err := sender.RequestMessage(context.Background(), msg); err != nil {
		e.t.Fatal(err)
	}
	got := seen.waitLen(e.t, "the handler to run", 1)[0]
	if got.ID != msg.ID || got.From != sender.ID() || got.To != target.ID() || got.Action != "inspect" {
		e.t.Errorf("handler saw %v, want id %s from %s to %s", got, msg.ID, sender.ID(), target.ID())
	}
	if !sameJSON(e.t, got.Meta, meta) {
		e.t.Errorf("meta arrived as %#v, want %#v", normalise(e.t, got.Meta), normalise(e.t, meta))
	}
	if n, ok := got.Meta["big"]; ok && fmt.Sprint(n) != "9007199254740992" {
		e.t.Errorf("meta number 2^53 arrived as %v", n)
	}

	chosen := e.id("my-message")
	id, err := sender.SendMessage(e.ctx(), &agency.Message{
		To: target.ID(), ID: chosen, Action: "inspect", Meta: map[string]any{"thoughts": "again"},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if id != chosen {
		e.t.Errorf("SendMessage returned id %q, want the chosen %q", id, chosen)
	}
	if r := in.repliesTo(e.t, chosen, 1)[0]; r.err != nil {
		e.t.Errorf("got an error: %v", r.err)
	}
	got = seen.waitLen(e.t, "the handler to run again", 2)[1]
	if got.ID != chosen || !sameJSON(e.t, got.Meta, map[string]any{"thoughts": "again"}) {
		e.t.Errorf("handler saw %v, want id %s and thoughts \"again\"", got, chosen)
	}
}

// wordArgs has distinctive field names, so that an error text that names a
// field is told apart from one that happens to contain a letter.
type wordArgs struct {
	Left  float64 `json:"left"`
	Right float64 `json:"right"`
	Note  string  `json:"note,omitempty" validate:"max=8"`
}

// Arguments that fail to decode or validate are invalid_args, naming each
// bad field; the handler never runs.
func testInvalidArgs(e *env) {
	var ran atomic.Int32
	target := e.newAgent("Target")
	agency.Handle(target, "combine", func(_ context.Context, a wordArgs) (float64, error) {
		ran.Add(1)
		return a.Left + a.Right, nil
	})
	caller := e.newAgent("Caller")
	e.add(target, caller)

	for _, c := range []struct {
		name   string
		args   any
		fields []string
	}{
		{"missing field", map[string]any{"left": 1}, []string{"right"}},
		{"wrong type", map[string]any{"left": "one", "right": 2}, []string{"left"}},
		{"unknown field", map[string]any{"left": 1, "right": 2, "middle": 3}, []string{"middle"}},
		{"rule broken", map[string]any{"left": 1, "right": 2, "note": "far too long"}, []string{"note", "max"}},
		{"several", map[string]any{"left": "one", "note": "far too long"}, []string{"left", "right"}},
	} {
		_, err := e.request(caller, target.ID(), "combine", c.args)
		if err == nil {
			e.t.Errorf("%s: %v accepted", c.name, c.args)
			continue
		}
		var ae *agency.ActionError
		if !errors.Is(err, agency.ErrInvalidArgs) || !errors.As(err, &ae) || ae.Type != agency.TypeInvalidArgs {
			e.t.Errorf("%s: error %v (%T), want invalid_args", c.name, err, err)
			continue
		}
		mustContain(e.t, c.name+": error text", ae.Text, c.fields...)
	}
	if n := ran.Load(); n != 0 {
		e.t.Errorf("handler ran %d times on invalid arguments", n)
	}
	if v := call[float64](e, caller, target.ID(), "combine", map[string]any{"left": 1, "right": 2}); v != 3 {
		e.t.Errorf("combine = %v, want 3", v)
	}
	if n := ran.Load(); n != 1 {
		e.t.Errorf("handler ran %d times, want 1", n)
	}
}

// A handler that panics is action_failed, and the agent keeps serving.
func testHandlerPanic(e *env) {
	target := e.newAgent("Target")
	agency.Handle(target, "explode", func(context.Context, empty) (string, error) {
		panic("kaboom")
	})
	agency.Handle(target, "ping", pong)
	caller := e.newAgent("Caller")
	e.add(target, caller)

	for i := range 2 {
		_, err := e.request(caller, target.ID(), "explode", nil)
		ae := wantActionError(e.t, err, agency.ErrActionFailed, agency.TypeActionFailed)
		mustContain(e.t, "error text", ae.Text, "kaboom")
		if v := call[string](e, caller, target.ID(), "ping", nil); v != "pong" {
			e.t.Errorf("ping after panic %d = %q, want pong", i+1, v)
		}
	}
}

// A Request's deadline travels with it: the handler's context (and the
// permission hook's) ends when the caller stops waiting, so a handler, or a
// human asked for permission, does not work on for nobody.
func testRequestDeadline(e *env) {
	target := e.newAgent("Target")
	type seen struct {
		deadline time.Time
		ok       bool
		ended    bool
	}
	got := make(chan seen, 1)
	agency.Handle(target, "wait", func(ctx context.Context, _ empty) (bool, error) {
		dl, ok := ctx.Deadline()
		ended := false
		select {
		case <-ctx.Done():
			ended = true
		case <-e.stop:
		}
		signal(got, seen{dl, ok, ended})
		<-e.stop // answer only after the caller has surely given up
		return true, nil
	})
	caller := e.newAgent("Caller")
	e.add(target, caller)

	want := time.Now().Add(300 * time.Millisecond)
	ctx, cancel := context.WithDeadline(e.ctx(), want)
	defer cancel()
	if _, err := caller.Request(ctx, target.ID(), "wait", nil); !errors.Is(err, agency.ErrTimeout) {
		e.t.Fatalf("Request: %v, want a timeout", err)
	}
	s := receive(e.t, got, "the handler to see its context end")
	if !s.ok || !s.deadline.Equal(want) {
		e.t.Errorf("the handler's deadline is %v (set %v), want %v", s.deadline, s.ok, want)
	}
	if !s.ended {
		e.t.Error("the handler's context did not end at the request's deadline")
	}
}
