package agency

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// plainID, ValidateID's fast path, accepts only ids the full check accepts,
// and accepts the common ones.
func TestPlainIDAgrees(t *testing.T) {
	check := func(id string) {
		t.Helper()
		if plainID(id) && validateIDSlow(id) != nil {
			t.Fatalf("plainID accepts %q, which is invalid: %v", id, validateIDSlow(id))
		}
	}
	for a := range 256 {
		check(string(rune(a)))
		check(string([]byte{byte(a)}))
		for b := range 256 {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	for _, id := range []string{"", "amq.", "amq.x", "am", "a b", strings.Repeat("x", 255), strings.Repeat("x", 256), "a\u00a0b", "a\u0085"} {
		check(id)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		b := make([]byte, 1+r.IntN(6))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		check(string(b))
	}
	for _, id := range []string{"Receiver", "agent-42", "amq", "a.b_c-d:e/f", strings.Repeat("x", 255)} {
		if !plainID(id) {
			t.Errorf("plainID refuses %q", id)
		}
	}
}
