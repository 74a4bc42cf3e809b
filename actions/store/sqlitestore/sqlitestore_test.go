package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/actions/store/storetest"
	"github.com/seed72275b23/agency-go/agency"
)

func open(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return st
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "store.db"))
	})
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	st := open(t, path)
	o, err := store.NewOutgoing("Coordinator", &agency.Message{To: "HrAgent", Action: "run"})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Apply(ctx, store.Changes{
		Put:  []store.Doc{{Kind: "plan", ID: "p1", User: "u1", Body: []byte(`{"goal":"onboard"}`)}},
		Send: []store.Outgoing{o},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Claimed by a relay that then dies with its process.
	if got, err := st.Claim(ctx, "Coordinator", 1, time.Millisecond); err != nil || len(got) != 1 {
		t.Fatalf("Claim: %v, %v", got, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = open(t, path)
	defer st.Close()
	d, err := st.Get(ctx, "plan", "p1")
	if err != nil || string(d.Body) != `{"goal":"onboard"}` || d.Version != 1 || d.User != "u1" {
		t.Fatalf("after reopening: %+v, %v", d, err)
	}
	var got []store.Outgoing
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0; time.Sleep(time.Millisecond) {
		if got, err = st.Claim(ctx, "Coordinator", 10, time.Hour); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the entry claimed before the restart never came back")
		}
	}
	if string(got[0].Message) != string(o.Message) || got[0].Attempts != 2 {
		t.Errorf("after reopening: %s at attempt %d, want the message at attempt 2", got[0].Message, got[0].Attempts)
	}
	// The schema was created once.
	db := rawDB(t, path)
	var n, version int
	if err := db.QueryRow(`SELECT count(*), max(version) FROM store_migrations`).Scan(&n, &version); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(files) || version != len(files) {
		t.Errorf("store_migrations has %d rows up to version %d, want %d rows up to version %d", n, version, len(files), len(files))
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q (%v), want wal", mode, err)
	}
}

// rawDB opens the file without the store, as another program would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestNewerSchemaIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	open(t, path).Close()
	if _, err := rawDB(t, path).Exec(`INSERT INTO store_migrations VALUES (99, '0099_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	_, err := sqlitestore.Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a file from a newer program: %v, want an error saying the schema is newer", err)
	}
}

func TestOpenRefusesWhatIsNoFile(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro", filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")} {
		if st, err := sqlitestore.Open(context.Background(), p); err == nil {
			st.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

// TestWriteWaitsWithinItsContext: while another program holds the write
// lock, a write waits, but no longer than its context lets it.
func TestWriteWaitsWithinItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	st := open(t, path)
	defer st.Close()
	db := rawDB(t, path)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "plan", ID: "p1", Body: []byte(`{}`)}}})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Apply while another program writes: %v, want DeadlineExceeded", err)
		}
	case <-time.After(sqlitestore.BusyTimeout / 2):
		t.Fatal("Apply ignored its context while waiting for the lock")
	}
	if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	// Once the lock is free, writes go through.
	if err := st.Apply(context.Background(), store.Changes{Put: []store.Doc{{Kind: "plan", ID: "p1", Body: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromFirstSchema opens a file written at schema version 1, with
// entries queued and a document: the migrations after it give the queued
// entries their recipients, so that claims keep the order per recipient,
// and the document goes on as before.
func TestMigrateFromFirstSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	db := rawDB(t, path)
	first, err := os.ReadFile("migrations/0001_documents_and_outbox.sql")
	if err != nil {
		t.Fatal(err)
	}
	msg := func(to, action string) string {
		o, err := store.NewOutgoing("Coordinator", &agency.Message{To: to, Action: action})
		if err != nil {
			t.Fatal(err)
		}
		return string(o.Message)
	}
	for _, q := range []string{
		`CREATE TABLE store_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied INTEGER NOT NULL) STRICT`,
		string(first),
		`INSERT INTO store_migrations VALUES (1, '0001_documents_and_outbox.sql', 0)`,
		`INSERT INTO store_documents (kind, id, parent, session_id, user_id, version, body, created, updated)
			VALUES ('plan', 'p1', '', '', 'u1', 3, '{"n":3}', 1, 2)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{msg("R", "r1"), msg("S", "s1"), msg("R", "r2")} {
		if _, err := db.Exec(`INSERT INTO store_outbox (sender, message, created) VALUES ('Coordinator', ?, 1)`, m); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	ctx := context.Background()
	st := open(t, path)
	defer st.Close()
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
