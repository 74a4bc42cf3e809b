package storetest

import (
	"bytes"
	"slices"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

var outboxTests = []test{
	{"ClaimOldestFirst", testClaimOrder},
	{"ClaimHolds", testClaimHolds},
	{"ClaimKeepsOrderPerRecipient", testClaimOrderPerRecipient},
	{"Release", testRelease},
	{"LeaseEnds", testLeaseEnds},
	{"Sent", testSent},
	{"IdsNotReused", testIdsNotReused},
	{"WithDocuments", testOutboxWithDocs},
	{"ClaimInvalid", testClaimInvalid},
}

// queue queues one message per action, from agent from, one Apply each,
// each to a recipient of its own ("To-" and the action).
func (e *env) queue(from string, actions ...string) []store.Outgoing {
	e.t.Helper()
	var out []store.Outgoing
	for _, a := range actions {
		o := outgoing(e.t, from, "To-"+a, a)
		e.apply(store.Changes{Send: []store.Outgoing{o}})
		out = append(out, o)
	}
	return out
}

// actions returns the action names of the entries' messages, in order.
func (e *env) actions(out []store.Outgoing) []string {
	e.t.Helper()
	s := make([]string, len(out))
	for i, o := range out {
		m, err := agency.DecodeMessage(o.Message)
		if err != nil {
			e.t.Fatalf("entry %d: %v", o.ID, err)
		}
		s[i] = m.Action
	}
	return s
}

func testClaimOrder(e *env) {
	before := time.Now().Add(-time.Minute)
	queued := e.queue("A", "a1", "a2")
	e.queue("B", "b1")
	// Several in one Apply keep their order too.
	a3, a4 := outgoing(e.t, "A", "Target", "a3"), outgoing(e.t, "A", "Target", "a4")
	e.apply(store.Changes{Send: []store.Outgoing{a3, a4, outgoing(e.t, "B", "Target", "b2")}})

	got := e.claim("A", 3, time.Hour)
	if acts := e.actions(got); !slices.Equal(acts, []string{"a1", "a2", "a3"}) {
		e.t.Fatalf("Claim(A, 3) = %v, want a1 a2 a3", acts)
	}
	for i, o := range got {
		if o.From != "A" || o.Attempts != 1 || o.Created.Before(before) || o.ID <= 0 {
			e.t.Errorf("entry %d: From %q, Attempts %d, Created %v, ID %d", i, o.From, o.Attempts, o.Created, o.ID)
		}
		if i > 0 && o.ID <= got[i-1].ID {
			e.t.Errorf("ids %d then %d: want them growing in queue order", got[i-1].ID, o.ID)
		}
	}
	// The message reads back byte for byte: what NewOutgoing encoded.
	if !bytes.Equal(got[0].Message, queued[0].Message) {
		e.t.Errorf("message %s read back as %s", queued[0].Message, got[0].Message)
	}
	m, err := agency.DecodeMessage(got[0].Message)
	if err != nil {
		e.t.Fatal(err)
	}
	if m.From != "A" || m.To != "To-a1" || m.ID == "" || m.Meta["idempotency_key"] != "k-To-a1" {
		e.t.Errorf("decoded %+v: want from A to To-a1, an id and the meta key", m)
	}
	// a4 is to the recipient of a3, which is held: it waits.
	if acts := e.actions(e.claim("A", 10, time.Hour)); len(acts) != 0 {
		e.t.Errorf("Claim(A) after the first three = %v, want nothing while a3 is held", acts)
	}
	e.sent(got[2].ID)
	if acts := e.actions(e.claim("A", 10, time.Hour)); !slices.Equal(acts, []string{"a4"}) {
		e.t.Errorf("Claim(A) once a3 is sent = %v, want a4", acts)
	}
	if acts := e.actions(e.claim("B", 10, time.Hour)); !slices.Equal(acts, []string{"b1", "b2"}) {
		e.t.Errorf("Claim(B) = %v, want b1 b2", acts)
	}
	if got := e.claim("C", 10, time.Hour); len(got) != 0 {
		e.t.Errorf("Claim(C) returned %d entries of others", len(got))
	}
}

// testClaimOrderPerRecipient: while an entry is held, no claim returns a
// newer entry of its sender to its recipient, so that a relay that could
// not send it (or died) does not see its successors overtake it; entries
// to other recipients, and of other senders, are claimed as usual.
func testClaimOrderPerRecipient(e *env) {
	r1 := outgoing(e.t, "A", "R", "r1")
	s1 := outgoing(e.t, "A", "S", "s1")
	r2 := outgoing(e.t, "A", "R", "r2")
	b1 := outgoing(e.t, "B", "R", "b1")
	e.apply(store.Changes{Send: []store.Outgoing{r1, s1}})
	e.apply(store.Changes{Send: []store.Outgoing{r2, b1}})
	held := e.claim("A", 1, time.Hour)
	if acts := e.actions(held); !slices.Equal(acts, []string{"r1"}) {
		e.t.Fatalf("first claim: %v, want r1", acts)
	}
	if acts := e.actions(e.claim("A", 10, time.Hour)); !slices.Equal(acts, []string{"s1"}) {
		e.t.Fatalf("claim while r1 is held: %v, want s1 only (r2 waits behind r1)", acts)
	}
	if acts := e.actions(e.claim("", 10, time.Hour)); !slices.Equal(acts, []string{"b1"}) {
		e.t.Fatalf("claim of every sender while r1 is held: %v, want b1 (another sender's)", acts)
	}
	e.sent(held[0].ID)
	if acts := e.actions(e.claim("A", 10, time.Hour)); !slices.Equal(acts, []string{"r2"}) {
		e.t.Fatalf("claim once r1 is sent: %v, want r2", acts)
	}

	// A lease that ends lets the entry, and then those behind it, come
	// back in order.
	c1 := outgoing(e.t, "C", "R", "c1")
	c2 := outgoing(e.t, "C", "R", "c2")
	e.apply(store.Changes{Send: []store.Outgoing{c1, c2}})
	dead := e.claim("C", 1, time.Millisecond)
	if acts := e.actions(dead); !slices.Equal(acts, []string{"c1"}) {
		e.t.Fatalf("claim of C: %v, want c1", acts)
	}
	deadline := time.Now().Add(timeout)
	for {
		got := e.claim("C", 10, time.Hour)
		if len(got) > 0 {
			if acts := e.actions(got); !slices.Equal(acts, []string{"c1", "c2"}) {
				e.t.Fatalf("claim after c1's lease: %v, want c1 c2", acts)
			}
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("c1 was not claimed again %v after a lease of 1ms", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func (e *env) release(after time.Duration, entries ...store.Outgoing) {
	e.t.Helper()
	if err := e.st.Release(e.ctx(), after, entries...); err != nil {
		e.t.Fatalf("Release(%v, %d entries): %v", after, len(entries), err)
	}
}

// testRelease: a relay gives back what it claimed and did not send, at
// once or for a while; the entries behind a released one to its
// recipient wait with it; only the claim that returned an entry can
// release it.
func testRelease(e *env) {
	r1 := outgoing(e.t, "A", "R", "r1")
	r2 := outgoing(e.t, "A", "R", "r2")
	s1 := outgoing(e.t, "A", "S", "s1")
	e.apply(store.Changes{Send: []store.Outgoing{r1, r2, s1}})
	got := e.claim("A", 10, time.Hour)
	if acts := e.actions(got); !slices.Equal(acts, []string{"r1", "r2", "s1"}) {
		e.t.Fatalf("claim: %v", acts)
	}
	e.release(time.Hour, got[0]) // r1: its recipient is away, say
	e.release(0, got[2])         // s1: back at once
	if again := e.claim("A", 10, time.Hour); !slices.Equal(e.actions(again), []string{"s1"}) || again[0].Attempts != 2 {
		e.t.Fatalf("claim after releasing s1 at once: %v, want s1 at attempt 2", e.actions(again))
	}
	e.release(0, got[1]) // r2: free, but behind r1, which waits
	if again := e.claim("A", 10, time.Hour); len(again) != 0 {
		e.t.Fatalf("claim while r1 waits: %v, want nothing (r2 is behind it)", e.actions(again))
	}
	// Another claim's release, by attempts, does nothing.
	e.release(0, store.Outgoing{ID: got[0].ID, Attempts: got[0].Attempts + 5})
	if again := e.claim("A", 10, time.Hour); len(again) != 0 {
		e.t.Fatalf("claim after a release by another claim: %v, want nothing", e.actions(again))
	}
	e.release(0, got[0])
	again := e.claim("A", 10, time.Hour)
	if acts := e.actions(again); !slices.Equal(acts, []string{"r1", "r2"}) {
		e.t.Fatalf("claim once r1 is released: %v, want r1 r2", acts)
	}
	// The first claim's release of r1 comes too late: r1 was claimed
	// again since.
	e.release(0, got[0])
	if late := e.claim("A", 10, time.Hour); len(late) != 0 {
		e.t.Fatalf("claim after a stale release: %v, want nothing", e.actions(late))
	}
	// Released for a short while, they come back by themselves, in order.
	e.release(time.Millisecond, again...)
	deadline := time.Now().Add(timeout)
	for {
		back := e.claim("A", 10, time.Hour)
		if len(back) > 0 {
			if acts := e.actions(back); !slices.Equal(acts, []string{"r1", "r2"}) {
				e.t.Fatalf("claim after the release ran out: %v, want r1 r2", acts)
			}
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("r1 and r2 were not claimable %v after a release of 1ms", timeout)
		}
		time.Sleep(time.Millisecond)
	}
	// Nothing to release, an entry gone: fine. A negative delay: refused.
	e.release(0)
	e.sent(again[0].ID)
	e.release(0, again[0])
	err := e.st.Release(e.ctx(), -time.Second, again[1])
	wantErr(e.t, "Release with a negative delay", err, store.ErrInvalid)
}

func testClaimHolds(e *env) {
	e.queue("A", "a1", "a2")
	e.queue("B", "b1")
	first := e.claim("A", 1, time.Hour)
	if acts := e.actions(first); !slices.Equal(acts, []string{"a1"}) {
		e.t.Fatalf("first claim: %v", acts)
	}
	// A second relay gets what the first does not hold.
	if acts := e.actions(e.claim("A", 10, time.Hour)); !slices.Equal(acts, []string{"a2"}) {
		e.t.Fatalf("second claim: %v, want a2 only", acts)
	}
	if got := e.claim("A", 10, time.Hour); len(got) != 0 {
		e.t.Fatalf("third claim: %d entries, want none while both are held", len(got))
	}
	// Every sender: only what nobody holds.
	if acts := e.actions(e.claim("", 10, time.Hour)); !slices.Equal(acts, []string{"b1"}) {
		e.t.Errorf("claim of every sender: %v, want b1", acts)
	}
	if got := e.claim("", 10, time.Hour); len(got) != 0 {
		e.t.Errorf("claim of every sender again: %d entries", len(got))
	}
}

func testLeaseEnds(e *env) {
	e.queue("A", "a1", "a2", "a3")
	// A relay claims everything and dies before marking anything sent.
	dead := e.claim("A", 10, time.Millisecond)
	if acts := e.actions(dead); !slices.Equal(acts, []string{"a1", "a2", "a3"}) {
		e.t.Fatalf("claim: %v", acts)
	}
	// Once its lease ends, the entries are claimed again, in order, and
	// counted.
	deadline := time.Now().Add(timeout)
	for {
		got := e.claim("A", 10, time.Hour)
		if len(got) > 0 {
			if acts := e.actions(got); !slices.Equal(acts, []string{"a1", "a2", "a3"}) {
				e.t.Fatalf("claim after the lease: %v, want a1 a2 a3", acts)
			}
			for i, o := range got {
				if o.ID != dead[i].ID || o.Attempts != 2 {
					e.t.Errorf("entry %d: id %d, attempts %d; want id %d at attempt 2", i, o.ID, o.Attempts, dead[i].ID)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the entries were not claimed again %v after a lease of 1ms", timeout)
		}
		time.Sleep(time.Millisecond)
	}
	// Held again, for an hour now.
	if got := e.claim("", 10, time.Hour); len(got) != 0 {
		e.t.Errorf("claimed %d entries that another claim holds", len(got))
	}
}

func testSent(e *env) {
	e.queue("A", "a1", "a2", "a3")
	got := e.claim("A", 2, time.Millisecond)
	e.sent(got[0].ID, got[1].ID)
	e.sent()                 // nothing: fine
	e.sent(got[0].ID, 1<<40) // gone or never there: ignored
	deadline := time.Now().Add(timeout)
	for {
		// Sent entries never come back, whatever their lease.
		got := e.claim("A", 10, time.Hour)
		if acts := e.actions(got); len(acts) > 0 {
			if !slices.Equal(acts, []string{"a3"}) {
				e.t.Fatalf("after a1 and a2 were sent: claimed %v, want a3", acts)
			}
			e.sent(got[0].ID)
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatal("a3 was never claimable")
		}
		time.Sleep(time.Millisecond)
	}
	// A lease of 1ms on a1 and a2 is long over by now, but they are gone.
	e.queue("A", "a4")
	if acts := e.actions(e.claim("", 10, time.Hour)); !slices.Equal(acts, []string{"a4"}) {
		e.t.Errorf("outbox after everything else was sent: %v, want a4", acts)
	}
}

func testIdsNotReused(e *env) {
	e.queue("A", "a1")
	first := e.claim("A", 1, time.Hour)
	e.sent(first[0].ID)
	e.queue("A", "a2")
	second := e.claim("A", 1, time.Millisecond)
	if len(second) != 1 || second[0].ID == first[0].ID {
		e.t.Fatalf("a new entry got id %v, the id of a sent one (%d): a late Sent would drop it", second, first[0].ID)
	}
	// A late Sent of the first id, from a slow relay, leaves a2 alone.
	e.sent(first[0].ID)
	deadline := time.Now().Add(timeout)
	for len(e.claim("A", 1, time.Hour)) == 0 {
		if time.Now().After(deadline) {
			e.t.Fatal("a2 is gone after a Sent of another id")
		}
		time.Sleep(time.Millisecond)
	}
}

func testOutboxWithDocs(e *env) {
	// One Apply: a step approved, its dispatch queued.
	e.put(doc("step", "s1", 0, `{"status":"awaiting_feedback"}`))
	dispatch := outgoing(e.t, "Coordinator", "HrAgent", "create_employee_record")
	e.apply(store.Changes{Put: []store.Doc{doc("step", "s1", 1, `{"status":"approved"}`)}, Send: []store.Outgoing{dispatch}})
	got := e.claim("Coordinator", 10, time.Hour)
	if len(got) != 1 || !bytes.Equal(got[0].Message, dispatch.Message) {
		e.t.Fatalf("claimed %v, want the dispatch", got)
	}
	// Outbox entries are not documents.
	if docs := e.list(store.Query{Kind: "step"}); len(docs) != 1 {
		e.t.Errorf("steps: %v", ids(docs))
	}
}

func testClaimInvalid(e *env) {
	e.queue("A", "a1")
	for _, c := range []struct {
		limit int
		lease time.Duration
	}{{0, time.Hour}, {-1, time.Hour}, {1, 0}, {1, -time.Second}} {
		_, err := e.st.Claim(e.ctx(), "A", c.limit, c.lease)
		wantErr(e.t, "Claim with a bad limit or lease", err, store.ErrInvalid)
	}
	if got := e.claim("A", 1, time.Hour); len(got) != 1 || got[0].Attempts != 1 {
		e.t.Errorf("after refused claims: %+v, want a1 at its first attempt", got)
	}
}
