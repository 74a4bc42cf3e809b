// Package pgtest helps tests that need PostgreSQL: it uses DATABASE_URL, or
// PostgreSQL on localhost (DefaultURL), gives each test a schema of its own
// (dropped when the test ends), and skips the test with a line saying how
// to run it when no database answers, unless CI=true, where that fails the
// test.
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
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

// DefaultURL is the database the tests use when DATABASE_URL is not set:
// PostgreSQL on localhost, its default port, trust authentication.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test"

var (
	probeMu sync.Mutex
	probed  = map[string]error{} // URL → why no database answers there, nil when one does
)

// note tells of skipped tests where go test shows it; a variable, for this
// package's tests.
var note = testenv.Note

// URL returns DATABASE_URL, or DefaultURL when that is not set. When no
// database answers there, it skips t, or fails it if CI is "true". The
// message names the URL without its password, and without -v (where go
// test shows no skip message) it also goes once per package where go test
// shows it, beside the package's "ok" line.
func URL(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		dsn = DefaultURL
	}
	err := probe(dsn)
	if err == nil {
		return dsn
	}
	shown := redact(dsn)
	if testenv.CI() {
		t.Fatalf("CI=true and no PostgreSQL at %s: %v", shown, err)
	}
	msg := fmt.Sprintf("no PostgreSQL at %s (%v): start one (pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start), or point DATABASE_URL at one, to run the PostgreSQL tests", shown, err)
	note("skipping the tests that need PostgreSQL", msg)
	t.Skip(msg)
	return dsn
}

// probe connects to dsn once per process and remembers the answer.
func probe(dsn string) error {
	probeMu.Lock()
	defer probeMu.Unlock()
	if err, ok := probed[dsn]; ok {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err == nil {
		err = c.Ping(ctx)
		_ = c.Close(ctx)
	}
	if err != nil {
		// pgx puts each address tried on a line of its own: one line, for
		// the note.
		err = errors.New(strings.Join(strings.Fields(scrub(err.Error(), dsn)), " "))
	}
	probed[dsn] = err
	return err
}

// redact returns dsn with its password replaced by "xxxxx".
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	if p := password(dsn); p != "" {
		return strings.ReplaceAll(dsn, p, "xxxxx")
	}
	return dsn
}

// scrub removes the password of dsn from msg.
func scrub(msg, dsn string) string {
	if p := password(dsn); p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}

// password returns the password in dsn, a URL or a key=value string.
func password(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		p, _ := u.User.Password()
		return p
	}
	for f := range strings.FieldsSeq(dsn) {
		if p, ok := strings.CutPrefix(f, "password="); ok {
			return strings.Trim(p, "'")
		}
	}
	return ""
}

// DSN creates a schema (see Schema) and returns URL's database with that
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
