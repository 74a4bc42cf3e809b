package plan

import (
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/actions/plan/internal/front"
)

// What a coordinator keeps of a running step's parts for late watchers is
// bounded: the newest 256 parts, and at most 64 KiB of their text (but
// always the newest part, cut to 16 KiB); nothing once the step's stream
// ends. A watcher that falls behind is let go rather than buffered.
func TestLiveBounds(t *testing.T) {
	var l live
	l.follow("s/1")
	for i := 1; i <= 300; i++ {
		l.part("p", "s", i, "x")
	}
	kept, w1 := l.watch("p")
	if len(kept) != maxKeptParts || kept[0].Seq != 300-maxKeptParts+1 || kept[len(kept)-1].Seq != 300 {
		t.Fatalf("kept %d parts, %d to %d", len(kept), kept[0].Seq, kept[len(kept)-1].Seq)
	}
	l.unwatch("p", w1)
	big := strings.Repeat("y", 20<<10)
	for i := 301; i <= 310; i++ {
		l.part("p", "s", i, big)
	}
	kept, w2 := l.watch("p")
	total := 0
	for _, e := range kept {
		total += len(e.Text)
	}
	if total > maxKeptBytes || len(kept) != 3 || kept[2].Seq != 310 || len(kept[2].Text) != maxPartText+len("…") {
		t.Errorf("kept %d parts of %d bytes, the last %d with %d bytes", len(kept), total, kept[len(kept)-1].Seq, len(kept[len(kept)-1].Text))
	}
	// A watcher that reads as parts come stays; one that falls behind by
	// more than its buffer is let go: its channel closes after what it
	// holds, and it watches again.
	_, w3 := l.watch("p")
	for i := 311; i <= 311+watcherBuffer; i++ {
		l.part("p", "s", i, "z")
		if e, open := <-w3.ch; !open || e.Seq != i {
			t.Fatalf("the watcher that keeps up got %+v, %v", e, open)
		}
	}
	n := 0
	for range w2.ch {
		n++
	}
	if n != watcherBuffer {
		t.Errorf("the watcher let go had %d events", n)
	}
	l.end("s/1", "p", "s")
	if e := <-w3.ch; e.Kind != front.LiveStepEnd || e.StepID != "s" {
		t.Errorf("after the stream: %+v", e)
	}
	l.unwatch("p", w2)
	l.unwatch("p", w3)
	if len(l.plans) != 0 || len(l.streams) != 0 || l.watchers != 0 {
		t.Errorf("after the step and its watchers: %d plans, %d streams, %d watchers", len(l.plans), len(l.streams), l.watchers)
	}
}

// At most maxWatchers watch at once; a coordinator that leaves lets its
// watchers go and takes none until it is back.
func TestLiveWatchers(t *testing.T) {
	var l live
	var ws []*watcher
	for range maxWatchers {
		_, w := l.watch("p")
		if w == nil {
			t.Fatalf("watcher %d refused", len(ws)+1)
		}
		ws = append(ws, w)
	}
	if _, w := l.watch("q"); w != nil {
		t.Fatal("a watcher beyond maxWatchers was taken")
	}
	l.close()
	for _, w := range ws {
		if _, open := <-w.ch; open {
			t.Fatal("a watcher was not let go when the coordinator left")
		}
		l.unwatch("p", w)
	}
	if _, w := l.watch("p"); w != nil {
		t.Fatal("a watcher was taken while the coordinator is away")
	}
	l.open()
	if _, w := l.watch("p"); w == nil {
		t.Fatal("no watcher taken once the coordinator is back")
	}
}
