package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/seed72275b23/agency-go/actions/store"
)

// increment adds one to the counter document id, read and written again
// after each conflict.
func increment(ctx context.Context, st store.Store, id string) error {
	return store.ApplyRetrying(ctx, st, func(ctx context.Context) (store.Changes, error) {
		d, err := st.Get(ctx, "counter", id)
		n := 0
		switch {
		case errors.Is(err, store.ErrNotFound):
			d = store.Doc{Kind: "counter", ID: id}
		case err != nil:
			return store.Changes{}, err
		default:
			n, _ = strconv.Atoi(string(d.Body))
		}
		d.Body = json.RawMessage(strconv.Itoa(n + 1))
		return store.Changes{Put: []store.Doc{d}}, nil
	})
}

// Concurrent writers of one document each get their write in: every
// conflict is a fresh read and a new decision.
func TestApplyRetryingConcurrentWriters(t *testing.T) {
	st := store.NewMemory()
	defer st.Close()
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() { errs <- increment(t.Context(), st, "c") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := st.Get(t.Context(), "counter", "c")
	if err != nil || string(d.Body) != strconv.Itoa(writers) {
		t.Fatalf("counter: %s %v, want %d", d.Body, err, writers)
	}
}

// conflicting is a store whose Apply fails with ErrConflict a number of
// times before it applies.
type conflicting struct {
	store.Store
	left, applies int
}

func (c *conflicting) Apply(ctx context.Context, ch store.Changes) error {
	c.applies++
	if c.left > 0 {
		c.left--
		return fmt.Errorf("%w: test", store.ErrConflict)
	}
	return c.Store.Apply(ctx, ch)
}

// ApplyRetrying tries Retries times again after a conflict, then returns
// the conflict; other errors and the build's come back at once.
func TestApplyRetryingBounds(t *testing.T) {
	for _, c := range []struct {
		conflicts, builds int
		fails             bool
	}{{0, 1, false}, {3, 4, false}, {store.Retries, store.Retries + 1, false}, {store.Retries + 1, store.Retries + 1, true}} {
		st := &conflicting{Store: store.NewMemory(), left: c.conflicts}
		builds := 0
		err := store.ApplyRetrying(t.Context(), st, func(ctx context.Context) (store.Changes, error) {
			builds++
			return store.Changes{Put: []store.Doc{{Kind: "k", ID: "x" + strconv.Itoa(builds), Body: json.RawMessage(`{}`)}}}, nil
		})
		if builds != c.builds || (err != nil) != c.fails || (c.fails && !errors.Is(err, store.ErrConflict)) {
			t.Errorf("%d conflicts: %d builds, error %v; want %d builds, failing %v", c.conflicts, builds, err, c.builds, c.fails)
		}
	}
	boom := errors.New("boom")
	st := &conflicting{Store: store.NewMemory(), left: 1}
	builds := 0
	err := store.ApplyRetrying(t.Context(), st, func(ctx context.Context) (store.Changes, error) {
		if builds++; builds == 2 {
			return store.Changes{}, boom
		}
		return store.Changes{}, nil
	})
	if !errors.Is(err, boom) || builds != 2 {
		t.Errorf("a build that fails: %v after %d builds", err, builds)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = store.ApplyRetrying(ctx, st, func(ctx context.Context) (store.Changes, error) {
		t.Error("build called with an ended context")
		return store.Changes{}, nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: %v", err)
	}
}

func ExampleApplyRetrying() {
	ctx := context.Background()
	st := store.NewMemory()
	defer st.Close()
	// Read, decide, write; after a conflict with another writer, read and
	// decide again.
	for range 3 {
		err := store.ApplyRetrying(ctx, st, func(ctx context.Context) (store.Changes, error) {
			d, err := st.Get(ctx, "counter", "visits")
			n := 0
			switch {
			case errors.Is(err, store.ErrNotFound):
				d = store.Doc{Kind: "counter", ID: "visits"} // version 0: create
			case err != nil:
				return store.Changes{}, err
			default:
				n, _ = strconv.Atoi(string(d.Body))
			}
			d.Body = json.RawMessage(strconv.Itoa(n + 1))
			return store.Changes{Put: []store.Doc{d}}, nil
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	d, _ := st.Get(ctx, "counter", "visits")
	fmt.Println("visits:", string(d.Body), "version:", d.Version)
	// Output: visits: 3 version: 3
}
