package agency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// valueHook takes responses, so its agent's Sends ask for them.
type valueHook struct{}

func (valueHook) HandleActionValue(context.Context, *agency.Message) {}

// A Send from an agent that has nowhere to put responses says so, and the
// recipient sends none; an agent with a ValueHandler, and every Request,
// get theirs.
func TestNoReplyForHooklessSenders(t *testing.T) {
	var mu sync.Mutex
	var routed []*agency.Message
	handled := make(chan struct{}, 10)
	worker := agency.MustNewAgent("Worker")
	agency.Handle(worker, "work", func(context.Context, struct{}) (int, error) {
		handled <- struct{}{}
		return 1, nil
	})
	conn, err := driver.Connect(worker, driver.RouterFunc(func(_ context.Context, m *agency.Message) error {
		mu.Lock()
		routed = append(routed, m)
		mu.Unlock()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	conn.Added(context.Background())
	defer conn.Close(context.Background())

	deliver := func(sender *agency.Agent, request bool) {
		t.Helper()
		var sent *agency.Message
		c, err := driver.Connect(sender, driver.RouterFunc(func(_ context.Context, m *agency.Message) error {
			sent = m
			return conn.Deliver(m)
		}))
		if err != nil {
			t.Fatal(err)
		}
		c.Added(context.Background())
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if request {
			_, _ = sender.Request(ctx, "Worker", "work", nil) // the test's router never answers
		} else if _, err := sender.Send(ctx, "Worker", "work", nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-handled:
		case <-time.After(10 * time.Second):
			t.Fatal("work did not run")
		}
		if want := !request && sender.ID() == "Quiet"; sent.NoReply != want {
			t.Errorf("%s's message has NoReply %v, want %v", sender.ID(), sent.NoReply, want)
		}
	}
	deliver(agency.MustNewAgent("Quiet"), false)
	deliver(agency.MustNewAgent("Listener", agency.Hooks(valueHook{})), false)
	deliver(agency.MustNewAgent("Asker"), true)
	// The marker: Worker handles one message at a time, so the replies to
	// the three above are routed once this one has run.
	deliver(agency.MustNewAgent("Listener2", agency.Hooks(valueHook{})), false)

	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		var to []string
		for _, m := range routed {
			to = append(to, m.To)
		}
		mu.Unlock()
		if len(to) >= 3 {
			if len(to) != 3 || to[0] != "Listener" || to[1] != "Asker" || to[2] != "Listener2" {
				t.Errorf("Worker replied to %v, want [Listener Asker Listener2]", to)
			}
			return
		}
		select {
		case <-deadline:
			t.Fatalf("Worker replied to %v, want [Listener Asker Listener2]", to)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
