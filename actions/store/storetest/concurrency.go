package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

var concurrencyTests = []test{
	{"WritersOnOneDocument", testConcurrentWriters},
	{"WritersOnTwoDocumentsInEitherOrder", testConcurrentPairs},
	{"CreatorsOfOneDocument", testConcurrentCreators},
	{"DeletersAndCreatorsOfOneDocument", testConcurrentDeleteCreate},
	{"Claimers", testConcurrentClaimers},
	{"ClaimersKeepOrderPerRecipient", testConcurrentClaimersOrder},
	{"WritersAndRelays", testWritersAndRelays},
}

// workers is how many goroutines race in each test.
const workers = 8

// race runs f in workers goroutines and waits for them; the first error
// fails the test.
func (e *env) race(f func(ctx context.Context, worker int) error) {
	e.t.Helper()
	ctx := e.ctx()
	var wg sync.WaitGroup
	errs := make([]error, workers)
	start := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[w] = f(ctx, w)
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
}

// testConcurrentWriters has 8 goroutines increment a counter document by
// read, compare-and-set, retry: exactly one write wins each version.
func testConcurrentWriters(e *env) {
	const updates = 200
	e.put(doc("counter", "c", 0, `0`))
	var wins [updates + 2]atomic.Int32 // by the version read
	var conflicts atomic.Int64
	e.race(func(ctx context.Context, _ int) error {
		for {
			d, err := e.st.Get(ctx, "counter", "c")
			if err != nil {
				return err
			}
			if d.Version > updates {
				return nil
			}
			n, err := strconv.Atoi(string(d.Body))
			if err != nil {
				return fmt.Errorf("counter body %q: %v", d.Body, err)
			}
			d.Body = []byte(strconv.Itoa(n + 1))
			err = e.st.Apply(ctx, store.Changes{Put: []store.Doc{d}})
			switch {
			case err == nil:
				wins[d.Version].Add(1)
			case errors.Is(err, store.ErrConflict):
				conflicts.Add(1)
			default:
				return err
			}
		}
	})
	for v := 1; v <= updates; v++ {
		if n := wins[v].Load(); n != 1 {
			e.t.Errorf("%d writes won at version %d, want exactly 1", n, v)
		}
	}
	d := e.get("counter", "c")
	if string(d.Body) != strconv.Itoa(updates) || d.Version != updates+1 {
		e.t.Errorf("counter %s at version %d, want %d at %d", d.Body, d.Version, updates, updates+1)
	}
	e.t.Logf("%d goroutines: %d writes won, one per version; %d lost with ErrConflict", workers, updates, conflicts.Load())
}

// testConcurrentPairs has 8 goroutines move a counter that lives in two
// documents, each Apply writing both, half of them listing the documents
// the other way round: no Apply fails with anything but ErrConflict (a
// store must not deadlock or report a lock error), and every version pair
// is won once.
func testConcurrentPairs(e *env) {
	const updates = 100
	e.put(doc("counter", "a", 0, `0`), doc("counter", "b", 0, `0`))
	var wins [updates + 2]atomic.Int32
	e.race(func(ctx context.Context, w int) error {
		for {
			a, err := e.st.Get(ctx, "counter", "a")
			if err != nil {
				return err
			}
			b, err := e.st.Get(ctx, "counter", "b")
			if err != nil {
				return err
			}
			if a.Version > updates {
				return nil
			}
			if a.Version != b.Version {
				continue // another Apply committed between the two reads: read again
			}
			n, _ := strconv.Atoi(string(a.Body))
			a.Body = []byte(strconv.Itoa(n + 1))
			b.Body = a.Body
			pair := []store.Doc{a, b}
			if w%2 == 1 {
				pair = []store.Doc{b, a}
			}
			err = e.st.Apply(ctx, store.Changes{Put: pair})
			switch {
			case err == nil:
				wins[a.Version].Add(1)
			case errors.Is(err, store.ErrConflict):
			default:
				return err
			}
		}
	})
	for v := 1; v <= updates; v++ {
		if n := wins[v].Load(); n != 1 {
			e.t.Errorf("%d writes won at version %d, want exactly 1", n, v)
		}
	}
	a, b := e.get("counter", "a"), e.get("counter", "b")
	if string(a.Body) != strconv.Itoa(updates) || string(b.Body) != string(a.Body) || a.Version != b.Version {
		e.t.Errorf("a = %s at %d, b = %s at %d; want both %d at %d", a.Body, a.Version, b.Body, b.Version, updates, updates+1)
	}
}

