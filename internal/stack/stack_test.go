package stack

import (
	"testing"
	"unsafe"
)

// The frames stay on the stack: growing costs no allocation.
func TestGrowDoesNotAllocate(t *testing.T) {
	for name, grow := range map[string]func(){"Grow16K": Grow16K, "Grow32K": Grow32K} {
		if n := testing.AllocsPerRun(100, grow); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}

// A fresh goroutine that goes 64 frames of at least 128 bytes deep has
// its stack moved (grown by copying) on the way; after Grow16K or Grow32K
// it has not, since the stack is large enough already. A variable of the
// goroutine's first frame tells: its address changes when the stack is
// copied.
func TestGrowAheadOfNeed(t *testing.T) {
	moved := func(grow func()) bool {
		done := make(chan bool)
		go func() {
			var x int
			if grow != nil {
				grow()
			}
			before := uintptr(unsafe.Pointer(&x))
			deep(8 << 10 / 128)
			done <- uintptr(unsafe.Pointer(&x)) != before
		}()
		return <-done
	}
	if !moved(nil) {
		t.Fatal("a fresh goroutine went 64 frames deep without its stack moving: the test no longer tells anything")
	}
	for name, grow := range map[string]func(){"Grow16K": Grow16K, "Grow32K": Grow32K} {
		if moved(grow) {
			t.Errorf("after %s, going 64 frames deep moved the stack", name)
		}
	}
}

// deep recurses n frames of at least 128 bytes each.
//
//go:noinline
func deep(n int) byte {
	var pad [128]byte
	pad[n%128] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[n%128]
}
