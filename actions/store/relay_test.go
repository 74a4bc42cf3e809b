package store_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// TestRelayLifecycle: Stop ends the goroutine Start began, waits for it,
// and may be called again; Start after Stop does nothing; a relay whose
// store closes stops by itself.
func TestRelayLifecycle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	a := agency.MustNewAgent("Coordinator")
	if err := sp.Add(ctx, a); err != nil {
		t.Fatal(err)
	}

	st := store.NewMemory()
	r := store.NewRelay(st, a, store.RelayConfig{Poll: time.Millisecond})
	r.Start()
	r.Start() // once is enough
	r.Wake()
	r.Stop()
	r.Stop()
	r.Start() // stopped for good
	r.Wake()  // and never blocks

	// A relay on a store that closes stops polling on its own; Stop still
	// returns at once.
	r2 := store.NewRelay(st, a, store.RelayConfig{Poll: time.Millisecond})
	r2.Start()
	st.Close()
	r2.Stop()
	if _, err := r2.Flush(ctx); err == nil {
		t.Error("Flush on a closed store succeeded")
	}
}

// TestRelayRetriesWhenDue: a started relay tries an entry whose recipient
// was absent again once its wait is over, without a Wake and long before
// its next poll.
func TestRelayRetriesWhenDue(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	coord := agency.MustNewAgent("Coordinator")
	if err := sp.Add(ctx, coord); err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory()
	defer st.Close()
	m := &agency.Message{To: "Hr", Action: "run", Args: runArgs{N: 1}}
	o, err := store.NewOutgoing("Coordinator", m)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(ctx, store.Changes{Send: []store.Outgoing{o}}); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	r := store.NewRelay(st, coord, store.RelayConfig{Poll: time.Hour, Backoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	r.Start() // its first pass finds Hr absent
	defer r.Stop()
	waitUntil(t, ctx, func() bool { return strings.Contains(logs.String(), "recipient of an outbox entry is absent") })
	var got recorder
	if err := sp.Add(ctx, got.agent("Hr")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, func() bool { return len(got.received()) == 1 })
	r.Stop()
	if out, err := st.Claim(ctx, "", 10, time.Millisecond); err != nil || len(out) != 0 {
		t.Errorf("outbox after delivery: %d entries, %v", len(out), err)
	}
}

// logBuffer is a bytes.Buffer safe for the relay's goroutine and the
// test's.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
