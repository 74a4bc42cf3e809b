package spacetest

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/seed72275b23/agency-go/agency"
)

// runtimeTests cover how an agent runs its actions, and what the framework
// guarantees about senders and message ids.
var runtimeTests = []test{
	{"OneAtATimeInOrder", testOneAtATime},
	{"Concurrency", testConcurrency},
	{"Sequence", testSequence},
	{"RequestInsideAction", testRequestInsideAction},
	{"ConcurrentRequests", testConcurrentRequests},
	{"ForgedSender", testForgedSender},
	{"ResponseFromAnotherAgent", testResponseFromAnotherAgent},
	{"UniqueIDs", testUniqueIDs},
}

// gauge tracks how many handlers run at once, and the most seen.
type gauge struct {
	now, max atomic.Int32
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// By default an agent runs one action at a time, in arrival order.
func testOneAtATime(e *env) {
	const n = 100
	var g gauge
	var order record[int]
	worker := e.newAgent("Worker")
	agency.Handle(worker, "step", func(_ context.Context, args numArgs) (bool, error) {
		g.enter()
		defer g.leave()
		runtime.Gosched() // give an overlapping handler, if any, its chance
		order.add(args.N)
		return true, nil
	})
	sender := e.newAgent("Sender")
	e.add(worker, sender)

	for i := range n {
		e.send(sender, worker.ID(), "step", numArgs{N: i})
	}
	got := order.waitLen(e.t, "every step to run", n)
	for i, v := range got {
		if v != i {
			e.t.Fatalf("steps ran in the order %v, want 0 … %d", got, n-1)
		}
	}
	if m := g.max.Load(); m != 1 {
		e.t.Errorf("up to %d actions ran at once, want 1", m)
	}
}

// Concurrency(4) runs up to four actions at once: four actions that block
// until released all start.
func testConcurrency(e *env) {
	const limit, sent = 4, 6
	var g gauge
	started := make(chan struct{}, sent)
	release := make(chan struct{})
	var finished record[int]
	worker := e.newAgent("Worker", agency.Concurrency(limit))
	agency.Handle(worker, "hold", func(_ context.Context, args numArgs) (bool, error) {
		g.enter()
		defer g.leave()
		started <- struct{}{}
		select {
		case <-release:
		case <-e.stop:
		}
		finished.add(args.N)
		return true, nil
	})
	sender := e.newAgent("Sender")
	e.add(worker, sender)

	for i := range sent {
		e.send(sender, worker.ID(), "hold", numArgs{N: i})
	}
	for range limit {
		receive(e.t, started, "four actions to run at once")
	}
	if got := finished.all(); len(got) != 0 {
		e.t.Fatalf("actions finished (%v) before they were released", got)
	}
	close(release)
	got := finished.waitLen(e.t, "every action to finish", sent)
	if len(got) != sent {
		e.t.Errorf("%d actions finished, want %d", len(got), sent)
	}
	if m := g.max.Load(); m != limit {
		e.t.Errorf("up to %d actions ran at once, want %d", m, limit)
	}
}

// Sequence(key) under Concurrency(4): messages with the same key run one
// at a time in arrival order, behind a blocked one of their key, while
// another key's messages and those without a key run past it.
func testSequence(e *env) {
	const n = 6
	type step struct {
		Key string
		N   int
	}
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	var g gauge
	var done record[step]
	worker := e.newAgent("Worker", agency.Concurrency(4), agency.Sequence(func(m *agency.Message) string {
		k, _ := m.Meta["key"].(string)
		return k
	}))
	agency.Handle(worker, "step", func(ctx context.Context, args numArgs) (bool, error) {
		key, _ := agency.MessageFrom(ctx).Meta["key"].(string)
		if key == "a" {
			g.enter()
			defer g.leave()
			if args.N == 0 {
				blocked <- struct{}{}
				select {
				case <-release:
				case <-e.stop:
				}
			}
		}
		done.add(step{key, args.N})
		return true, nil
	})
	sender := e.newAgent("Sender")
	e.add(worker, sender)
	send := func(key string, i int) {
		m := &agency.Message{To: worker.ID(), Action: "step", Args: numArgs{N: i}}
		if key != "" {
			m.Meta = map[string]any{"key": key}
		}
		if _, err := sender.SendMessage(e.ctx(), m); err != nil {
			e.t.Fatalf("Send step %s%d: %v", key, i, err)
		}
	}
	for i := range n {
		send("a", i)
	}
	receive(e.t, blocked, "the first step of sequence a to start")
	for i := range n {
		send("b", i)
		send("", i)
	}
	// of returns the numbers of key's steps, in the order they ran.
	of := func(steps []step, key string) []int {
		var ns []int
		for _, s := range steps {
			if s.Key == key {
				ns = append(ns, s.N)
			}
		}
		return ns
	}
	others := done.waitLen(e.t, "sequence b and the steps without a key to run past a's", 2*n)
	if a := of(others, "a"); len(a) > 0 {
		e.t.Fatalf("steps %v of sequence a ran while a0 was blocked", a)
	}
	if b := of(others, "b"); !slices.IsSorted(b) || len(b) != n {
		e.t.Errorf("sequence b ran in the order %v, want 0 … %d", b, n-1)
	}
	close(release)
	all := done.waitLen(e.t, "every step", 3*n)
	if a := of(all, "a"); !slices.IsSorted(a) || len(a) != n {
		e.t.Errorf("sequence a ran in the order %v, want 0 … %d", a, n-1)
	}
	if m := g.max.Load(); m != 1 {
		e.t.Errorf("up to %d steps of sequence a ran at once, want 1", m)
	}
}

// An action may Request another agent while it runs: the response does not
// wait behind the busy agent's queue.
func testRequestInsideAction(e *env) {
	calc := e.newAgent("Calculator")
	agency.Handle(calc, "add", add)
	relay := e.newAgent("Relay")
	agency.Handle(relay, "relay", func(ctx context.Context, args addArgs) (float64, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		sum, err := agency.Call[float64](ctx, agency.AgentFrom(ctx), calc.ID(), "add", args)
		return sum * 10, err
	})
	caller := e.newAgent("Caller")
	e.add(calc, relay, caller)

	if v := call[float64](e, caller, relay.ID(), "relay", addArgs{A: 1, B: 2}); v != 30 {
		e.t.Errorf("relay(1, 2) = %v, want 30", v)
	}
	if v := call[float64](e, caller, relay.ID(), "relay", addArgs{A: 2, B: 2}); v != 40 {
		e.t.Errorf("relay(2, 2) = %v, want 40", v)
	}
}

// Requests made at once from many goroutines each get their own answer.
func testConcurrentRequests(e *env) {
	const n = 20
	calc := e.newAgent("Calculator", agency.Concurrency(4))
	agency.Handle(calc, "add", add)
	caller := e.newAgent("Caller")
	e.add(calc, caller)

	ctx := e.ctx()
	errs := make([]error, n)
	sums := make([]float64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = agency.Call[float64](ctx, caller, calc.ID(), "add", addArgs{A: float64(i), B: 1000})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			e.t.Errorf("request %d: %v", i, errs[i])
		} else if sums[i] != float64(i+1000) {
			e.t.Errorf("request %d got %v, want %d", i, sums[i], i+1000)
		}
	}
}

