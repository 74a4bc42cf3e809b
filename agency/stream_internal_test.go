package agency

import (
	"fmt"
	"testing"
)

// An agent remembers at most maxWithdrawn [cancel]s for requests it was not
// handling, the oldest forgotten first; a repeated one takes no new slot.
func TestWithdrawnBounded(t *testing.T) {
	var st streams
	key := func(i int) string { return fmt.Sprintf("User\x00r%d", i) }
	for i := range maxWithdrawn + 44 {
		st.withdraw(key(i))
		st.withdraw(key(i))
	}
	if len(st.withdrawn) != maxWithdrawn || len(st.withdrawnRing) != maxWithdrawn {
		t.Fatalf("%d remembered in %d slots, want %d", len(st.withdrawn), len(st.withdrawnRing), maxWithdrawn)
	}
	for i, want := range map[int]bool{0: false, 43: false, 44: true, maxWithdrawn + 43: true} {
		if _, got := st.withdrawn[key(i)]; got != want {
			t.Errorf("request %d remembered: %v, want %v", i, got, want)
		}
	}
}
