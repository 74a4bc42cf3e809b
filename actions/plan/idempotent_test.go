package plan_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Idempotent runs a handler once per key: concurrent and later deliveries
// with the key get the first run's value or error; a message without a
// key runs the handler each time.
func TestIdempotent(t *testing.T) {
	ctx := t.Context()
	st := store.NewMemory()
	var runs atomic.Int32
	release, started := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w := agency.MustNewAgent("Worker", agency.Concurrency(8))
	agency.Handle(w, "work", plan.Idempotent(st, func(ctx context.Context, it Item) (int, error) {
		runs.Add(1)
		once.Do(func() { close(started) })
		<-release
		if it.N < 0 {
			return 0, agency.InvalidArgsf("n: must not be negative")
		}
		return it.N * 2, nil
	}))
	caller := agency.MustNewAgent("Caller")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	for _, a := range []*agency.Agent{w, caller} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	send := func(key string, n int) (int, error) {
		m := &agency.Message{To: "Worker", Action: "work", Args: Item{N: n}}
		if key != "" {
			m.Meta = map[string]any{plan.IdempotencyKey: key}
		}
		r, err := caller.RequestMessage(ctx, m)
		if err != nil {
			return 0, err
		}
		return agency.Value[int](r)
	}

	var wg sync.WaitGroup
	values := make([]int, 5)
	for i := range values {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := send("k1", 21)
			if err != nil {
				t.Error(err)
			}
			values[i] = v
		}()
	}
	<-started // the first delivery holds the key; the others wait for it
	close(release)
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("5 concurrent deliveries of one key ran the handler %d times", runs.Load())
	}
	for _, v := range values {
		if v != 42 {
			t.Fatalf("values %v, want 42 each", values)
		}
	}
	if v, err := send("k1", 21); v != 42 || err != nil || runs.Load() != 1 {
		t.Fatalf("a later delivery: %v %v, %d runs", v, err, runs.Load())
	}
	// An error is recorded too.
	for i := 0; i < 2; i++ {
		if _, err := send("k2", -1); !errors.Is(err, agency.ErrInvalidArgs) {
			t.Fatalf("delivery %d of a failing key: %v", i+1, err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("the failing key ran %d times", runs.Load()-1)
	}
	// Without a key: every time.
	for i := 0; i < 2; i++ {
		if _, err := send("", 1); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 4 {
		t.Fatalf("deliveries without a key ran %d times, want 2", runs.Load()-2)
	}
}

// ForgetIdempotent deletes the records of runs that ended before its
// cutoff, and only those: a run under way keeps its claim, and a key
// whose record was forgotten runs its handler again.
func TestForgetIdempotent(t *testing.T) {
	ctx := t.Context()
	st := store.NewMemory()
	var runs atomic.Int32
	hold, holding := make(chan struct{}), make(chan struct{})
	w := agency.MustNewAgent("Worker", agency.Concurrency(4))
	agency.Handle(w, "work", plan.Idempotent(st, func(ctx context.Context, it Item) (int, error) {
		runs.Add(1)
		if it.N == 99 {
			close(holding)
			<-hold
		}
		return it.N, nil
	}))
	caller := agency.MustNewAgent("Caller")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	for _, a := range []*agency.Agent{w, caller} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	work := func(key string, n int) {
		t.Helper()
		m := &agency.Message{To: "Worker", Action: "work", Args: Item{N: n}, Meta: map[string]any{plan.IdempotencyKey: key}}
		r, err := caller.RequestMessage(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := agency.Value[int](r); err != nil || v != n {
			t.Fatalf("work(%s) = %v, %v; want %d", key, v, err, n)
		}
	}
	before := time.Now().Add(-time.Hour)
	for i, key := range []string{"a", "b", "c"} {
		work(key, i)
	}
	held := make(chan struct{})
	go func() { defer close(held); work("running", 99) }()
	<-holding

	if n, err := plan.ForgetIdempotent(ctx, st, before); err != nil || n != 0 {
		t.Fatalf("ForgetIdempotent(an hour ago) = %d, %v; want 0", n, err)
	}
	if n, err := plan.ForgetIdempotent(ctx, st, time.Now().Add(time.Second)); err != nil || n != 3 {
		t.Fatalf("ForgetIdempotent(now) = %d, %v; want the 3 ended runs", n, err)
	}
	close(hold)
	<-held
	if got := runs.Load(); got != 4 {
		t.Fatalf("%d runs before the repeat, want 4", got)
	}
	work("a", 0) // forgotten: runs again
	work("running", 99)
	if got := runs.Load(); got != 5 {
		t.Errorf("%d runs after repeating a forgotten key and a kept one, want 5", got)
	}
}

// Effect writes its changes in the transaction that records the run as
// done: a repeat of the key is answered from the record without a second
// effect; a run that fails writes none; a run whose effect meets a
// conflict (a document changed since the handler read it) writes nothing
// and is made again, so the effect is there once; and outside a wrapped
// handler Effect refuses.
func TestEffect(t *testing.T) {
	ctx := t.Context()
	st := store.NewMemory()
	if err := plan.Effect(ctx, store.Changes{}); err == nil {
		t.Error("Effect outside Idempotent: no error")
	}
	var runs atomic.Int32
	meddle := make(chan bool, 1)
	w := agency.MustNewAgent("Worker")
	agency.Handle(w, "count", plan.Idempotent(st, func(ctx context.Context, it Item) (int, error) {
		runs.Add(1)
		d, err := st.Get(ctx, "counter", "c")
		if err != nil {
			return 0, err
		}
		n, _ := strconv.Atoi(string(d.Body))
		select {
		case <-meddle: // another writer moves the counter after the read
			if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "counter", ID: "c", Version: d.Version, Body: []byte(strconv.Itoa(n + 100))}}}); err != nil {
				return 0, err
			}
		default:
		}
		d.Body = []byte(strconv.Itoa(n + 1))
		if err := plan.Effect(ctx, store.Changes{Put: []store.Doc{d}}); err != nil {
			return 0, err
		}
		if it.N < 0 {
			return 0, errors.New("refused")
		}
		return n + 1, nil
	}))
	caller := agency.MustNewAgent("Caller")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	for _, a := range []*agency.Agent{w, caller} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "counter", ID: "c", Body: []byte("0")}}}); err != nil {
		t.Fatal(err)
	}
	count := func(key string, n int) (int, error) {
		r, err := caller.RequestMessage(ctx, &agency.Message{To: "Worker", Action: "count", Args: Item{N: n}, Meta: map[string]any{plan.IdempotencyKey: key}})
		if err != nil {
			return 0, err
		}
		return agency.Value[int](r)
	}
	counter := func() string {
		d, err := st.Get(ctx, "counter", "c")
		if err != nil {
			t.Fatal(err)
		}
		return string(d.Body)
	}
	if v, err := count("k1", 1); v != 1 || err != nil || counter() != "1" {
		t.Fatalf("first run: %d %v, counter %s", v, err, counter())
	}
	if v, err := count("k1", 1); v != 1 || err != nil || counter() != "1" || runs.Load() != 1 {
		t.Fatalf("repeat: %d %v, counter %s, %d runs", v, err, counter(), runs.Load())
	}
	if _, err := count("k2", -1); err == nil || counter() != "1" {
		t.Fatalf("a failed run: %v, counter %s; want an error and no effect", err, counter())
	}
	meddle <- true
	if v, err := count("k3", 1); v != 102 || err != nil || counter() != "102" || runs.Load() != 4 {
		t.Fatalf("a run whose effect conflicted: %d %v, counter %s, %d runs; want 102 after a second run", v, err, counter(), runs.Load())
	}
}
