package agency_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// An agent with Concurrency(n) holds goroutines only while it has work:
// once a burst of requests has been answered, it holds none again.
func TestConcurrencyIdleAfterBurst(t *testing.T) {
	worker := agency.MustNewAgent("Worker", agency.Concurrency(4))
	agency.Handle(worker, "double", func(_ context.Context, args struct {
		N int `json:"n"`
	}) (int, error) {
		return 2 * args.N, nil
	})
	caller := agency.MustNewAgent("Caller")
	joinLocal(t, worker, caller)
	before := goleak.IgnoreCurrent()

	ctx := callCtx(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				n := g*100 + i
				got, err := agency.Call[int](ctx, caller, "Worker", "double", map[string]int{"n": n})
				if err != nil || got != 2*n {
					t.Errorf("double(%d) = %d, %v", n, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	goleak.VerifyNone(t, before)
}

// With Concurrency(2), a pacing space hears that a message is taken when
// one of the two slots is free for it, not before: with the agent idle,
// and again after its first actions have ended.
func TestConcurrencyPacing(t *testing.T) {
	log := &takenLog{ch: make(chan string, 16)}
	started := make(chan string, 16)
	var mu sync.Mutex
	stop := make(chan struct{}) // closed when the test ends: no handler waits longer
	releases := map[string]chan struct{}{}
	release := func(id string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if releases[id] == nil {
			releases[id] = make(chan struct{})
		}
		return releases[id]
	}
	a := agency.MustNewAgent("Worker", agency.Concurrency(2))
	agency.Handle(a, "work", func(ctx context.Context, _ struct{}) (bool, error) {
		id := agency.MessageFrom(ctx).ID
		started <- id
		select {
		case <-release(id):
		case <-stop:
		}
		return true, nil
	})
	conn, err := driver.Connect(a, driver.RouterFunc(func(context.Context, *agency.Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	conn.Added(context.Background())
	defer func() {
		close(stop)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := conn.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	deliver := func(id string) {
		t.Helper()
		m := &agency.Message{To: "Worker", From: "Boss", ID: id, Action: "work"}
		if err := conn.DeliverFunc(m, log.fn(id)); err != nil {
			t.Fatal(err)
		}
	}
	waitStarted := func(want ...string) {
		t.Helper()
		var got []string
		for range want {
			select {
			case id := <-started:
				got = append(got, id)
			case <-time.After(10 * time.Second):
				t.Fatalf("started %v, want %v", got, want)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("started %v, want %v", got, want)
		}
	}
	takenNow := func(want ...string) {
		t.Helper()
		var got []string
		for range want {
			got = append(got, log.next(t))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("taken %v, want %v", got, want)
		}
	}

	// Twice: the second round finds the first one's slots let go.
	for round := range 2 {
		id := func(i int) string { return fmt.Sprintf("r%dm%d", round, i) }
		deliver(id(1))
		deliver(id(2))
		deliver(id(3))
		takenNow(id(1), id(2))
		waitStarted(id(1), id(2))
		log.none(t) // both slots are busy: m3 waits, not taken
		close(release(id(1)))
		takenNow(id(3))
		waitStarted(id(3))
		close(release(id(2)))
		close(release(id(3)))
	}
}

// An action of an agent with Concurrency(n) that panics fails that call
// alone: the agent goes on with the next ones.
func TestConcurrencyPanic(t *testing.T) {
	worker := agency.MustNewAgent("Worker", agency.Concurrency(2))
	agency.Handle(worker, "maybe", func(_ context.Context, args struct {
		Panic bool `json:"panic,omitempty"`
	}) (string, error) {
		if args.Panic {
			panic("on purpose")
		}
		return "fine", nil
	})
	caller := agency.MustNewAgent("Caller")
	joinLocal(t, worker, caller)
	ctx := callCtx(t)
	for i := range 6 {
		_, err := agency.Call[string](ctx, caller, "Worker", "maybe", map[string]bool{"panic": true})
		wantMentions(t, asActionError(t, err, agency.TypeActionFailed).Text, "panicked", "on purpose")
		if v, err := agency.Call[string](ctx, caller, "Worker", "maybe", nil); err != nil || v != "fine" {
			t.Fatalf("call %d after a panic: %q, %v", i, v, err)
		}
	}
}

// Actions of an agent with Concurrency(n) may Request other agents, many
// at once.
func TestConcurrencyRequestInsideAction(t *testing.T) {
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(_ context.Context, args struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return args.A + args.B, nil
	})
	relay := agency.MustNewAgent("Relay", agency.Concurrency(4))
	agency.Handle(relay, "relay", func(ctx context.Context, args struct {
		N int `json:"n"`
	}) (int, error) {
		sum, err := agency.Call[int](ctx, agency.AgentFrom(ctx), "Calculator", "add", map[string]int{"a": args.N, "b": 1000})
		return 10 * sum, err
	})
	caller := agency.MustNewAgent("Caller")
	joinLocal(t, calc, relay, caller)
	ctx := callCtx(t)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				n := g*10 + i
				if v, err := agency.Call[int](ctx, caller, "Relay", "relay", map[string]int{"n": n}); err != nil || v != 10*(n+1000) {
					t.Errorf("relay(%d) = %d, %v", n, v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Sequence under Concurrency(n) keeps each key's messages in order, one at
// a time, under a steady load of several keys and messages without one.
func TestConcurrencySequenceUnderLoad(t *testing.T) {
	const perKey = 40
	keys := []string{"a", "b", "c"}
	var (
		mu      sync.Mutex
		order   = map[string][]int{}
		running = map[string]int{}
		overlap atomic.Bool
		done    = make(chan struct{})
		total   int
	)
	worker := agency.MustNewAgent("Worker", agency.Concurrency(3), agency.Sequence(func(m *agency.Message) string {
		k, _ := m.Meta["key"].(string)
		return k
	}))
	agency.Handle(worker, "step", func(ctx context.Context, args struct {
		N int `json:"n"`
	}) (bool, error) {
		key, _ := agency.MessageFrom(ctx).Meta["key"].(string)
		mu.Lock()
		if running[key]++; running[key] > 1 && key != "" {
			overlap.Store(true)
		}
		mu.Unlock()
		time.Sleep(time.Duration(args.N%3) * 100 * time.Microsecond)
		mu.Lock()
		running[key]--
		order[key] = append(order[key], args.N)
		if total++; total == (len(keys)+1)*perKey {
			close(done)
		}
		mu.Unlock()
		return true, nil
	})
	sender := agency.MustNewAgent("Sender")
	joinLocal(t, worker, sender)
	ctx := callCtx(t)
	for i := range perKey {
		for _, key := range append([]string{""}, keys...) {
			m := &agency.Message{To: "Worker", Action: "step", Args: map[string]int{"n": i}}
			if key != "" {
				m.Meta = map[string]any{"key": key}
			}
			if _, err := sender.SendMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("not every step ran")
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap.Load() {
		t.Error("two steps of one key ran at once")
	}
	for _, key := range keys {
		if got := order[key]; len(got) != perKey || !slices.IsSorted(got) {
			t.Errorf("key %s ran in the order %v", key, got)
		}
	}
}

// Messages delivered to an agent with Concurrency(n) from many goroutines
// while it is being removed are each either refused or handled before
// Close returns: none is lost on its way to a handler, none runs after.
func TestConcurrencyCloseWhileDelivering(t *testing.T) {
	for run := range 20 {
		var handled, accepted atomic.Int64
		a := agency.MustNewAgent("Worker", agency.Concurrency(4))
		agency.Handle(a, "tick", func(context.Context, struct{}) (bool, error) {
			handled.Add(1)
			return true, nil
		})
		conn, err := driver.Connect(a, driver.RouterFunc(func(context.Context, *agency.Message) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		conn.Added(context.Background())
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 100 {
					m := &agency.Message{To: "Worker", From: "Boss", ID: fmt.Sprintf("g%dm%d", g, i), Action: "tick", NoReply: i%2 == 0}
					if conn.DeliverFunc(m, func() {}) == nil {
						accepted.Add(1)
					}
				}
			}()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := conn.Close(ctx); err != nil {
			t.Fatalf("run %d: Close: %v", run, err)
		}
		cancel()
		after := handled.Load()
		wg.Wait()
		if got, want := handled.Load(), accepted.Load(); got != want || after != want {
			t.Fatalf("run %d: %d messages accepted, %d handled when Close returned, %d in the end", run, want, after, got)
		}
	}
}
