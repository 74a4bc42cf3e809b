package agency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// removeCounter counts BeforeRemove calls.
type removeCounter struct{ n atomic.Int32 }

func (r *removeCounter) BeforeRemove(context.Context) { r.n.Add(1) }

// A space may run the BeforeRemove hook itself, before Close; Close then
// does not run it again. Either is where Leaving turns true.
func TestConnBeforeRemoveOnce(t *testing.T) {
	for _, early := range []bool{false, true} {
		hook := &removeCounter{}
		a := agency.MustNewAgent("Leaver", agency.Hooks(hook))
		c, err := driver.Connect(a, driver.RouterFunc(func(context.Context, *agency.Message) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		c.Added(context.Background())
		if c.Leaving() {
			t.Fatal("Leaving before BeforeRemove or Close")
		}
		if early {
			c.BeforeRemove(context.Background())
			if !c.Leaving() {
				t.Error("not Leaving after BeforeRemove")
			}
			c.BeforeRemove(context.Background())
			if n := hook.n.Load(); n != 1 {
				t.Fatalf("BeforeRemove twice ran the hook %d times, want 1", n)
			}
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !c.Leaving() {
			t.Error("not Leaving after Close")
		}
		if n := hook.n.Load(); n != 1 {
			t.Errorf("early=%v: the hook ran %d times, want 1", early, n)
		}
	}
}

// FailRequests ends the Requests waiting for their responses with the
// space's error, at once; a Request made afterwards waits for its response
// as usual.
func TestConnFailRequests(t *testing.T) {
	a, c, sent := connectAsker(t, 2)
	c.Added(context.Background())
	t.Cleanup(func() { _ = c.Close(context.Background()) })

	lost := errors.New("the way back is lost")
	errs := make(chan error, 1)
	go func() {
		_, err := a.Request(callCtx(t), "Other", "ask", nil)
		errs <- err
	}()
	<-sent // the request is out, and waits
	c.FailRequests(lost)
	if err := <-errs; !errors.Is(err, lost) {
		t.Fatalf("Request after FailRequests: %v, want the space's error", err)
	}

	answers := make(chan *agency.Message, 1)
	go func() {
		m, _ := a.Request(callCtx(t), "Other", "ask", nil)
		answers <- m
	}()
	req := <-sent
	if err := c.Deliver(&agency.Message{To: "Asker", From: "Other", ID: "r", ParentID: req.ID, Action: agency.ResponseAction, Args: 1}); err != nil {
		t.Fatal(err)
	}
	if m := <-answers; m == nil || m.ParentID != req.ID {
		t.Fatalf("a request made after FailRequests returned %v, want its response", m)
	}
}

// FailRequestsTo ends the Requests waiting for one agent's responses, and
// leaves those to another waiting; with more than fit in the short list
// too.
func TestConnFailRequestsTo(t *testing.T) {
	for _, n := range []int{2, 40} {
		a, c, sent := connectAsker(t, 2*n)
		c.Added(context.Background())
		lost := errors.New("the way to Broken is lost")
		errs := map[string]chan error{"Broken": make(chan error, n), "Fine": make(chan error, n)}
		for range n {
			for to, ch := range errs {
				go func() {
					_, err := a.Request(callCtx(t), to, "ask", nil)
					ch <- err
				}()
			}
		}
		reqs := map[string][]*agency.Message{}
		for range 2 * n {
			m := <-sent
			reqs[m.To] = append(reqs[m.To], m)
		}
		c.FailRequestsTo("Broken", lost)
		for range n {
			if err := <-errs["Broken"]; !errors.Is(err, lost) {
				t.Fatalf("%d requests: a Request to Broken after FailRequestsTo: %v, want the space's error", n, err)
			}
		}
		for _, req := range reqs["Fine"] {
			if err := c.Deliver(&agency.Message{To: "Asker", From: "Fine", ID: agency.NewID(), ParentID: req.ID, Action: agency.ResponseAction, Args: 1}); err != nil {
				t.Fatal(err)
			}
		}
		for range n {
			if err := <-errs["Fine"]; err != nil {
				t.Fatalf("%d requests: a Request to Fine after FailRequestsTo(Broken): %v, want its response", n, err)
			}
		}
		_ = c.Close(context.Background())
	}
}

// CloseAll takes every agent out as Close does: an idle one, one whose
// BeforeRemove hook runs, one with messages queued (handled before it
// leaves), and one closed before; afterwards each can join a space again.
func TestCloseAll(t *testing.T) {
	ctx := context.Background()
	route := driver.RouterFunc(func(context.Context, *agency.Message) error { return nil })
	hook := &removeCounter{}
	var handled atomic.Int32
	tick := func(context.Context, struct{}) (struct{}, error) {
		handled.Add(1)
		return struct{}{}, nil
	}
	idle := agency.MustNewAgent("Idle")
	hooked := agency.MustNewAgent("Hooked", agency.Hooks(hook))
	busy := agency.MustNewAgent("Busy")
	agency.Handle(busy, "tick", tick)
	closed := agency.MustNewAgent("Closed")
	var conns []*driver.Conn
	for _, a := range []*agency.Agent{idle, hooked, busy, closed} {
		c, err := driver.Connect(a, route)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i := range 3 { // queued before the agent is Added: nothing has run them
		if err := conns[2].Deliver(&agency.Message{To: "Busy", From: "X", ID: "m" + string(rune('0'+i)), Action: "tick", NoReply: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		c.Added(ctx)
	}
	if err := conns[3].Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := driver.CloseAll(ctx, conns); err != nil {
		t.Fatal(err)
	}
	if n := hook.n.Load(); n != 1 {
		t.Errorf("BeforeRemove ran %d times, want 1", n)
	}
	if n := handled.Load(); n != 3 {
		t.Errorf("%d queued messages handled, want 3", n)
	}
	for _, c := range conns {
		if err := c.Deliver(&agency.Message{To: c.Agent().ID(), From: "X", ID: "late", Action: "tick"}); !errors.Is(err, agency.ErrNoRecipient) {
			t.Errorf("%s: Deliver after CloseAll: %v, want ErrNoRecipient", c.Agent().ID(), err)
		}
		if _, err := driver.Connect(c.Agent(), route); err != nil {
			t.Errorf("%s: Connect after CloseAll: %v", c.Agent().ID(), err)
		}
	}
}

// A Request whose agent leaves the space while it waits ends with
// ErrNotAdded at once, not at its deadline.
func TestConnRequestEndsWhenRemoved(t *testing.T) {
	a, c, sent := connectAsker(t, 1)
	c.Added(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := a.Request(context.Background(), "Other", "ask", nil)
		errs <- err
	}()
	<-sent // the request is out, and waits
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, agency.ErrNotAdded) {
		t.Fatalf("Request of a removed agent: %v, want ErrNotAdded", err)
	}
}

// The handlers' context ends when the agent is removed: whether the
// handler waits on it, asks for its error only, or derives contexts of its
// own from it, before or after it has ended.
func TestConnHandlerContextEndsOnRemoval(t *testing.T) {
	type seen struct {
		errBefore error
		done      <-chan struct{}
		child     context.Context
		cancel    context.CancelFunc // called once the parent has ended it
		afterFunc chan struct{}
	}
	got := make(chan seen, 1)
	a := agency.MustNewAgent("Worker")
	agency.Handle(a, "work", func(ctx context.Context, _ struct{}) (struct{}, error) {
		s := seen{errBefore: ctx.Err(), afterFunc: make(chan struct{})}
		s.child, s.cancel = context.WithCancel(ctx)
		s.done = ctx.Done()
		context.AfterFunc(ctx, func() { close(s.afterFunc) })
		got <- s
		return struct{}{}, nil
	})
	var kept context.Context // a handler's context kept past its return
	agency.Handle(a, "keep", func(ctx context.Context, _ struct{}) (struct{}, error) {
		kept = ctx
		return struct{}{}, nil
	})
	c, err := driver.Connect(a, driver.RouterFunc(func(context.Context, *agency.Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	c.Added(context.Background())
	if err := c.Deliver(&agency.Message{To: "Worker", From: "Boss", ID: "k", Action: "keep", NoReply: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.Deliver(&agency.Message{To: "Worker", From: "Boss", ID: "w", Action: "work", NoReply: true}); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.errBefore != nil {
		t.Errorf("Err while the agent is in the space: %v", s.errBefore)
	}
	select {
	case <-s.done:
		t.Fatal("the handlers' context ended before the agent left")
	default:
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-s.done
	<-s.child.Done()
	s.cancel()
	<-s.afterFunc
	if err := kept.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err of a kept context after removal, never waited on: %v, want context.Canceled", err)
	}
	<-kept.Done()
	child, cancel := context.WithCancel(kept)
	defer cancel()
	<-child.Done()
}

type askArgs struct{ N int }

// Many Requests waiting at once each get their own response, in whatever
// order the responses come, and only from the agent asked; so do a few
// afterwards.
func TestConnManyRequestsWaiting(t *testing.T) {
	for _, n := range []int{40, 3} {
		a, c, sent := connectAsker(t, n)
		c.Added(context.Background())
		type result struct {
			i   int
			got int
			err error
		}
		results := make(chan result, n)
		for i := range n {
			go func() {
				got, err := agency.Call[int](callCtx(t), a, "Other", "ask", askArgs{N: i})
				results <- result{i, got, err}
			}()
		}
		reqs := make([]*agency.Message, 0, n)
		for range n {
			select {
			case m := <-sent:
				reqs = append(reqs, m)
			case r := <-results:
				t.Fatalf("request %d ended before its response: %d, %v", r.i, r.got, r.err)
			}
		}
		for k := len(reqs) - 1; k >= 0; k-- {
			req := reqs[k]
			// An answer from another agent answers nothing (it goes to the
			// hooks, of which Asker has none).
			forged := &agency.Message{To: "Asker", From: "Mallory", ID: "f" + req.ID, ParentID: req.ID, Action: agency.ResponseAction, Args: -1}
			if err := c.Deliver(forged); err != nil {
				t.Fatal(err)
			}
			r := &agency.Message{To: "Asker", From: "Other", ID: "r" + req.ID, ParentID: req.ID, Action: agency.ResponseAction, Args: req.Args.(askArgs).N}
			if err := c.Deliver(r); err != nil {
				t.Fatal(err)
			}
		}
		for range n {
			r := <-results
			if r.err != nil || r.got != r.i {
				t.Errorf("%d requests: request %d got %d, %v", n, r.i, r.got, r.err)
			}
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// connectAsker connects an agent "Asker" to a router that keeps what it
// sends in a channel of room n.
func connectAsker(t *testing.T, n int) (*agency.Agent, *driver.Conn, chan *agency.Message) {
	t.Helper()
	sent := make(chan *agency.Message, n)
	a := agency.MustNewAgent("Asker")
	c, err := driver.Connect(a, driver.RouterFunc(func(_ context.Context, m *agency.Message) error {
		sent <- m
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return a, c, sent
}

// An agent's first Conn is made in place, in the agent; one that joins
// again gets a new one, so that whoever still holds the first finds it
// closed for good and reaches nobody through it.
func TestConnAfterRejoining(t *testing.T) {
	ctx := context.Background()
	route := driver.RouterFunc(func(context.Context, *agency.Message) error { return nil })
	var handled atomic.Int32
	a := agency.MustNewAgent("Rejoiner")
	agency.Handle(a, "tick", func(context.Context, struct{}) (struct{}, error) {
		handled.Add(1)
		return struct{}{}, nil
	})
	tick := func(id string) *agency.Message {
		return &agency.Message{To: "Rejoiner", From: "X", ID: id, Action: "tick", NoReply: true}
	}
	var conns []*driver.Conn
	for range 3 {
		c, err := driver.Connect(a, route)
		if err != nil {
			t.Fatal(err)
		}
		for _, old := range conns {
			if old == c {
				t.Fatal("Connect after leaving returned a Conn the agent had before")
			}
			if err := old.Deliver(tick("old")); !errors.Is(err, agency.ErrNoRecipient) {
				t.Fatalf("Deliver to an old Conn: %v, want ErrNoRecipient", err)
			}
		}
		if c.Agent() != a {
			t.Fatalf("the Conn's agent is %v", c.Agent())
		}
		c.Added(ctx)
		if err := c.Deliver(tick("new")); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if n := handled.Load(); n != 3 {
		t.Errorf("%d ticks handled, want 3", n)
	}
}

// Connects of one agent that race: one wins, the others fail with
// ErrAlreadyAdded, whether the agent has joined before or not.
func TestConnectRace(t *testing.T) {
	ctx := context.Background()
	route := driver.RouterFunc(func(context.Context, *agency.Message) error { return nil })
	for round := range 50 {
		a := agency.MustNewAgent("Racer")
		if round%2 == 1 { // one that has been in a space and left
			c, err := driver.Connect(a, route)
			if err != nil {
				t.Fatal(err)
			}
			c.Added(ctx)
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		const n = 4
		conns := make(chan *driver.Conn, n)
		errs := make(chan error, n)
		start := make(chan struct{})
		for range n {
			go func() {
				<-start
				c, err := driver.Connect(a, route)
				if err != nil {
					errs <- err
					return
				}
				conns <- c
			}()
		}
		close(start)
		var won *driver.Conn
		for range n {
			select {
			case c := <-conns:
				if won != nil {
					t.Fatal("two Connects of one agent succeeded")
				}
				won = c
			case err := <-errs:
				if !errors.Is(err, agency.ErrAlreadyAdded) {
					t.Fatalf("Connect: %v, want ErrAlreadyAdded", err)
				}
			}
		}
		if won == nil {
			t.Fatal("no Connect succeeded")
		}
		won.Added(ctx)
		if err := won.Deliver(&agency.Message{To: "Racer", From: "X", ID: "m", Action: "help"}); err != nil {
			t.Fatalf("Deliver to the winner's Conn: %v", err)
		}
		if err := won.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
