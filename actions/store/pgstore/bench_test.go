package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/actions/store/storetest"
	"github.com/seed72275b23/agency-go/agency"
)

// BenchmarkPostgres measures a store in a fresh schema of DATABASE_URL's
// database.
func BenchmarkPostgres(b *testing.B) {
	pgtest.URL(b)
	storetest.Benchmark(b, func(tb testing.TB) store.Store { return pgtest.New(tb) })
}

// BenchmarkPostgresBaseline is ApplyOne written by hand with pgx on the
// same database, with the same guarantees: in one transaction, an UPDATE
// that checks the version and an INSERT into the outbox, sent as one
// batch. It is what the store's ApplyOne is compared with.
func BenchmarkPostgresBaseline(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	st, err := pgstore.Open(ctx, dsn) // creates the schema
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "step", ID: "s1", Parent: "p1", User: "u1", Body: []byte(`{}`)}}}); err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	o, err := store.NewOutgoing("Coordinator", &agency.Message{To: "HrAgent", Action: "create_employee_record",
		Meta: map[string]any{"idempotency_key": "step-0123456789abcdef", "conversation": "plan-0123456789abcdef"},
		Args: map[string]string{"name": "Jessica Smith", "department": "Engineering"}})
	if err != nil {
		b.Fatal(err)
	}
	version := int64(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			batch := &pgx.Batch{}
			batch.Queue(`UPDATE store_documents SET body = $1, version = version + 1, updated = now()
				WHERE kind = $2 AND id = $3 AND version = $4 AND NOT deleted`,
				[]byte(`{"status":"approved","n":`+strconv.Itoa(i)+`}`), "step", "s1", version)
			batch.Queue(`INSERT INTO store_outbox (sender, recipient, message, created) VALUES ($1, $2, $3, now())`,
				"Coordinator", "HrAgent", []byte(o.Message))
			br := tx.SendBatch(ctx, batch)
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return errors.New("conflict")
			}
			return br.Close()
		})
		if err != nil {
			b.Fatal(err)
		}
		version++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
}