// testConcurrentCreators has 8 goroutines create the same documents, each
// with an outbox entry: one creation wins each, and only its entry is
// queued.
func testConcurrentCreators(e *env) {
	const docs = 25
	var wins [docs]atomic.Int32
	var msgs [workers][docs]store.Outgoing
	for w := range workers {
		for i := range docs {
			msgs[w][i] = outgoing(e.t, "Creator", "Target", fmt.Sprintf("made_%d_by_%d", i, w))
		}
	}
	e.race(func(ctx context.Context, w int) error {
		for i, o := range msgs[w] {
			err := e.st.Apply(ctx, store.Changes{
				Put:  []store.Doc{doc("plan", fmt.Sprintf("p%d", i), 0, strconv.Itoa(w))},
				Send: []store.Outgoing{o},
			})
			switch {
			case err == nil:
				wins[i].Add(1)
			case errors.Is(err, store.ErrConflict):
			default:
				return err
			}
		}
		return nil
	})
	queued := make(map[string]bool)
	for _, a := range e.actions(e.claim("Creator", 1000, time.Hour)) {
		queued[a] = true
	}
	if len(queued) != docs {
		e.t.Errorf("%d entries queued, want %d: one per winning creation", len(queued), docs)
	}
	for i := range docs {
		if n := wins[i].Load(); n != 1 {
			e.t.Errorf("document p%d: %d creations won, want 1", i, n)
			continue
		}
		d := e.get("plan", fmt.Sprintf("p%d", i))
		if !queued[fmt.Sprintf("made_%d_by_%s", i, d.Body)] {
			e.t.Errorf("document p%d was made by %s, but its entry is not the one queued", i, d.Body)
		}
	}
}

