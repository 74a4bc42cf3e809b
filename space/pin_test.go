package space_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// payload is an action's arguments, watched for the collector: it is
// freed once nothing holds the message that carried it.
type payload struct {
	Data []byte `json:"data"`
}

// watch returns p's arguments and a channel closed once the collector has
// freed them.
func watch() (*payload, <-chan struct{}) {
	p := &payload{Data: make([]byte, 1<<20)}
	freed := make(chan struct{})
	runtime.AddCleanup(p, func(ch chan struct{}) { close(ch) }, freed)
	return p, freed
}

// collected runs the collector until freed is closed, or fails the test.
func collected(t *testing.T, freed <-chan struct{}, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		select {
		case <-freed:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("%s: the message's arguments were never freed", what)
}

// An id that Send returned, kept after its message was handled, does not
// keep the message (its arguments, its recipient) alive; nor does a
// response's ParentID keep its request alive.
func TestIDsDoNotPinMessages(t *testing.T) {
	ctx := context.Background()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	handled := make(chan struct{}, 1)
	recv := agency.MustNewAgent("Receiver")
	agency.Handle(recv, "take", func(context.Context, payload) (int, error) {
		handled <- struct{}{}
		return 7, nil
	})
	send := agency.MustNewAgent("Sender")
	for _, a := range []*agency.Agent{recv, send} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("Send", func(t *testing.T) {
		p, freed := watch()
		id, err := send.Send(ctx, "Receiver", "take", p)
		if err != nil {
			t.Fatal(err)
		}
		p = nil
		<-handled
		collected(t, freed, "an id kept after Send")
		runtime.KeepAlive(id)
	})

	t.Run("ParentID", func(t *testing.T) {
		p, freed := watch()
		r, err := send.Request(ctx, "Receiver", "take", p)
		if err != nil {
			t.Fatal(err)
		}
		p = nil
		<-handled
		if r.ParentID == "" {
			t.Fatal("the response has no ParentID")
		}
		collected(t, freed, "a response kept after Request")
		runtime.KeepAlive(r)
	})
}
