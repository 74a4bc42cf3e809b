// Package sqlitestore is a [store.Store] in one SQLite file, through
// modernc.org/sqlite (pure Go, no cgo): the embedded default, for a
// program that runs in one process.
//
//	st, err := sqlitestore.Open(ctx, "plans.db")
//	if err != nil { … }
//	defer st.Close()
//
// The file is in WAL mode with synchronous=FULL: a committed Apply survives
// a crash of the process and of the machine. Readers never wait for the
// writer. Writers take turns: within the process on a lock, between
// processes on SQLite's lock, retried while their context lets them and
// for BusyTimeout at most.
// Several processes may open the same file (a command-line tool beside the
// program, say); a deployment over several machines uses pgstore.
//
// The schema is created, and later versions of it applied, by Open, in one
// transaction, recorded in the table store_migrations.
package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // and the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// BusyTimeout is how long a write waits at most for another process's
// write before it fails (sooner when its context ends).
const BusyTimeout = 10 * time.Second

// busyStep is SQLite's own busy timeout, set in the DSN: how long one
// attempt to take the lock waits inside SQLite, where a context cannot
// reach it. The store retries in steps of this size.
const busyStep = 50 * time.Millisecond

// Store is a store.Store on one SQLite file. Its methods are safe for
// concurrent use.
type Store struct {
	db *sql.DB
	// Apply's statements, prepared by Open.
	insertDoc, reviveDoc, updateDoc, updateIndex, deleteDoc, insertOut *sql.Stmt

	write  chan struct{} // one writer at a time in this process
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open opens the SQLite file at path, creating it when it does not exist,
// and brings its schema up to date. path is a file name, not a URI; it may
// not contain '?'.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlitestore: %q is not a file name (an in-memory store is store.NewMemory)", path)
	}
	dsn := path + fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate",
		busyStep.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	db.SetMaxIdleConns(4)
	s := &Store{db: db, write: make(chan struct{}, 1)}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: %s: %w", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	tx, err := s.begin(ctx) // one migrator at a time
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS store_migrations (
		version INTEGER PRIMARY KEY,
		name    TEXT    NOT NULL,
		applied INTEGER NOT NULL
	) STRICT`); err != nil {
		return err
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM store_migrations`).Scan(&current); err != nil {
		return err
	}
	pending, err := migrate.Pending(ms, current)
	if err != nil {
		return err
	}
	for _, m := range pending {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO store_migrations (version, name, applied) VALUES (?, ?, ?)`,
			m.Version, m.Name, micros(time.Now())); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(n int64) time.Time { return time.UnixMicro(n).UTC() }

// enter checks what every call checks first.
func (s *Store) enter(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// lockWrite takes this process's write turn, or fails when ctx ends first.
func (s *Store) lockWrite(ctx context.Context) error {
	select {
	case s.write <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) unlockWrite() { <-s.write }

// begin starts a write transaction (BEGIN IMMEDIATE, from the DSN's
// _txlock), waiting for another process's writer in steps of busyStep
// while ctx lets it, BusyTimeout at most.
func (s *Store) begin(ctx context.Context) (*sql.Tx, error) {
	deadline := time.Now().Add(BusyTimeout)
	for {
		tx, err := s.db.BeginTx(ctx, nil)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return tx, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// isBusy reports whether err is SQLITE_BUSY: another connection holds the
// lock.
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// fail turns an error of the database into one that callers can branch on.
func (s *Store) fail(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("sqlitestore: %w (%v)", ctx.Err(), err)
	}
	if s.closed.Load() || errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("%w (%v)", store.ErrClosed, err)
	}
	if errors.Is(err, store.ErrConflict) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("sqlitestore: %w", err)
}

const docColumns = `kind, id, parent, session_id, user_id, version, body, created, updated`

type scanner interface{ Scan(dest ...any) error }

func scanDoc(r scanner) (store.Doc, error) {
	var d store.Doc
	var created, updated int64
	if err := r.Scan(&d.Kind, &d.ID, &d.Parent, &d.Session, &d.User, &d.Version, (*[]byte)(&d.Body), &created, &updated); err != nil {
		return store.Doc{}, err
	}
	d.Created, d.Updated = fromMicros(created), fromMicros(updated)
	return d, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, kind, id string) (store.Doc, error) {
	if err := store.ValidateKey(kind, id); err != nil {
		return store.Doc{}, err
	}
	if err := s.enter(ctx); err != nil {
		return store.Doc{}, err
	}
	d, err := scanDoc(s.db.QueryRowContext(ctx,
		`SELECT `+docColumns+` FROM store_documents WHERE kind = ? AND id = ? AND NOT deleted`, kind, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Doc{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	}
	return d, s.fail(ctx, err)
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, q store.Query) ([]store.Doc, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	var b strings.Builder
	args := []any{q.Kind}
	b.WriteString(`SELECT ` + docColumns + ` FROM store_documents WHERE kind = ? AND NOT deleted`)
	for _, f := range []struct{ col, val string }{{"parent", q.Parent}, {"session_id", q.Session}, {"user_id", q.User}} {
		if f.val != "" {
			b.WriteString(` AND ` + f.col + ` = ?`)
			args = append(args, f.val)
		}
	}
	if q.Newest {
		b.WriteString(` ORDER BY seq DESC`)
	} else {
		b.WriteString(` ORDER BY seq`)
	}
	if q.Limit > 0 {
		b.WriteString(` LIMIT ?`)
		args = append(args, q.Limit)
	}
	rows, err := s.db.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	defer rows.Close()
	docs := []store.Doc{}
	for rows.Next() {
		d, err := scanDoc(rows)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		docs = append(docs, d)
	}
	return docs, s.fail(ctx, rows.Err())
}

// Apply implements store.Store.
func (s *Store) Apply(ctx context.Context, c store.Changes) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	if len(c.Put)+len(c.Delete)+len(c.Send) == 0 {
		return nil
	}
	if err := s.lockWrite(ctx); err != nil {
		return err
	}
	defer s.unlockWrite()
	return s.fail(ctx, s.apply(ctx, c))
}

// The statements of Apply, prepared once; database/sql keeps each
// connection's prepared copy.
const (
	sqlInsertDoc = `INSERT INTO store_documents (` + docColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (kind, id) DO NOTHING`
	// A creation where a tombstone stands removes it and inserts the
	// document at the next version, with a new seq.
	sqlReviveDoc = `DELETE FROM store_documents WHERE kind = ? AND id = ? AND deleted RETURNING version`
	// The index fields are written by a second statement, only when they
	// change: assigning them, even to the same value, rewrites three
	// index entries. (RETURNING them from the first would cost a statement
	// journal.)
	sqlUpdateDoc = `UPDATE store_documents SET version = version + 1, body = ?, updated = ?
		WHERE kind = ? AND id = ? AND version = ? AND NOT deleted`
	sqlUpdateIndex = `UPDATE store_documents SET parent = ?, session_id = ?, user_id = ?
		WHERE kind = ? AND id = ? AND (parent <> ? OR session_id <> ? OR user_id <> ?)`
	// Deleting leaves a tombstone at the version deleted (see migration 3).
	sqlDeleteDoc = `UPDATE store_documents SET deleted = 1, body = 'null', parent = '', session_id = '', user_id = '', updated = ?
		WHERE kind = ? AND id = ? AND version = ? AND NOT deleted`
	sqlInsertOut = `INSERT INTO store_outbox (sender, recipient, message, created) VALUES (?, ?, ?, ?)`
)

func (s *Store) prepare(ctx context.Context) error {
	for q, p := range map[string]**sql.Stmt{
		sqlInsertDoc: &s.insertDoc, sqlReviveDoc: &s.reviveDoc, sqlUpdateDoc: &s.updateDoc, sqlUpdateIndex: &s.updateIndex,
		sqlDeleteDoc: &s.deleteDoc, sqlInsertOut: &s.insertOut,
	} {
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		*p = st
	}
	return nil
}

func (s *Store) apply(ctx context.Context, c store.Changes) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := micros(time.Now())
	exec := func(st *sql.Stmt, args ...any) (bool, error) {
		r, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		if err != nil {
			return false, err
		}
		n, err := r.RowsAffected()
		return n == 1, err
	}
	for _, d := range c.Put {
		if d.Version == 0 {
			ok, err := exec(s.insertDoc, d.Kind, d.ID, d.Parent, d.Session, d.User, 1, string(d.Body), now, now)
			if err != nil {
				return err
			}
			if !ok {
				var last int64
				err := tx.StmtContext(ctx, s.reviveDoc).QueryRowContext(ctx, d.Kind, d.ID).Scan(&last)
				if errors.Is(err, sql.ErrNoRows) {
					return store.Conflict(d, false) // it exists
				}
				if err != nil {
					return err
				}
				if _, err := exec(s.insertDoc, d.Kind, d.ID, d.Parent, d.Session, d.User, last+1, string(d.Body), now, now); err != nil {
					return err
				}
			}
			continue
		}
		ok, err := exec(s.updateDoc, string(d.Body), now, d.Kind, d.ID, d.Version)
		if err != nil {
			return err
		}
		if !ok {
			return store.Conflict(d, false)
		}
		if _, err := exec(s.updateIndex, d.Parent, d.Session, d.User, d.Kind, d.ID, d.Parent, d.Session, d.User); err != nil {
			return err
		}
	}
	for _, d := range c.Delete {
		ok, err := exec(s.deleteDoc, now, d.Kind, d.ID, d.Version)
		if err != nil {
			return err
		}
		if !ok {
			return store.Conflict(d, true)
		}
	}
	for _, o := range c.Send {
		if _, err := exec(s.insertOut, o.From, o.Recipient(), string(o.Message), now); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, from string, limit int, lease time.Duration) ([]store.Outgoing, error) {
	if err := store.ValidateClaim(limit, lease); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	if err := s.lockWrite(ctx); err != nil {
		return nil, err
	}
	defer s.unlockWrite()
	out, err := s.claim(ctx, from, limit, lease)
	return out, s.fail(ctx, err)
}

func (s *Store) claim(ctx context.Context, from string, limit int, lease time.Duration) ([]store.Outgoing, error) {
	now := micros(time.Now())
	// Oldest first, those not leased, but none behind a leased entry of
	// its sender to its recipient: that keeps the order per recipient.
	pick := `SELECT id FROM store_outbox o WHERE lease_until <= ?1 AND NOT EXISTS (
			SELECT 1 FROM store_outbox p
			WHERE p.sender = o.sender AND p.recipient = o.recipient AND p.id < o.id AND p.lease_until > ?1)`
	args := []any{now, micros(time.UnixMicro(now).Add(lease)), limit}
	if from != "" {
		pick += ` AND sender = ?4`
		args = append(args, from)
	}
	pick += ` ORDER BY id LIMIT ?3`
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `UPDATE store_outbox SET lease_until = ?2, attempts = attempts + 1
		WHERE id IN (`+pick+`)
		RETURNING id, sender, message, created, attempts`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Outgoing
	for rows.Next() {
		var o store.Outgoing
		var created int64
		if err := rows.Scan(&o.ID, &o.From, (*[]byte)(&o.Message), &created, &o.Attempts); err != nil {
			return nil, err
		}
		o.Created = fromMicros(created)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.Outgoing) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, after time.Duration, entries ...store.Outgoing) error {
	if err := store.ValidateRelease(after); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if err := s.lockWrite(ctx); err != nil {
		return err
	}
	defer s.unlockWrite()
	return s.fail(ctx, s.release(ctx, after, entries))
}

func (s *Store) release(ctx context.Context, after time.Duration, entries []store.Outgoing) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `UPDATE store_outbox SET lease_until = ? WHERE id = ? AND attempts = ?`)
	if err != nil {
		return err
	}
	defer st.Close()
	until := micros(time.Now().Add(after))
	for _, o := range entries {
		if _, err := st.ExecContext(ctx, until, o.ID, o.Attempts); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Sent implements store.Store.
func (s *Store) Sent(ctx context.Context, ids ...int64) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	if err := s.lockWrite(ctx); err != nil {
		return err
	}
	defer s.unlockWrite()
	return s.fail(ctx, s.sent(ctx, ids))
}

func (s *Store) sent(ctx context.Context, ids []int64) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for chunk := range slices.Chunk(ids, 500) {
		q := `DELETE FROM store_outbox WHERE id IN (?` + strings.Repeat(`, ?`, len(chunk)-1) + `)`
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Close closes the database. It waits for calls under way; later calls
// return store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}