// testConcurrentDeleteCreate has 8 goroutines delete a document and
// create it again, each reading first: every delete that wins removes a
// version that no other delete removed, since versions never repeat.
func testConcurrentDeleteCreate(e *env) {
	const deletes = 100
	var mu sync.Mutex
	won := make(map[int64]int) // deletes won, by the version deleted
	var total atomic.Int32
	e.race(func(ctx context.Context, w int) error {
		for total.Load() < deletes {
			d, err := e.st.Get(ctx, "plan", "p")
			if errors.Is(err, store.ErrNotFound) {
				err = e.st.Apply(ctx, store.Changes{Put: []store.Doc{doc("plan", "p", 0, strconv.Itoa(w))}})
				if err != nil && !errors.Is(err, store.ErrConflict) {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			err = e.st.Apply(ctx, store.Changes{Delete: []store.Doc{d}})
			switch {
			case err == nil:
				total.Add(1)
				mu.Lock()
				won[d.Version]++
				mu.Unlock()
			case !errors.Is(err, store.ErrConflict):
				return err
			}
		}
		return nil
	})
	for v, n := range won {
		if n != 1 {
			e.t.Errorf("%d deletes won at version %d: the version was given to %d documents", n, v, n)
		}
	}
	e.t.Logf("%d goroutines: %d deletes, each of its own version", workers, total.Load())
}

// testConcurrentClaimers has 8 relays claim small batches of 240 entries
// to 240 recipients: each entry is claimed once.
func testConcurrentClaimers(e *env) {
	const entries = 240
	var out []store.Outgoing
	for i := range entries {
		out = append(out, outgoing(e.t, "A", fmt.Sprintf("Target%d", i), fmt.Sprintf("m%d", i)))
	}
	e.apply(store.Changes{Send: out[:100]})
	e.apply(store.Changes{Send: out[100:]})
	var mu sync.Mutex
	claimed := make(map[int64]int)
	e.race(func(ctx context.Context, _ int) error {
		for {
			got, err := e.st.Claim(ctx, "A", 7, time.Hour)
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return nil
			}
			mu.Lock()
			for _, o := range got {
				claimed[o.ID]++
			}
			mu.Unlock()
		}
	})
	if len(claimed) != entries {
		e.t.Errorf("%d entries claimed, want %d", len(claimed), entries)
	}
	for id, n := range claimed {
		if n != 1 {
			e.t.Errorf("entry %d claimed %d times while its lease held", id, n)
		}
	}
}

// testConcurrentClaimersOrder has 8 relays claim, "send" and mark sent
// entries to 6 recipients: each recipient gets its entries in the order
// queued, since no claim hands out an entry while an older one to the
// same recipient is held by another.
func testConcurrentClaimersOrder(e *env) {
	const recipients, per = 6, 30
	var out []store.Outgoing
	for i := range per {
		for r := range recipients {
			out = append(out, outgoing(e.t, "A", fmt.Sprintf("Target%d", r), fmt.Sprintf("m%d", i)))
		}
	}
	e.apply(store.Changes{Send: out})
	var mu sync.Mutex
	sent := make(map[string][]int64) // by recipient, in the order "sent"
	e.race(func(ctx context.Context, _ int) error {
		for {
			got, err := e.st.Claim(ctx, "A", 3, time.Hour)
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return nil
			}
			ids := make([]int64, len(got))
			mu.Lock()
			for i, o := range got {
				m, err := agency.DecodeMessage(o.Message)
				if err != nil {
					mu.Unlock()
					return err
				}
				sent[m.To] = append(sent[m.To], o.ID)
				ids[i] = o.ID
			}
			mu.Unlock()
			if err := e.st.Sent(ctx, ids...); err != nil {
				return err
			}
		}
	})
	for to, ids := range sent {
		if len(ids) != per || !slices.IsSorted(ids) {
			e.t.Errorf("%s: entries %v sent in this order, want %d in the order queued", to, ids, per)
		}
	}
	if len(sent) != recipients {
		e.t.Errorf("entries to %d recipients sent, want %d", len(sent), recipients)
	}
}

// testWritersAndRelays has 4 writers queue entries while 4 relays claim
// and mark them: every entry is claimed once and the outbox ends empty.
func testWritersAndRelays(e *env) {
	const perWriter = 40
	var written atomic.Int32
	var mu sync.Mutex
	claimed := make(map[int64]int)
	var msgs [workers][perWriter]store.Outgoing
	for w := range workers {
		for i := range perWriter {
			msgs[w][i] = outgoing(e.t, "A", fmt.Sprintf("Target%d", i%3), "ev")
		}
	}
	e.race(func(ctx context.Context, w int) error {
		if w%2 == 0 {
			defer written.Add(1)
			for i := range perWriter {
				err := e.st.Apply(ctx, store.Changes{
					Put:  []store.Doc{doc("event", fmt.Sprintf("w%d-%d", w, i), 0, `{}`)},
					Send: []store.Outgoing{msgs[w][i]},
				})
				if err != nil {
					return err
				}
			}
			return nil
		}
		for {
			done := written.Load() == workers/2 // read before claiming
			got, err := e.st.Claim(ctx, "A", 5, time.Hour)
			if err != nil {
				return err
			}
			if len(got) == 0 {
				if done {
					return nil
				}
				time.Sleep(time.Millisecond)
				continue
			}
			ids := make([]int64, len(got))
			mu.Lock()
			for i, o := range got {
				claimed[o.ID]++
				ids[i] = o.ID
			}
			mu.Unlock()
			if err := e.st.Sent(ctx, ids...); err != nil {
				return err
			}
		}
	})
	if want := workers / 2 * perWriter; len(claimed) != want {
		e.t.Errorf("%d entries claimed, want %d", len(claimed), want)
	}
	for id, n := range claimed {
		if n != 1 {
			e.t.Errorf("entry %d claimed %d times", id, n)
		}
	}
	if got := e.claim("", 10, time.Millisecond); len(got) != 0 {
		e.t.Errorf("%d entries left after every one was marked sent", len(got))
	}
}
