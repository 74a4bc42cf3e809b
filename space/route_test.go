package space_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// errorsTo is a hook that passes on the errors its agent receives.
type errorsTo chan *agency.ActionError

func (ch errorsTo) HandleActionError(_ context.Context, _ *agency.Message, err *agency.ActionError) {
	ch <- err
}

// A sender that sent to an agent before reaches nobody once that agent is
// removed, and reaches the new agent that takes its id: the router's memory
// of the last recipient never outlives the recipient.
func TestLocalRouteAfterRemove(t *testing.T) {
	ctx := context.Background()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(ctx) })
	errs := make(errorsTo, 1)
	send := agency.MustNewAgent("Sender", agency.Hooks(errs))
	if err := sp.Add(ctx, send); err != nil {
		t.Fatal(err)
	}
	receiver := func(got chan int) *agency.Agent {
		a := agency.MustNewAgent("Receiver")
		agency.Handle(a, "tick", func(_ context.Context, args tickArgs) (struct{}, error) {
			got <- args.N
			return struct{}{}, nil
		})
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	wait := func(ch chan int, want int) {
		t.Helper()
		select {
		case n := <-ch:
			if n != want {
				t.Fatalf("tick %d, want %d", n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("tick %d not handled", want)
		}
	}
	first := make(chan int, 10)
	receiver(first)
	for i := range 3 {
		if _, err := send.Send(ctx, "Receiver", "tick", tickArgs{N: i}); err != nil {
			t.Fatal(err)
		}
		wait(first, i)
	}
	if err := sp.Remove(ctx, "Receiver"); err != nil {
		t.Fatal(err)
	}
	if _, err := send.Send(ctx, "Receiver", "tick", tickArgs{N: 10}); err != nil {
		t.Fatal(err)
	}
	select {
	case ae := <-errs:
		if !errors.Is(ae, agency.ErrNoRecipient) {
			t.Fatalf("error %v, want ErrNoRecipient", ae)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ErrNoRecipient for a removed agent")
	}
	second := make(chan int, 10)
	receiver(second)
	if _, err := send.Send(ctx, "Receiver", "tick", tickArgs{N: 20}); err != nil {
		t.Fatal(err)
	}
	wait(second, 20)
	select {
	case n := <-first:
		t.Fatalf("the removed agent handled tick %d", n)
	default:
	}
}

// A responder that answered an agent before answers the agent that takes
// its id after it was removed: the router's memory of where its last
// message went never sends a response to a Conn that has left.
func TestLocalResponseRouteAfterRemove(t *testing.T) {
	ctx := context.Background()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(ctx) })
	echo := agency.MustNewAgent("Echo")
	agency.Handle(echo, "ping", func(_ context.Context, args pingArgs) (int, error) {
		return args.N, nil
	})
	if err := sp.Add(ctx, echo); err != nil {
		t.Fatal(err)
	}
	call := func(caller *agency.Agent, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if got, err := agency.Call[int](ctx, caller, "Echo", "ping", pingArgs{N: n}); err != nil || got != n {
			t.Fatalf("ping %d: %d, %v", n, got, err)
		}
	}
	var first *agency.Agent
	for round := range 3 {
		// A new agent under the same id each round, and the first one
		// again: each time a new Conn.
		caller := agency.MustNewAgent("Caller")
		if round == 2 {
			caller = first
		}
		if err := sp.Add(ctx, caller); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			call(caller, 10*round+i)
		}
		if err := sp.Remove(ctx, "Caller"); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			first = caller
		}
	}
}
