package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seed72275b23/agency-go/agency"
)

// Errors callers branch on. Implementations wrap them with details, so
// test with errors.Is.
var (
	// ErrNotFound is returned by Get for a document that does not exist.
	ErrNotFound = errors.New("store: document not found")
	// ErrConflict is returned by Apply when a document's version is not the
	// stored one: it was created, changed or deleted since the caller read
	// it. Nothing of the Changes was written; read again and retry.
	ErrConflict = errors.New("store: version conflict")
	// ErrInvalid is returned for a call the store cannot carry out whatever
	// its contents: an empty kind or id, a kind, id or index field that is
	// not valid UTF-8 or holds a NUL byte (in Get and List too), a negative
	// version, a body that is not JSON or not valid UTF-8, a document twice
	// in one Changes, an outgoing message that does not decode, a limit or
	// lease out of range.
	ErrInvalid = errors.New("store: invalid request")
	// ErrClosed is returned by every method of a store after Close.
	ErrClosed = errors.New("store: closed")
)

// Doc is one document: a JSON body under a kind and an id, the index
// fields List filters on, and the version Apply compares.
type Doc struct {
	Kind string // what it is: "plan", "step", "conversation", …; required
	ID   string // unique within its kind; required

	// Index fields, each optional: List finds documents by any of them.
	Parent  string // the document this one belongs to (a step's plan)
	Session string // a session or conversation id
	User    string // the person the document belongs to

	// Version is 1 after the document's creation and grows by one with each
	// write. In Changes it is the version the writer read: 0 to create.
	// The versions of one kind and id never repeat: a document deleted and
	// created again goes on from the version it was deleted at, so that a
	// writer that read the old document cannot overwrite the new one.
	Version int64
	Body    json.RawMessage // any JSON value; it reads back byte for byte

	// Set by the store, ignored by Apply.
	Created time.Time // when Apply created it
	Updated time.Time // when Apply last wrote it
}

// Query selects documents of one kind for List. Each non-empty index field
// must match; the documents come in the order of their creation (the order
// of Changes.Put within one Apply), oldest first unless Newest is set.
type Query struct {
	Kind    string // required
	Parent  string
	Session string
	User    string
	Newest  bool // newest first
	Limit   int  // at most this many; 0 for all
}

// Changes is what one Apply writes: all of it, or nothing.
type Changes struct {
	// Put creates each document whose Version is 0 and replaces each other
	// one whose stored version is its Version. Kind and ID are the key;
	// the index fields and the body are replaced with the rest. A document
	// created where one was deleted gets a version above the deleted one's.
	Put []Doc
	// Delete removes each document whose stored version is its Version;
	// only Kind, ID and Version are read.
	Delete []Doc
	// Send queues messages in the outbox, to be sent after the commit (see
	// Store.Claim and Relay); their ID, Created and Attempts are set by the
	// store.
	Send []Outgoing
}

// Outgoing is an outbox entry: a message that an agent is to send.
type Outgoing struct {
	ID   int64  // set by Apply; unique in the store, never reused
	From string // the id of the agent that sends it
	// Message is the message in the agency wire form, with a __meta__.id,
	// so that the receiver of a resent message can tell it has it already;
	// [NewOutgoing] makes one.
	Message  json.RawMessage
	Created  time.Time // when Apply queued it
	Attempts int       // how many claims have returned it, this one included

	to string // the recipient, when NewOutgoing made the entry
}

// Recipient returns the id of the agent o's message is to (agency.Broadcast
// for a broadcast), or "" when the message does not decode. A store keeps
// it with the entry, for Claim's order per recipient.
func (o Outgoing) Recipient() string {
	if o.to != "" {
		return o.to
	}
	m, err := agency.DecodeMessage(o.Message)
	if err != nil {
		return ""
	}
	return m.To
}

