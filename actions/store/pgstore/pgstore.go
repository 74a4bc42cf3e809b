// Package pgstore is a [store.Store] on PostgreSQL, through
// github.com/jackc/pgx/v5: for programs spread over several processes or
// machines, which share one database.
//
//	st, err := pgstore.Open(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil { … }
//	defer st.Close()
//
// The tables live in the first schema of the connection's search_path
// (set it in the DSN, e.g. "postgres://…/db?search_path=agents", to keep
// several stores in one database). Open creates them, and later versions
// of the schema are applied, in one transaction under an advisory lock, so
// that processes starting together do not race; the versions applied are
// in the table store_migrations.
//
// Outbox claims pick rows FOR UPDATE SKIP LOCKED and set their lease in
// the same statement, so relays in several processes never hold the same
// row. The claims of one sender take turns (an advisory lock, for the
// length of the claim), so that each sees the leases of the one before
// and the order per recipient holds across processes; the claims of
// different senders never wait for each other. Times (Created, Updated, leases) come
// from the database server's clock.
package pgstore

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a store.Store on a PostgreSQL database. Its methods are safe
// for concurrent use, and any number of Stores, in any number of
// processes, may share one database.
type Store struct {
	pool   *pgxpool.Pool
	own    bool // Open made the pool, so Close closes it
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database dsn names (a URL or key=value string, as
// pgxpool.ParseConfig reads it), brings the schema up to date and returns
// the store, which closes the pool on Close.
func Open(ctx context.Context, dsn string) (*Store, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s, err := New(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New returns a store on a pool the caller made and closes, after
// bringing the schema up to date. Close leaves the pool open.
func New(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	s := &Store{pool: pool}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var schema *string
		if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return err
		}
		if schema == nil {
			return errors.New("no schema of the search_path exists: create it first")
		}
		// One migrator per schema at a time; the lock ends with the
		// transaction.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7135201, hashtext(current_schema()))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS store_migrations (
			version integer     PRIMARY KEY,
			name    text        NOT NULL,
			applied timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM store_migrations`).Scan(&current); err != nil {
			return err
		}
		pending, err := migrate.Pending(ms, current)
		if err != nil {
			return fmt.Errorf("schema %s: %w", *schema, err)
		}
		for _, m := range pending {
			// Without arguments, Exec runs the file through the simple
			// protocol, which takes several statements.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO store_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// enter checks what every call checks first.
func (s *Store) enter(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// fail turns an error of the database into one that callers can branch on.
func (s *Store) fail(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrConflict) {
		return err
	}
	if ctx.Err() != nil {
		if errors.Is(err, ctx.Err()) {
			return fmt.Errorf("pgstore: %w", err)
		}
		return fmt.Errorf("pgstore: %w (%v)", ctx.Err(), err)
	}
	if s.closed.Load() {
		return fmt.Errorf("%w (%v)", store.ErrClosed, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") {
		// Two Applies locked the same documents in opposite orders
		// (deadlock_detected) or could not be serialised: the loser wrote
		// nothing, and reading again and retrying is the way on.
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	}
	return fmt.Errorf("pgstore: %w", err)
}

const docColumns = `kind, id, parent, session_id, user_id, version, body, created, updated`

func scanDoc(r pgx.Row) (store.Doc, error) {
	var d store.Doc
	if err := r.Scan(&d.Kind, &d.ID, &d.Parent, &d.Session, &d.User, &d.Version, (*[]byte)(&d.Body), &d.Created, &d.Updated); err != nil {
		return store.Doc{}, err
	}
	d.Created, d.Updated = d.Created.UTC(), d.Updated.UTC()
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
	d, err := scanDoc(s.pool.QueryRow(ctx,
		`SELECT `+docColumns+` FROM store_documents WHERE kind = $1 AND id = $2 AND NOT deleted`, kind, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
	sql := `SELECT ` + docColumns + ` FROM store_documents WHERE kind = $1 AND NOT deleted`
	args := []any{q.Kind}
	for _, f := range []struct{ col, val string }{{"parent", q.Parent}, {"session_id", q.Session}, {"user_id", q.User}} {
		if f.val != "" {
			args = append(args, f.val)
			sql += fmt.Sprintf(` AND %s = $%d`, f.col, len(args))
		}
	}
	if q.Newest {
		sql += ` ORDER BY seq DESC`
	} else {
		sql += ` ORDER BY seq`
	}
	if q.Limit > 0 {
		args = append(args, q.Limit)
		sql += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	docs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Doc, error) { return scanDoc(r) })
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return docs, nil
}

// Apply implements store.Store. Its statements go to the server in one
// batch, inside one transaction.
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
	return s.fail(ctx, pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.apply(ctx, tx, c) }))
}

// change is one statement of an Apply whose row count is checked.
type change struct {
	doc      store.Doc
	deleting bool
}

func (s *Store) apply(ctx context.Context, tx pgx.Tx, c store.Changes) error {
	// Rows that exist are locked in the order of their keys, so that two
	// Applies on the same documents wait for each other rather than
	// deadlock; new rows are inserted in the order given, which is their
	// creation order.
	var existing, created []change
	for _, d := range c.Put {
		if d.Version == 0 {
			created = append(created, change{doc: d})
		} else {
			existing = append(existing, change{doc: d})
		}
	}
	for _, d := range c.Delete {
		existing = append(existing, change{doc: d, deleting: true})
	}
	slices.SortFunc(existing, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.doc.Kind, b.doc.Kind), cmp.Compare(a.doc.ID, b.doc.ID))
	})
	checked := append(existing, created...)

	b := &pgx.Batch{}
	for _, ch := range checked {
		d := ch.doc
		switch {
		case ch.deleting:
			// A tombstone stays, at the version deleted (migration 3).
			b.Queue(`UPDATE store_documents
				SET deleted = true, body = 'null', parent = '', session_id = '', user_id = '', updated = now()
				WHERE kind = $1 AND id = $2 AND version = $3 AND NOT deleted`, d.Kind, d.ID, d.Version)
		case d.Version == 0:
			// Where a tombstone stands, the document takes its row, at
			// the next version and with a new seq; the upsert locks the
			// row, so a delete committing meanwhile is seen.
			b.Queue(`INSERT INTO store_documents (`+docColumns+`) VALUES ($1, $2, $3, $4, $5, 1, $6, now(), now())
				ON CONFLICT (kind, id) DO UPDATE
				SET seq = DEFAULT, parent = EXCLUDED.parent, session_id = EXCLUDED.session_id, user_id = EXCLUDED.user_id,
					version = store_documents.version + 1, body = EXCLUDED.body, created = now(), updated = now(), deleted = false
				WHERE store_documents.deleted`,
				d.Kind, d.ID, d.Parent, d.Session, d.User, []byte(d.Body))
		default:
			b.Queue(`UPDATE store_documents
				SET parent = $3, session_id = $4, user_id = $5, version = version + 1, body = $6, updated = now()
				WHERE kind = $1 AND id = $2 AND version = $7 AND NOT deleted`,
				d.Kind, d.ID, d.Parent, d.Session, d.User, []byte(d.Body), d.Version)
		}
	}
	for _, o := range c.Send {
		b.Queue(`INSERT INTO store_outbox (sender, recipient, message, created) VALUES ($1, $2, $3, now())`,
			o.From, o.Recipient(), []byte(o.Message))
	}
	br := tx.SendBatch(ctx, b)
	for _, ch := range checked {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if tag.RowsAffected() != 1 {
			br.Close()
			return store.Conflict(ch.doc, ch.deleting)
		}
	}
	return br.Close() // runs and checks the outbox inserts
}

// Claim implements store.Store. Claims of one sender take turns on an
// advisory lock held until their transaction ends, so that each sees the
// leases of the one before and none hands out an entry behind another
// claim's; claims of different senders run side by side, and rows locked
// by an Apply, a Release or a Sent are skipped, not waited for.
func (s *Store) Claim(ctx context.Context, from string, limit int, lease time.Duration) ([]store.Outgoing, error) {
	if err := store.ValidateClaim(limit, lease); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	// A claim of every sender takes the store's claim lock alone; a claim
	// of one sender shares it and takes its sender's.
	lock := `SELECT pg_advisory_xact_lock(hashtextextended('store_outbox claim ' || current_schema(), 0))`
	var lockArgs []any
	// Oldest first, those not leased, but none behind a leased entry of
	// its sender to its recipient: that keeps the order per recipient.
	pick := `SELECT id FROM store_outbox o WHERE lease_until <= now() AND NOT EXISTS (
			SELECT FROM store_outbox p
			WHERE p.sender = o.sender AND p.recipient = o.recipient AND p.id < o.id AND p.lease_until > now())`
	args := []any{lease.Microseconds(), limit}
	if from != "" {
		lock = `SELECT pg_advisory_xact_lock_shared(hashtextextended('store_outbox claim ' || current_schema(), 0)),
			pg_advisory_xact_lock(hashtextextended('store_outbox claim ' || current_schema() || ' ' || $1, 0))`
		lockArgs = []any{from}
		pick += ` AND sender = $3`
		args = append(args, from)
	}
	pick += ` ORDER BY id LIMIT $2 FOR UPDATE OF o SKIP LOCKED`
	// One round trip: a batch outside a transaction runs as one implicit
	// transaction, which holds the lock until the claim is committed, and
	// the claim's statement takes its snapshot after the lock is granted.
	b := &pgx.Batch{}
	b.Queue(lock, lockArgs...)
	b.Queue(`WITH picked AS (`+pick+`)
		UPDATE store_outbox o SET lease_until = now() + $1 * interval '1 microsecond', attempts = o.attempts + 1
		FROM picked WHERE o.id = picked.id
		RETURNING o.id, o.sender, o.message, o.created, o.attempts`, args...)
	br := s.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	var out []store.Outgoing
	if err == nil {
		var rows pgx.Rows
		rows, err = br.Query()
		if err == nil {
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Outgoing, error) {
				var o store.Outgoing
				err := r.Scan(&o.ID, &o.From, (*[]byte)(&o.Message), &o.Created, &o.Attempts)
				o.Created = o.Created.UTC()
				return o, err
			})
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, s.fail(ctx, err)
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
	ids := make([]int64, len(entries))
	attempts := make([]int32, len(entries))
	for i, o := range entries {
		ids[i], attempts[i] = o.ID, int32(o.Attempts)
	}
	_, err := s.pool.Exec(ctx, `UPDATE store_outbox o SET lease_until = now() + $1 * interval '1 microsecond'
		FROM unnest($2::bigint[], $3::integer[]) AS r(id, attempts)
		WHERE o.id = r.id AND o.attempts = r.attempts`, after.Microseconds(), ids, attempts)
	return s.fail(ctx, err)
}

// Sent implements store.Store.
func (s *Store) Sent(ctx context.Context, ids ...int64) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM store_outbox WHERE id = ANY($1)`, ids)
	return s.fail(ctx, err)
}

// Close closes the pool if Open made it. Later calls return
// store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.own {
		s.pool.Close()
	}
	return nil
}
