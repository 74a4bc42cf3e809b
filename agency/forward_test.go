package agency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// errorHook records the [error] messages its agent receives.
type errorHook struct{ errs chan *agency.Message }

func (h errorHook) HandleActionError(_ context.Context, m *agency.Message, _ *agency.ActionError) {
	h.errs <- m
}

// Forward hands the space's ErrNoRecipient to its caller, where
// SendMessage hands it to the agent's ErrorHandler; otherwise it sends as
// SendMessage does.
func TestForward(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var routed []*agency.Message
	router := driver.RouterFunc(func(_ context.Context, m *agency.Message) error {
		if m.To == "Nobody" {
			return fmt.Errorf("%w: %q", agency.ErrNoRecipient, m.To)
		}
		mu.Lock()
		routed = append(routed, m)
		mu.Unlock()
		return nil
	})
	hook := errorHook{errs: make(chan *agency.Message, 10)}
	relay := agency.MustNewAgent("Relay", agency.Hooks(hook))
	if _, err := relay.Forward(ctx, &agency.Message{To: "Worker", Action: "work"}); !errors.Is(err, agency.ErrNotAdded) {
		t.Errorf("Forward from an agent in no space: %v, want ErrNotAdded", err)
	}
	conn, err := driver.Connect(relay, router)
	if err != nil {
		t.Fatal(err)
	}
	conn.Added(ctx)
	defer conn.Close(ctx)

	id, err := relay.Forward(ctx, &agency.Message{To: "Nobody", Action: "work", ID: "m-1"})
	if !errors.Is(err, agency.ErrNoRecipient) || id != "m-1" {
		t.Fatalf("Forward to an absent id: %q, %v; want m-1 and ErrNoRecipient", id, err)
	}
	// SendMessage to the same id is no error: the ErrorHandler hears of it.
	// The agent takes its messages in order, so the first error it hears
	// of would be Forward's, had Forward told it.
	if _, err := relay.SendMessage(ctx, &agency.Message{To: "Nobody", Action: "work", ID: "m-2"}); err != nil {
		t.Fatalf("SendMessage to an absent id: %v, want nil", err)
	}
	select {
	case e := <-hook.errs:
		if !errors.Is(e.Err(), agency.ErrNoRecipient) || e.ParentID != "m-2" {
			t.Errorf("the ErrorHandler heard %v about %q, want ErrNoRecipient about m-2 (SendMessage's), not m-1 (Forward's)", e.Err(), e.ParentID)
		}
	case <-ctx.Done():
		t.Fatal("the ErrorHandler never heard of SendMessage's absent recipient")
	}

	// Otherwise it is SendMessage: From and an id set, the message routed.
	m := &agency.Message{To: "Worker", Action: "work"}
	id, err = relay.Forward(ctx, m)
	if err != nil || id == "" || m.ID != id || m.From != "Relay" {
		t.Fatalf("Forward: %q, %v; message %+v", id, err, m)
	}
	mu.Lock()
	if len(routed) != 1 || routed[0] != m || m.NoReply {
		t.Errorf("routed %v, want the message once, with NoReply false (the agent takes errors)", routed)
	}
	mu.Unlock()
	if _, err := relay.Forward(ctx, &agency.Message{To: "Worker", From: "Other", Action: "work"}); !errors.Is(err, agency.ErrForgedSender) {
		t.Errorf("Forward with another agent's From: %v, want ErrForgedSender", err)
	}
}
