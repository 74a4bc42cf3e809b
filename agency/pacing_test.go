package agency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// takenLog records which messages a pacing space was told were taken.
type takenLog struct {
	mu  sync.Mutex
	ids []string
	ch  chan string
}

func (l *takenLog) fn(id string) func() {
	return func() {
		l.mu.Lock()
		l.ids = append(l.ids, id)
		l.mu.Unlock()
		l.ch <- id
	}
}

func (l *takenLog) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-l.ch:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was taken")
		return ""
	}
}

func (l *takenLog) none(t *testing.T) {
	t.Helper()
	select {
	case id := <-l.ch:
		t.Fatalf("%s was taken early", id)
	default:
	}
}

// DeliverFunc tells a pacing space when the agent takes each message: when
// its handling starts, not when it is queued; and, while the agent waits
// for a response, at once, so that nothing holds the response back.
func TestDeliverFuncPacing(t *testing.T) {
	log := &takenLog{ch: make(chan string, 16)}
	started := make(chan string, 16)
	release := make(chan struct{})
	a := agency.MustNewAgent("Worker")
	agency.Handle(a, "work", func(ctx context.Context, args struct {
		Ask bool `json:"ask"`
	}) (bool, error) {
		started <- agency.MessageFrom(ctx).ID
		<-release
		if args.Ask {
			// Waits for a response that the test delivers.
			_, err := agency.AgentFrom(ctx).Request(ctx, "Helper", "ping", nil)
			return err == nil, err
		}
		return true, nil
	})
	requests := make(chan *agency.Message, 4)
	conn, err := driver.Connect(a, driver.RouterFunc(func(_ context.Context, m *agency.Message) error {
		if m.Action == "ping" {
			requests <- m
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	conn.Added(context.Background())
	defer conn.Close(context.Background())

	deliver := func(id string, ask bool) {
		t.Helper()
		m := &agency.Message{To: "Worker", From: "Boss", ID: id, Action: "work", Args: map[string]any{"ask": ask}}
		if err := conn.DeliverFunc(m, log.fn(id)); err != nil {
			t.Fatal(err)
		}
	}
	deliver("m1", true)
	if got := log.next(t); got != "m1" {
		t.Fatalf("taken %s, want m1", got)
	}
	<-started
	deliver("m2", false)
	deliver("m3", false)
	log.none(t) // queued behind m1's handler: not taken

	close(release) // m1 now requests: waiting takes the queue
	req := <-requests
	for range 2 {
		if id := log.next(t); id != "m2" && id != "m3" {
			t.Fatalf("taken %s, want m2 and m3", id)
		}
	}
	deliver("m4", false) // while the request waits: taken at once
	if got := log.next(t); got != "m4" {
		t.Fatalf("taken %s, want m4", got)
	}
	resp := &agency.Message{To: "Worker", From: "Helper", ID: "r1", ParentID: req.ID, Action: agency.ResponseAction, Args: "pong"}
	if err := conn.DeliverFunc(resp, log.fn("r1")); err != nil {
		t.Fatal(err)
	}
	if got := log.next(t); got != "r1" {
		t.Fatalf("taken %s, want the response r1 at once", got)
	}
	for range 3 {
		<-started // m2, m3, m4 run after m1
	}
	deliver("m5", false) // no request under way any more: taken when handled
	if got := log.next(t); got != "m5" {
		t.Fatalf("taken %s, want m5", got)
	}
	<-started

	log.mu.Lock()
	n := len(log.ids)
	log.mu.Unlock()
	if n != 6 {
		t.Errorf("%d takens, want 6, one per message: %v", n, log.ids)
	}
}