// Store is durable state for agents: versioned documents, and an outbox of
// messages written in the same transactions as the documents.
//
// A Store's methods are safe for concurrent use, by goroutines and, for a
// store on a database, by processes sharing that database. Each method
// returns the context's error (errors.Is(err, context.Canceled) or
// context.DeadlineExceeded) when ctx ends first; an Apply that returns it
// wrote nothing.
//
// Every implementation passes the conformance suite in package storetest.
type Store interface {
	// Get returns the document kind/id, or ErrNotFound.
	Get(ctx context.Context, kind, id string) (Doc, error)

	// List returns the documents q selects, in creation order as q says;
	// none is an empty result, not an error.
	List(ctx context.Context, q Query) ([]Doc, error)

	// Apply writes c atomically: it checks every document's version
	// (compare-and-set), creates, replaces and deletes the documents and
	// queues the messages in one transaction. When a version is stale it
	// writes nothing and returns ErrConflict. After it succeeds, each
	// document put has the version it was given plus one.
	Apply(ctx context.Context, c Changes) error

	// Claim returns up to limit outbox entries of agent from (of every
	// agent when from is empty), oldest first, and holds them for lease:
	// until the lease ends, no other Claim returns them, so that two relays
	// never send the same entry at once. An entry that is not marked Sent
	// before its lease ends is returned by a later Claim again, which is
	// how the entries of a relay that died get sent.
	//
	// Claim keeps each sender's order per recipient: while an entry is
	// held (claimed, or released for later), no Claim returns a newer
	// entry of the same sender to the same recipient ([Outgoing.Recipient]).
	// Entries to other recipients are claimed as usual.
	Claim(ctx context.Context, from string, limit int, lease time.Duration) ([]Outgoing, error)

	// Release gives back entries that a claim returned and that were not
	// sent: each becomes claimable again after the delay (at once for 0)
	// instead of when the claim's lease ends, and the entries behind it
	// wait until then too. Only the claim that returned an entry releases
	// it: an entry claimed again since (its Attempts grew) is left alone,
	// as are entries no longer in the outbox. A relay releases at once what
	// it could not send, and for a while what waits for an absent
	// recipient.
	Release(ctx context.Context, after time.Duration, entries ...Outgoing) error

	// Sent removes the outbox entries with these ids, once their messages
	// are sent. Ids no longer in the outbox are ignored.
	Sent(ctx context.Context, ids ...int64) error

	// Close releases the store's resources. Calls made after Close return
	// ErrClosed; Close is idempotent.
	Close() error
}

// NewOutgoing returns the outbox entry that sends m from the agent with id
// from. The entry carries a copy of m with From set to from and, when m
// has no ID, a new one, so that every resend of the entry carries the same
// message id.
func NewOutgoing(from string, m *agency.Message) (Outgoing, error) {
	if m == nil {
		return Outgoing{}, fmt.Errorf("%w: nil message", ErrInvalid)
	}
	if err := agency.ValidateID(from); err != nil {
		return Outgoing{}, fmt.Errorf("%w: sender %q: %v", ErrInvalid, from, err)
	}
	c := *m
	c.From = from
	if c.ID == "" {
		c.ID = agency.NewID()
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return Outgoing{}, fmt.Errorf("%w: message: %v", ErrInvalid, err)
	}
	return Outgoing{From: from, Message: b, to: c.To}, nil
}