// A message whose From names another agent is rejected with
// ErrForgedSender and never delivered; From set to the sender's own id is
// fine.
func testForgedSender(e *env) {
	var got record[note]
	target := e.newAgent("Target")
	handleNote(target, &got)
	sender, victim := e.newAgent("Sender"), e.newAgent("Victim")
	e.add(target, sender, victim)

	_, err := sender.SendMessage(e.ctx(), &agency.Message{
		To: target.ID(), From: victim.ID(), Action: "note", Args: textArgs{Text: "forged send"},
	})
	if !errors.Is(err, agency.ErrForgedSender) {
		e.t.Errorf("SendMessage with another agent's From: %v, want ErrForgedSender", err)
	}
	_, err = sender.RequestMessage(e.ctx(), &agency.Message{
		To: target.ID(), From: victim.ID(), Action: "note", Args: textArgs{Text: "forged request"},
	})
	if !errors.Is(err, agency.ErrForgedSender) {
		e.t.Errorf("RequestMessage with another agent's From: %v, want ErrForgedSender", err)
	}
	if _, err := sender.RequestMessage(e.ctx(), &agency.Message{
		To: target.ID(), From: sender.ID(), Action: "note", Args: textArgs{Text: "honest"},
	}); err != nil {
		e.t.Fatalf("RequestMessage with the sender's own From: %v", err)
	}
	// Messages from one sender arrive in order, and the forged ones were
	// sent first: the honest one's answer proves none of them came through.
	if ns := got.all(); len(ns) != 1 || ns[0].text != "honest" || ns[0].from != sender.ID() {
		e.t.Errorf("target received %+v, want only the honest note from %s", ns, sender.ID())
	}
}

