package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// recorder records the __meta__.id of each run message its agents handle.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

type runArgs struct {
	N int `json:"n"`
}

func (r *recorder) agent(id string) *agency.Agent {
	a := agency.MustNewAgent(id)
	agency.Handle(a, "run", func(ctx context.Context, _ runArgs) (struct{}, error) {
		r.mu.Lock()
		r.ids = append(r.ids, agency.MessageFrom(ctx).ID)
		r.mu.Unlock()
		return struct{}{}, nil
	})
	return a
}

func (r *recorder) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

// TestRelayRecipientRemovedAndAddedAgainOnAMQP: on RabbitMQ, a recipient
// that leaves gracefully has its queue deleted, and the broker returns
// the messages to it. The relay keeps those entries and sends them once
// the recipient is back (another agent with its id, as after a restart):
// each arrives once, in the order queued.
func TestRelayRecipientRemovedAndAddedAgainOnAMQP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exchange := amqptest.Exchange(t)
	coordSpace := amqptest.NewSpace(t, amqpspace.Config{Exchange: exchange})
	hrSpace := amqptest.NewSpace(t, amqpspace.Config{Exchange: exchange}) // another connection, as another process
	coord := agency.MustNewAgent("Coordinator")
	if err := coordSpace.Add(ctx, coord); err != nil {
		t.Fatal(err)
	}
	var got recorder
	if err := hrSpace.Add(ctx, got.agent("Hr")); err != nil {
		t.Fatal(err)
	}

	st := store.NewMemory()
	defer st.Close()
	queue := func(n int) string {
		t.Helper()
		m := &agency.Message{To: "Hr", Action: "run", ID: agency.NewID(), Args: runArgs{N: n}}
		o, err := store.NewOutgoing("Coordinator", m)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Apply(ctx, store.Changes{Send: []store.Outgoing{o}}); err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	r := store.NewRelay(st, coord, store.RelayConfig{Lease: time.Hour})
	want := []string{queue(0)}
	if n, err := r.Flush(ctx); n != 1 || err != nil {
		t.Fatalf("Flush with Hr there: %d sent, %v; want 1", n, err)
	}
	waitUntil(t, ctx, func() bool { return len(got.received()) == 1 })

	if err := hrSpace.Remove(ctx, "Hr"); err != nil {
		t.Fatal(err)
	}
	want = append(want, queue(1), queue(2))
	if n, err := r.Flush(ctx); n != 0 || !errors.Is(err, agency.ErrNoRecipient) {
		t.Fatalf("Flush with Hr gone: %d sent, error %v; want 0 and ErrNoRecipient", n, err)
	}

	if err := hrSpace.Add(ctx, got.agent("Hr")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, func() bool {
		if _, err := r.Flush(ctx); err != nil && !errors.Is(err, agency.ErrNoRecipient) {
			t.Fatalf("Flush: %v", err)
		}
		return len(got.received()) >= len(want)
	})
	if ids := got.received(); !slices.Equal(ids, want) {
		t.Errorf("received %v, want %v: each once, in the order queued", ids, want)
	}
	if out, err := st.Claim(ctx, "", 10, time.Millisecond); err != nil || len(out) != 0 {
		t.Errorf("outbox after delivery: %d entries, %v", len(out), err)
	}
}

// waitUntil calls done every few milliseconds until it is true, or fails
// t when ctx ends first.
func waitUntil(t *testing.T, ctx context.Context, done func() bool) {
	t.Helper()
	for !done() {
		select {
		case <-ctx.Done():
			t.Fatal("gave up waiting:", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
