package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/actions/store/storetest"
	"github.com/seed72275b23/agency-go/agency"
)

// benchDir returns where the benchmarks put their file: the test's
// temporary directory on disk, or STORE_BENCH_DIR (/dev/shm, say, to
// measure without the disk's fsync).
func benchDir(tb testing.TB) string {
	if d := os.Getenv("STORE_BENCH_DIR"); d != "" {
		d, err := os.MkdirTemp(d, "storebench")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return tb.TempDir()
}

// BenchmarkSQLite measures a store on a file in the test's temporary
// directory (on this machine's disk, synchronous=FULL: each Apply waits
// for an fsync).
func BenchmarkSQLite(b *testing.B) {
	storetest.Benchmark(b, func(tb testing.TB) store.Store {
		st, err := sqlitestore.Open(context.Background(), filepath.Join(benchDir(tb), "bench.db"))
		if err != nil {
			tb.Fatal(err)
		}
		return st
	})
}

// BenchmarkSQLiteBaseline is ApplyOne written by hand on the same file and
// settings, with the same guarantees: in one BEGIN IMMEDIATE transaction,
// an UPDATE that checks the version and an INSERT into the outbox. It is
// what the store's ApplyOne is compared with.
func BenchmarkSQLiteBaseline(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(benchDir(b), "bench.db")
	st, err := sqlitestore.Open(ctx, path) // creates the schema
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "step", ID: "s1", Parent: "p1", User: "u1", Body: []byte(`{}`)}}}); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(50)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	msg := benchMessage(b)
	version := int64(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		r, err := tx.ExecContext(ctx, `UPDATE store_documents SET body = ?, version = version + 1, updated = ?
			WHERE kind = ? AND id = ? AND version = ? AND NOT deleted`,
			`{"status":"approved","n":`+strconv.Itoa(i)+`}`, time.Now().UnixMicro(), "step", "s1", version)
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			b.Fatal("conflict")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO store_outbox (sender, recipient, message, created) VALUES (?, ?, ?, ?)`,
			"Coordinator", "HrAgent", string(msg), time.Now().UnixMicro()); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		version++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
}

// benchMessage is storetest.Benchmark's message, in the wire form.
func benchMessage(b *testing.B) []byte {
	o, err := store.NewOutgoing("Coordinator", &agency.Message{To: "HrAgent", Action: "create_employee_record",
		Meta: map[string]any{"idempotency_key": "step-0123456789abcdef", "conversation": "plan-0123456789abcdef"},
		Args: map[string]string{"name": "Jessica Smith", "department": "Engineering"}})
	if err != nil {
		b.Fatal(err)
	}
	return o.Message
}
