package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/actions/store/storetest"
	"github.com/seed72275b23/agency-go/agency"
)

func TestConformance(t *testing.T) {
	pgtest.URL(t) // one skip line, not one per subtest
	storetest.Run(t, func(t *testing.T) store.Store { return pgtest.New(t) })
}

func open(t *testing.T, dsn string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestProcessesStartingTogether: stores opened at once on an empty schema
// (replicas starting together) create it once, under the advisory lock.
func TestProcessesStartingTogether(t *testing.T) {
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := pgstore.Open(context.Background(), dsn)
			if err == nil {
				st.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	pool := pool(t, dsn)
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM store_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(files) {
		t.Errorf("%d migrations recorded, want %d", n, len(files))
	}
}

func pool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestSeveralPools: two stores on one schema, each with its own pool as
// two processes would have: what one writes the other reads, their claims
// never overlap, and the entries to each recipient are claimed in the
// order queued.
func TestSeveralPools(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	var c store.Changes
	for i := range 100 {
		o, err := store.NewOutgoing("Coordinator", &agency.Message{To: fmt.Sprintf("Agent%d", i%5), Action: "run"})
		if err != nil {
			t.Fatal(err)
		}
		c.Send = append(c.Send, o)
	}
	c.Put = []store.Doc{{Kind: "plan", ID: "p1", Body: []byte(`{}`)}}
	if err := a.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Get(ctx, "plan", "p1"); err != nil || d.Version != 1 {
		t.Fatalf("the other store reads %+v, %v", d, err)
	}
	var mu sync.Mutex
	claimed := make(map[int64]int)
	order := make(map[string][]int64) // by recipient, in the order claimed
	var wg sync.WaitGroup
	for _, st := range []store.Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := st.Claim(ctx, "Coordinator", 3, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				ids := make([]int64, len(got))
				mu.Lock()
				for i, o := range got {
					claimed[o.ID]++
					order[o.Recipient()] = append(order[o.Recipient()], o.ID)
					ids[i] = o.ID
				}
				mu.Unlock()
				if err := st.Sent(ctx, ids...); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(claimed) != 100 {
		t.Errorf("%d entries claimed, want 100", len(claimed))
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("entry %d claimed %d times", id, n)
		}
	}
	for to, ids := range order {
		if !slices.IsSorted(ids) {
			t.Errorf("entries to %s claimed in the order %v, want the order queued", to, ids)
		}
	}
}

func TestReopenAndNewerSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	st := open(t, dsn)
	if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "plan", ID: "p1", Body: []byte(`{"a": 1}`)}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = open(t, dsn)
	if d, err := st.Get(ctx, "plan", "p1"); err != nil || string(d.Body) != `{"a": 1}` {
		t.Fatalf("after reopening: %+v, %v", d, err)
	}
	st.Close()
	if _, err := pool(t, dsn).Exec(ctx, `INSERT INTO store_migrations (version, name) VALUES (99, '0099_future.sql')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Open(ctx, dsn); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a schema from a newer program: %v, want an error saying it is newer", err)
	}
}

func TestNewLeavesThePoolOpen(t *testing.T) {
	ctx := context.Background()
	p := pool(t, pgtest.DSN(t))
	st, err := pgstore.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := p.Ping(ctx); err != nil {
		t.Errorf("the caller's pool after Close: %v", err)
	}
	if _, err := st.Get(ctx, "plan", "p1"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
}

func TestMissingSchema(t *testing.T) {
	dsn := pgtest.WithSearchPath(pgtest.URL(t), "no_such_schema_here")
	_, err := pgstore.Open(context.Background(), dsn)
	if err == nil || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("Open with a search_path naming no schema: %v", err)
	}
}

// TestMigrateFromFirstSchema opens a schema written at version 1, with
// entries queued and a document: the migrations after it give the queued
// entries their recipients, so that claims keep the order per recipient,
// and the document goes on as before.
func TestMigrateFromFirstSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	first, err := os.ReadFile("migrations/0001_documents_and_outbox.sql")
	if err != nil {
		t.Fatal(err)
	}
	msg := func(to, action string) []byte {
		o, err := store.NewOutgoing("Coordinator", &agency.Message{To: to, Action: action})
		if err != nil {
			t.Fatal(err)
		}
		return o.Message
	}
	p := pool(t, dsn)
	for _, q := range []string{
		`CREATE TABLE store_migrations (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`,
		string(first),
		`INSERT INTO store_migrations (version, name) VALUES (1, '0001_documents_and_outbox.sql')`,
		`INSERT INTO store_documents (kind, id, parent, session_id, user_id, version, body, created, updated)
			VALUES ('plan', 'p1', '', '', 'u1', 3, '{"n":3}', now(), now())`,
	} {
		if _, err := p.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range [][]byte{msg("R", "r1"), msg("S", "s1"), msg("R", "r2")} {
		if _, err := p.Exec(ctx, `INSERT INTO store_outbox (sender, message, created) VALUES ('Coordinator', $1, now())`, m); err != nil {
			t.Fatal(err)
		}
	}

	st := open(t, dsn)
	actions := func(out []store.Outgoing) []string {
		var s []string
		for _, o := range out {
			m, err := agency.DecodeMessage(o.Message)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, m.Action)
		}
		return s
	}
	if got, err := st.Claim(ctx, "Coordinator", 1, time.Hour); err != nil || !slices.Equal(actions(got), []string{"r1"}) {
		t.Fatalf("first claim: %v, %v; want r1", actions(got), err)
	}
	if got, err := st.Claim(ctx, "Coordinator", 10, time.Hour); err != nil || !slices.Equal(actions(got), []string{"s1"}) {
		t.Fatalf("claim while r1 is held: %v, %v; want s1 (r2 waits behind r1)", actions(got), err)
	}
	d, err := st.Get(ctx, "plan", "p1")
	if err != nil || d.Version != 3 || string(d.Body) != `{"n":3}` {
		t.Fatalf("the document after the migrations: %+v, %v", d, err)
	}
	if err := st.Apply(ctx, store.Changes{Delete: []store.Doc{d}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "plan", ID: "p1", Body: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	if d, err := st.Get(ctx, "plan", "p1"); err != nil || d.Version != 4 {
		t.Errorf("created again: %+v, %v; want version 4", d, err)
	}
}