// Validate reports, as an error wrapping ErrInvalid, what makes c
// impossible to apply whatever the store holds. Implementations call it
// first in Apply.
func (c Changes) Validate() error {
	type key struct{ kind, id string }
	seen := make(map[key]bool, len(c.Put)+len(c.Delete))
	check := func(what string, i int, d Doc) error {
		if d.Kind == "" || d.ID == "" {
			return fmt.Errorf("%w: %s[%d]: kind and id are required", ErrInvalid, what, i)
		}
		if err := checkText(fmt.Sprintf("%s[%d]", what, i), "kind", d.Kind, "id", d.ID); err != nil {
			return err
		}
		if d.Version < 0 {
			return fmt.Errorf("%w: %s[%d] %s/%s: negative version %d", ErrInvalid, what, i, d.Kind, d.ID, d.Version)
		}
		k := key{d.Kind, d.ID}
		if seen[k] {
			return fmt.Errorf("%w: %s/%s is changed twice in one Apply", ErrInvalid, d.Kind, d.ID)
		}
		seen[k] = true
		return nil
	}
	for i, d := range c.Put {
		if err := check("Put", i, d); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("Put[%d] %s/%s", i, d.Kind, d.ID), "parent", d.Parent, "session", d.Session, "user", d.User); err != nil {
			return err
		}
		if len(d.Body) == 0 || !json.Valid(d.Body) {
			return fmt.Errorf("%w: Put[%d] %s/%s: the body is not JSON", ErrInvalid, i, d.Kind, d.ID)
		}
		if !utf8.Valid(d.Body) {
			return fmt.Errorf("%w: Put[%d] %s/%s: the body is not valid UTF-8", ErrInvalid, i, d.Kind, d.ID)
		}
	}
	for i, d := range c.Delete {
		if err := check("Delete", i, d); err != nil {
			return err
		}
		if d.Version == 0 {
			return fmt.Errorf("%w: Delete[%d] %s/%s: the version read is required", ErrInvalid, i, d.Kind, d.ID)
		}
	}
	for i, o := range c.Send {
		if err := agency.ValidateID(o.From); err != nil {
			return fmt.Errorf("%w: Send[%d]: sender %q: %v", ErrInvalid, i, o.From, err)
		}
		m, err := agency.DecodeMessage(o.Message)
		if err != nil {
			return fmt.Errorf("%w: Send[%d]: %v", ErrInvalid, i, err)
		}
		if m.From != "" && m.From != o.From {
			return fmt.Errorf("%w: Send[%d]: the message is from %q, the entry from %q", ErrInvalid, i, m.From, o.From)
		}
		if m.ID == "" {
			return fmt.Errorf("%w: Send[%d]: the message has no __meta__.id (NewOutgoing gives it one)", ErrInvalid, i)
		}
		if !utf8.Valid(o.Message) {
			return fmt.Errorf("%w: Send[%d]: the message is not valid UTF-8", ErrInvalid, i)
		}
	}
	return nil
}

// Validate reports, as an error wrapping ErrInvalid, what makes q
// impossible to run. Implementations call it first in List.
func (q Query) Validate() error {
	if q.Kind == "" {
		return fmt.Errorf("%w: a query needs a kind", ErrInvalid)
	}
	if q.Limit < 0 {
		return fmt.Errorf("%w: negative limit %d", ErrInvalid, q.Limit)
	}
	return checkText("query", "kind", q.Kind, "parent", q.Parent, "session", q.Session, "user", q.User)
}

// ValidateKey reports, as an error wrapping ErrInvalid, what makes a Get
// of kind/id impossible: text no store keeps (see ErrInvalid).
// Implementations call it first in Get.
func ValidateKey(kind, id string) error {
	return checkText("Get", "kind", kind, "id", id)
}

// checkText refuses, for every name and value pair in kv, a value that is
// not valid UTF-8 or holds a NUL byte: text that PostgreSQL cannot keep,
// refused by every store so that all of them answer alike.
func checkText(where string, kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		switch {
		case !utf8.ValidString(v):
			return fmt.Errorf("%w: %s: the %s %q is not valid UTF-8", ErrInvalid, where, kv[i], v)
		case strings.IndexByte(v, 0) >= 0:
			return fmt.Errorf("%w: %s: the %s %q holds a NUL byte", ErrInvalid, where, kv[i], v)
		}
	}
	return nil
}

// ValidateClaim reports, as an error wrapping ErrInvalid, what makes a
// Claim with these arguments impossible. Implementations call it first in
// Claim.
func ValidateClaim(limit int, lease time.Duration) error {
	if limit <= 0 {
		return fmt.Errorf("%w: claim limit %d: at least 1", ErrInvalid, limit)
	}
	if lease <= 0 {
		return fmt.Errorf("%w: claim lease %v: more than 0", ErrInvalid, lease)
	}
	return nil
}

// ValidateRelease reports, as an error wrapping ErrInvalid, what makes a
// Release after this delay impossible. Implementations call it first in
// Release.
func ValidateRelease(after time.Duration) error {
	if after < 0 {
		return fmt.Errorf("%w: release delay %v: not negative", ErrInvalid, after)
	}
	return nil
}

// Conflict returns an error wrapping ErrConflict that names the document
// and the version the caller gave. Implementations use it so that the
// messages read the same whatever the store.
func Conflict(d Doc, deleting bool) error {
	op := "put"
	if deleting {
		op = "delete"
	}
	if d.Version == 0 && !deleting {
		return fmt.Errorf("%w: create %s/%s: it exists", ErrConflict, d.Kind, d.ID)
	}
	return fmt.Errorf("%w: %s %s/%s at version %d: it is not at that version (changed or deleted since it was read)", ErrConflict, op, d.Kind, d.ID, d.Version)
}
