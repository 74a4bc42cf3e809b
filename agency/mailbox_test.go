package agency

import (
	"sync/atomic"
	"testing"
)

// A burst longer than a segment comes out whole and in order, and a pacing
// space's takers are all reached by release and discard.
func TestMailboxLongBurst(t *testing.T) {
	const n = 3*segLen + 7
	var mb mailbox
	var fired atomic.Int64
	msgs := make([]*Message, n)
	for i := range msgs {
		msgs[i] = &Message{}
		if ok, _ := mb.put(item{m: msgs[i], taken: &taker{f: func() { fired.Add(1) }}}); !ok {
			t.Fatal("put refused")
		}
	}
	mb.release()
	if got := fired.Load(); got != n {
		t.Fatalf("release fired %d takers of %d", got, n)
	}
	b, closed := mb.take(true, batch{}, false)
	if closed {
		t.Fatal("closed")
	}
	i := 0
	for k := 0; k <= len(b.full); k++ {
		seg := b.last
		if k < len(b.full) {
			seg = b.full[k]
		}
		for _, it := range seg {
			if it.m != msgs[i] {
				t.Fatalf("item %d out of order", i)
			}
			i++
		}
	}
	if i != n {
		t.Fatalf("took %d items of %d", i, n)
	}
	if b, _ := mb.take(true, b, true); b.last != nil {
		t.Fatalf("took %d items from an empty mailbox", len(b.last))
	}

	fired.Store(0)
	for range n {
		mb.put(item{m: &Message{}, taken: &taker{f: func() { fired.Add(1) }}})
	}
	mb.discard()
	if got := fired.Load(); got != n {
		t.Fatalf("discard fired %d takers of %d", got, n)
	}
	if b, _ := mb.take(true, batch{}, false); b.last != nil || b.full != nil || mb.q.Load().more != nil && mb.q.Load().more.queued != nil {
		t.Fatal("items left after discard")
	}
}
