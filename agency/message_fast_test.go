package agency

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// plainActionName, validateActionName's fast path, accepts only names the
// full check accepts, and accepts the common ones.
func TestPlainActionNameAgrees(t *testing.T) {
	slow := func(name string) error {
		if name == ResponseAction || name == ErrorAction || name == HelpAction {
			return nil
		}
		return validateRegisterable(name)
	}
	check := func(name string) {
		t.Helper()
		if plainActionName(name) && slow(name) != nil {
			t.Fatalf("plainActionName accepts %q, which is invalid: %v", name, slow(name))
		}
	}
	for a := range 256 {
		check(string(rune(a)))
		check(string([]byte{byte(a)}))
		for b := range 256 {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	for _, name := range []string{"", "[", "[x", "__", "__x", "_x", "help", "[response]", "[error]", strings.Repeat("x", 255), strings.Repeat("x", 256), "a\u00a0b", "\xff"} {
		check(name)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		b := make([]byte, 1+r.IntN(6))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		check(string(b))
	}
	for _, name := range []string{"tick", "help", "add_numbers", "a b", "x.y/z", strings.Repeat("x", 255)} {
		if !plainActionName(name) {
			t.Errorf("plainActionName refuses %q", name)
		}
	}
}

// The ids of messages Send makes share their message's allocation while
// they fit, and stay unique when they no longer do.
func TestSentMessageIDs(t *testing.T) {
	seen := make(map[string]bool)
	add := func(id string) {
		t.Helper()
		if !strings.HasPrefix(id, idPrefix) || len(id) <= len(idPrefix) {
			t.Fatalf("id %q does not start with the prefix %q and a number", id, idPrefix)
		}
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
	}
	for range 100 {
		add(newMessage().ID)
		add(NewID())
	}
	// The counter only goes up: jumping ahead keeps every id unique.
	if n := idCounter.Load(); n < 1<<60-3 {
		idCounter.Store(1<<60 - 3)
	}
	for range 4 {
		add(newMessage().ID)
		add(NewID())
	}
}

// appendID writes the counter as strconv.FormatUint(n, 32) does.
func TestAppendIDCounter(t *testing.T) {
	for _, n := range []uint64{0, 1, 31, 32, 33, 1023, 1024, 1<<60 - 1, 1 << 60, 1<<64 - 1, 0x123456789abcdef} {
		if got, want := string(appendID(nil, n)), idPrefix+strconv.FormatUint(n, 32); got != want {
			t.Errorf("appendID(%d) = %q, want %q", n, got, want)
		}
	}
}

// Ids handed out at once on many goroutines, whose slots share blocks,
// are each whole and unique (and, under -race, written without a race).
func TestIDsConcurrently(t *testing.T) {
	const goroutines, each = 8, 5000
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				ids[g] = append(ids[g], newMessage().ID)
			}
		}()
	}
	wg.Wait()
	seen := make(map[string]bool, goroutines*each)
	for _, list := range ids {
		for _, id := range list {
			n, err := strconv.ParseUint(strings.TrimPrefix(id, idPrefix), 32, 64)
			if !strings.HasPrefix(id, idPrefix) || err != nil || n == 0 || seen[id] {
				t.Fatalf("id %q malformed or given twice", id)
			}
			seen[id] = true
		}
	}
}
