package store

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// NewMemory returns a Store that keeps everything in the process's memory:
// for tests, and for programs that need no restart story. It keeps the
// whole contract, outbox claims and leases included, and forgets
// everything when the process ends.
func NewMemory() Store {
	return &memory{docs: make(map[docKey]*memDoc), deleted: make(map[docKey]int64)}
}

type docKey struct{ kind, id string }

type memDoc struct {
	seq int64 // creation order
	doc Doc
}

type memOut struct {
	out   Outgoing
	to    string    // the recipient
	until time.Time // claimed until
}

// queueKey is what Claim keeps the order of: a sender's entries to one
// recipient.
type queueKey struct{ from, to string }

type memory struct {
	mu     sync.Mutex
	closed bool
	seq    int64 // last document sequence number
	outSeq int64 // last outbox id
	docs   map[docKey]*memDoc
	// deleted holds the last version of each deleted document, so that
	// one created again goes on from there.
	deleted map[docKey]int64
	outbox  []*memOut // in id order
}

// now is the store's clock: UTC, microseconds, as on PostgreSQL.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func (m *memory) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

func copyDoc(d Doc) Doc {
	d.Body = bytes.Clone(d.Body)
	return d
}

func (m *memory) Get(ctx context.Context, kind, id string) (Doc, error) {
	if err := ValidateKey(kind, id); err != nil {
		return Doc{}, err
	}
	if err := m.enter(ctx); err != nil {
		return Doc{}, err
	}
	defer m.mu.Unlock()
	d, ok := m.docs[docKey{kind, id}]
	if !ok {
		return Doc{}, fmt.Errorf("%w: %s/%s", ErrNotFound, kind, id)
	}
	return copyDoc(d.doc), nil
}

func (m *memory) List(ctx context.Context, q Query) ([]Doc, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var found []*memDoc
	for _, d := range m.docs {
		if d.doc.Kind == q.Kind &&
			(q.Parent == "" || d.doc.Parent == q.Parent) &&
			(q.Session == "" || d.doc.Session == q.Session) &&
			(q.User == "" || d.doc.User == q.User) {
			found = append(found, d)
		}
	}
	slices.SortFunc(found, func(a, b *memDoc) int {
		if q.Newest {
			a, b = b, a
		}
		return cmp.Compare(a.seq, b.seq)
	})
	if q.Limit > 0 && len(found) > q.Limit {
		found = found[:q.Limit]
	}
	docs := make([]Doc, len(found))
	for i, d := range found {
		docs[i] = copyDoc(d.doc)
	}
	return docs, nil
}

func (m *memory) Apply(ctx context.Context, c Changes) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := m.enter(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	// Check everything first, so that a conflict leaves no trace.
	for _, d := range c.Put {
		cur, ok := m.docs[docKey{d.Kind, d.ID}]
		if (d.Version == 0 && ok) || (d.Version != 0 && (!ok || cur.doc.Version != d.Version)) {
			return Conflict(d, false)
		}
	}
	for _, d := range c.Delete {
		cur, ok := m.docs[docKey{d.Kind, d.ID}]
		if !ok || cur.doc.Version != d.Version {
			return Conflict(d, true)
		}
	}
	t := now()
	for _, d := range c.Put {
		k := docKey{d.Kind, d.ID}
		d = copyDoc(d)
		d.Version++
		d.Updated = t
		if cur, ok := m.docs[k]; ok {
			d.Created = cur.doc.Created
			cur.doc = d
			continue
		}
		d.Created = t
		d.Version += m.deleted[k]
		delete(m.deleted, k)
		m.seq++
		m.docs[k] = &memDoc{seq: m.seq, doc: d}
	}
	for _, d := range c.Delete {
		k := docKey{d.Kind, d.ID}
		m.deleted[k] = m.docs[k].doc.Version
		delete(m.docs, k)
	}
	for _, o := range c.Send {
		m.outSeq++
		m.outbox = append(m.outbox, &memOut{out: Outgoing{
			ID:      m.outSeq,
			From:    o.From,
			Message: bytes.Clone(o.Message),
			Created: t,
		}, to: o.Recipient()})
	}
	return nil
}

func (m *memory) Claim(ctx context.Context, from string, limit int, lease time.Duration) ([]Outgoing, error) {
	if err := ValidateClaim(limit, lease); err != nil {
		return nil, err
	}
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	t := time.Now()
	var claimed []Outgoing
	held := make(map[queueKey]bool) // with an entry held, older than the one at hand
	for _, e := range m.outbox {
		if len(claimed) == limit {
			break
		}
		if from != "" && e.out.From != from {
			continue
		}
		k := queueKey{e.out.From, e.to}
		if e.until.After(t) {
			held[k] = true
			continue
		}
		if held[k] {
			continue
		}
		e.until = t.Add(lease)
		e.out.Attempts++
		o := e.out
		o.Message = bytes.Clone(o.Message)
		claimed = append(claimed, o)
	}
	return claimed, nil
}

func (m *memory) Release(ctx context.Context, after time.Duration, entries ...Outgoing) error {
	if err := ValidateRelease(after); err != nil {
		return err
	}
	if err := m.enter(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if len(entries) == 0 {
		return nil
	}
	claims := make(map[int64]int, len(entries)) // id → attempts
	for _, o := range entries {
		claims[o.ID] = o.Attempts
	}
	until := time.Now().Add(after)
	for _, e := range m.outbox {
		if n, ok := claims[e.out.ID]; ok && n == e.out.Attempts {
			e.until = until
		}
	}
	return nil
}

func (m *memory) Sent(ctx context.Context, ids ...int64) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	done := make(map[int64]bool, len(ids))
	for _, id := range ids {
		done[id] = true
	}
	m.outbox = slices.DeleteFunc(m.outbox, func(e *memOut) bool { return done[e.out.ID] })
	return nil
}

func (m *memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.docs = nil
	m.outbox = nil
	return nil
}