// Every message gets a unique id, sends from concurrent goroutines and the
// responses to them alike.
func testUniqueIDs(e *env) {
	const goroutines, each = 4, 50
	echo := e.newAgent("Echo")
	agency.Handle(echo, "echo", func(_ context.Context, args numArgs) (int, error) { return args.N, nil })
	in := &inbox{}
	sender := e.newAgent("Sender", agency.Hooks(in))
	e.add(echo, sender)

	ctx := e.ctx()
	ids := make([][]string, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id, err := sender.Send(ctx, echo.ID(), "echo", numArgs{N: g*each + i})
				if err != nil {
					errs[g] = err
					return
				}
				ids[g] = append(ids[g], id)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
	sent := map[string]bool{}
	for _, list := range ids {
		for _, id := range list {
			if id == "" || sent[id] {
				e.t.Fatalf("message id %q is empty or repeated", id)
			}
			sent[id] = true
		}
	}
	rs := in.waitLen(e.t, "a response to every message", goroutines*each)
	seen := map[string]bool{}
	parents := map[string]bool{}
	for _, r := range rs {
		if r.err != nil {
			e.t.Fatalf("echo failed: %v", r.err)
		}
		id := r.msg.ID
		if id == "" || seen[id] || sent[id] {
			e.t.Fatalf("response id %q is empty or repeated", id)
		}
		seen[id] = true
		if !sent[r.msg.ParentID] || parents[r.msg.ParentID] {
			e.t.Fatalf("response %v answers no sent message, or one already answered", r)
		}
		parents[r.msg.ParentID] = true
	}
	if len(parents) != len(sent) {
		e.t.Errorf("%d of %d messages answered", len(parents), len(sent))
	}
}

// Only the recipient of a request answers it: a [response] that names the
// request's id but comes from a third agent goes to the requester's
// ValueHandler, and Request still returns the recipient's answer.
func testResponseFromAnotherAgent(e *env) {
	slow := e.newAgent("Slow")
	started, release := blocker(e, slow)
	in := &inbox{}
	caller := e.newAgent("Caller", agency.Hooks(in))
	meddler := e.newAgent("Meddler")
	e.add(slow, caller, meddler)

	id := e.id("request")
	type result struct {
		m   *agency.Message
		err error
	}
	got := make(chan result, 1)
	ctx := e.ctx()
	go func() {
		m, err := caller.RequestMessage(ctx, &agency.Message{To: slow.ID(), ID: id, Action: "wait"})
		got <- result{m, err}
	}()
	receive(e.t, started, "the request to reach its recipient")
	_, err := meddler.SendMessage(e.ctx(), &agency.Message{
		To: caller.ID(), Action: agency.ResponseAction, ParentID: id, Args: "meddled",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	select {
	case r := <-got:
		e.t.Fatalf("Request returned %v (error %v) from %s's response; want it to wait for %s", r.m, r.err, meddler.ID(), slow.ID())
	default:
	}
	stray := in.repliesTo(e.t, id, 1)[0]
	if stray.msg.From != meddler.ID() {
		e.t.Errorf("the ValueHandler got %v, want the response from %s", stray.msg, meddler.ID())
	}
	close(release)
	r := receive(e.t, got, "the answer to the request")
	if r.err != nil {
		e.t.Fatal(r.err)
	}
	if r.m.From != slow.ID() || value[string](e.t, r.m) != "done" {
		e.t.Errorf("Request returned %v, want \"done\" from %s", r.m, slow.ID())
	}
}
