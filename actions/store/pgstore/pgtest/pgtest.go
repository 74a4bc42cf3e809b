// Package pgtest helps tests that need PostgreSQL: it reads DATABASE_URL,
// gives each test a schema of its own (dropped when the test ends), and
// skips the test with a line saying how to run it when no database is
// configured or answers, unless CI=true, where that fails the test.
//
//	func TestWithPostgres(t *testing.T) {
//		st := pgtest.New(t) // a pgstore.Store in a fresh schema
//		…
//	}
//
// For a test that starts other processes, DSN returns a connection string
// whose search_path is a fresh schema, to hand to each process.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed72275b23/agency-go/actions/store/pgstore"
)

// DefaultURL is a DATABASE_URL that works on a machine with PostgreSQL on
// its default port and trust authentication.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test"

var (
	probeOnce sync.Once
	probeErr  error
)

// URL returns DATABASE_URL. When it is empty or no database answers there,
// it skips t, or fails it if CI is "true".
func URL(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and DATABASE_URL is not set: the PostgreSQL tests need it (e.g. DATABASE_URL=%s)", DefaultURL)
		}
		t.Skipf("DATABASE_URL is not set: run DATABASE_URL=%s go test … to run the PostgreSQL tests", DefaultURL)
	}
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			probeErr = err
			return
		}
		probeErr = c.Ping(ctx)
		_ = c.Close(ctx)
	})
	if probeErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no PostgreSQL at DATABASE_URL: %v", probeErr)
		}
		t.Skipf("no PostgreSQL at DATABASE_URL (%v): start one (pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) or point DATABASE_URL elsewhere to run the PostgreSQL tests", probeErr)
	}
	return dsn
}

// DSN creates a schema (see Schema) and returns DATABASE_URL with that
// schema as its search_path.
func DSN(t testing.TB) string {
	t.Helper()
	return WithSearchPath(URL(t), Schema(t))
}

// Schema creates a schema with a random name, dropped with everything in
// it when t ends, and returns its name.
func Schema(t testing.TB) string {
	t.Helper()
	dsn := URL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "storetest_" + hex.EncodeToString(b[:])
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
	if err := exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if err := exec(`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// WithSearchPath returns dsn, a URL or a key=value connection string, with
// its search_path set to schema.
func WithSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return fmt.Sprintf("%s search_path=%s", dsn, schema)
}

// New returns a store in a fresh schema (see DSN), closed when t ends,
// before the schema is dropped.
func New(t testing.TB) *pgstore.Store {
	t.Helper()
	dsn := DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("pgstore.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
