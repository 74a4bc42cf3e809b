package agency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// seen is what one handler saw through its context.
type seen struct {
	ctx   context.Context
	agent *agency.Agent
	msg   *agency.Message
}

// A message that Send makes carries the context of its first recipient's
// handler; every other recipient of a broadcast gets one of its own. Each
// handler's context names its own agent and the message, before and after
// the others ran, and a context kept past its handler still does.
func TestSentMessageContext(t *testing.T) {
	ctx := context.Background()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(ctx) })

	var (
		mu   sync.Mutex
		got  = map[string][]seen{}
		done = make(chan struct{}, 16)
	)
	type tick struct {
		N int `json:"n"`
	}
	ids := []string{"A", "B", "C"}
	agents := map[string]*agency.Agent{}
	for _, id := range ids {
		a := agency.MustNewAgent(id)
		agency.Handle(a, "tick", func(ctx context.Context, _ tick) (struct{}, error) {
			mu.Lock()
			got[id] = append(got[id], seen{ctx, agency.AgentFrom(ctx), agency.MessageFrom(ctx)})
			mu.Unlock()
			done <- struct{}{}
			return struct{}{}, nil
		})
		agents[id] = a
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	sender := agency.MustNewAgent("Sender", agency.OwnBroadcasts(false))
	if err := sp.Add(ctx, sender); err != nil {
		t.Fatal(err)
	}
	wait := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("not handled")
			}
		}
	}

	id1, err := sender.Send(ctx, "A", "tick", tick{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	wait(1)
	idAll, err := sender.Send(ctx, agency.Broadcast, "tick", tick{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	wait(len(ids))

	mu.Lock()
	defer mu.Unlock()
	ctxs := map[context.Context]bool{}
	for _, id := range ids {
		want := 1
		if id == "A" {
			want = 2
		}
		if len(got[id]) != want {
			t.Fatalf("%s handled %d messages, want %d", id, len(got[id]), want)
		}
		for _, s := range got[id] {
			// Read again now, after every handler has run: a context
			// shared by two recipients would name the last one.
			if a := agency.AgentFrom(s.ctx); a != agents[id] || s.agent != agents[id] {
				t.Errorf("%s's handler context names agent %v", id, a)
			}
			if m := agency.MessageFrom(s.ctx); m != s.msg || m == nil {
				t.Errorf("%s's handler context: message changed from %p to %p", id, s.msg, m)
			}
			if ctxs[s.ctx] {
				t.Errorf("%s's handler shares its context with another handler", id)
			}
			ctxs[s.ctx] = true
			if err := s.ctx.Err(); err != nil {
				t.Errorf("%s's handler context: %v while the agent is in the space", id, err)
			}
		}
	}
	if m := got["A"][0].msg; m.ID != id1 || m.Action != "tick" || m.From != "Sender" {
		t.Errorf("A's first message: %+v, want id %s", m, id1)
	}
	for _, id := range ids {
		if m := got[id][len(got[id])-1].msg; m.ID != idAll || m.To != agency.Broadcast {
			t.Errorf("%s's broadcast: id %s to %s, want %s to *", id, m.ID, m.To, idAll)
		}
	}
}

// A copy of a message that Send made is a message like any other: sent
// again with SendMessage, its handler gets a context of its own.
func TestSentMessageCopy(t *testing.T) {
	ctx := context.Background()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(ctx) })
	type tick struct {
		N int `json:"n"`
	}
	got := make(chan seen, 4)
	recv := agency.MustNewAgent("Receiver")
	agency.Handle(recv, "tick", func(ctx context.Context, _ tick) (struct{}, error) {
		got <- seen{ctx, agency.AgentFrom(ctx), agency.MessageFrom(ctx)}
		return struct{}{}, nil
	})
	fwd := agency.MustNewAgent("Forwarder")
	for _, a := range []*agency.Agent{recv, fwd} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	next := func() seen {
		t.Helper()
		select {
		case s := <-got:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("not handled")
			return seen{}
		}
	}
	if _, err := fwd.Send(ctx, "Receiver", "tick", tick{N: 1}); err != nil {
		t.Fatal(err)
	}
	first := next()
	cp := *first.msg
	cp.ID = "" // a new id, and a new message
	if _, err := fwd.SendMessage(ctx, &cp); err != nil {
		t.Fatal(err)
	}
	second := next()
	same := *first.msg // the same id: still not the message Send made
	if _, err := fwd.SendMessage(ctx, &same); err != nil {
		t.Fatal(err)
	}
	third := next()
	for _, c := range []struct {
		s    seen
		want *agency.Message
	}{{second, &cp}, {third, &same}} {
		if c.s.msg != c.want || c.s.ctx == first.ctx || agency.MessageFrom(c.s.ctx) != c.want {
			t.Fatalf("a copy's handler: message %p (want %p), same context as the original's: %v", c.s.msg, c.want, c.s.ctx == first.ctx)
		}
	}
	if agency.MessageFrom(first.ctx) != first.msg || second.ctx == third.ctx {
		t.Fatal("a handler context changed its message, or two copies share one")
	}
}
