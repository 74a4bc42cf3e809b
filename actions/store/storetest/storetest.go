// Package storetest is the conformance suite that every [store.Store]
// implementation runs: the contract of each method, the order and limits
// of List, compare-and-set and all-or-nothing Apply, deletion and versions
// that never repeat, JSON bodies, outbox claims, leases and releases and
// the order per recipient, concurrent writers, deleters and claimers,
// relays sending through agents on space.Local (absent recipients
// included), cancelled contexts and Close.
//
// An implementation's test calls Run with a constructor:
//
//	func TestMemory(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
//	}
//
// Each subtest gets an empty store from newStore and closes it when it
// ends. The suite never sleeps to synchronise: where a lease must run out
// it claims with a lease of a millisecond and polls until the entry comes
// back; its timeouts (30s) are safety nets, not measurements. One relay
// test does wait, 0.7s, to start a pass between half a lease of 1s and its
// end: a window in time is what it tests, and it passes whenever the pass
// starts. Subtests do not run in parallel.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
)

// timeout bounds every call of the suite. It is a safety net that turns a
// hang into a failure, never a measure of speed.
const timeout = 30 * time.Second

type test struct {
	name string
	run  func(e *env)
}

// Run runs the conformance suite against the stores newStore returns.
// newStore may fail the test with t.Fatal or skip it with t.Skip.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	groups := []struct {
		name  string
		tests []test
	}{
		{"Docs", docTests},
		{"List", listTests},
		{"Outbox", outboxTests},
		{"Concurrency", concurrencyTests},
		{"Relay", relayTests},
		{"Lifecycle", lifecycleTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tt := range g.tests {
				t.Run(tt.name, func(t *testing.T) {
					st := newStore(t)
					if st == nil {
						t.Fatal("newStore returned nil")
					}
					t.Cleanup(func() {
						if err := st.Close(); err != nil {
							t.Errorf("Close at the end of the test: %v", err)
						}
					})
					tt.run(&env{t: t, st: st})
				})
			}
		})
	}
}

// env is one subtest's store and the helpers its tests share.
type env struct {
	t  *testing.T
	st store.Store
}

// ctx returns a context bounded by the safety-net timeout.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) apply(c store.Changes) {
	e.t.Helper()
	if err := e.st.Apply(e.ctx(), c); err != nil {
		e.t.Fatalf("Apply: %v", err)
	}
}

func (e *env) put(docs ...store.Doc) {
	e.t.Helper()
	e.apply(store.Changes{Put: docs})
}

func (e *env) get(kind, id string) store.Doc {
	e.t.Helper()
	d, err := e.st.Get(e.ctx(), kind, id)
	if err != nil {
		e.t.Fatalf("Get(%s, %s): %v", kind, id, err)
	}
	return d
}

func (e *env) absent(kind, id string) {
	e.t.Helper()
	_, err := e.st.Get(e.ctx(), kind, id)
	if !errors.Is(err, store.ErrNotFound) {
		e.t.Fatalf("Get(%s, %s): error %v, want ErrNotFound", kind, id, err)
	}
}

func (e *env) list(q store.Query) []store.Doc {
	e.t.Helper()
	docs, err := e.st.List(e.ctx(), q)
	if err != nil {
		e.t.Fatalf("List(%+v): %v", q, err)
	}
	return docs
}

func (e *env) claim(from string, limit int, lease time.Duration) []store.Outgoing {
	e.t.Helper()
	out, err := e.st.Claim(e.ctx(), from, limit, lease)
	if err != nil {
		e.t.Fatalf("Claim(%q, %d, %v): %v", from, limit, lease, err)
	}
	return out
}

func (e *env) sent(ids ...int64) {
	e.t.Helper()
	if err := e.st.Sent(e.ctx(), ids...); err != nil {
		e.t.Fatalf("Sent(%v): %v", ids, err)
	}
}

// wantErr checks that err matches target under errors.Is.
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want one matching %q", what, err, target)
	}
}

// doc returns a document with a JSON body.
func doc(kind, id string, version int64, body string) store.Doc {
	return store.Doc{Kind: kind, ID: id, Version: version, Body: []byte(body)}
}

// ids returns the ids of docs, in order.
func ids(docs []store.Doc) []string {
	s := make([]string, len(docs))
	for i, d := range docs {
		s[i] = d.ID
	}
	return s
}
