// Package store is the durable state of agents: versioned JSON documents
// and an outbox of messages, written together in one transaction.
//
// A [Store] has six methods and Close:
//
//   - Get reads a document by kind and id.
//   - List finds the documents of a kind by parent, session or user, in
//     creation order, oldest or newest first, up to a limit.
//   - Apply creates, replaces and deletes documents and queues messages,
//     all or nothing. Every document carries the version its writer read
//     (0 to create): when another writer got there first, Apply writes
//     nothing and returns [ErrConflict] (compare-and-set). The versions of
//     one kind and id never repeat, deletion and creation again included.
//   - Claim takes the oldest queued messages of an agent and holds them for
//     a lease, so that two relays never send one at the same time, while
//     the messages of a relay that died come back when its lease ends. It
//     keeps the order per recipient: no message is claimed while an older
//     one of its sender to its recipient is held.
//   - Release gives back claimed messages that were not sent, at once or
//     after a delay.
//   - Sent removes messages once they are sent.
//
// A state change and the messages it implies are one Apply:
//
//	approve := store.Changes{
//		Put:  []store.Doc{step}, // with step.Version as read
//		Send: []store.Outgoing{dispatch},
//	}
//	err := st.Apply(ctx, approve) // ErrConflict: read again, decide again
//
// A [Relay] sends an agent's queued messages through that agent and marks
// them sent. Sending is at least once: a message sent but not yet marked
// when its process dies is sent again, with the same __meta__.id, so
// receivers deduplicate by that id or by an idempotency key. A message to
// an absent recipient waits until the recipient is there, without holding
// back the messages to others.
//
// Implementations: [NewMemory] in this package (no restart story),
// sqlitestore (one file, the embedded default) and pgstore (PostgreSQL, for
// several processes). All of them pass the conformance suite in storetest.
// docs/store.md says more about the guarantees and how to choose.
//
// # Implementing a Store
//
// An implementation calls [Changes.Validate] first in Apply,
// [ValidateKey] in Get, [Query.Validate] in List, [ValidateClaim] in
// Claim and [ValidateRelease] in Release, so that bad input is refused
// alike by every store, and returns [Conflict] for a stale version, so
// that conflicts read alike. It
// keeps the last version of each deleted document (a tombstone), so that
// one created again goes on from there, and stores each outbox entry's
// [Outgoing.Recipient], which Claim's order per recipient needs. Then it
// runs the conformance suite in package storetest.
package store
