package agency

import (
	"testing"
	"unsafe"
)

// What an idle agent holds, in bytes: an Agent with its first action and
// its first conn in place, which the allocator rounds up to a size class
// (…, 144, 160, 176, …). space.Local adds its router (32) and its place
// in the space's table (16 to 20), for 256 bytes an agent at most, and a
// million agents in 256 MiB. A field added to one of these types breaks
// this test: what only some agents need goes in extra (a conn's) or
// queues (a mailbox's), made on first use, or in an action's config.
func TestIdleAgentSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"Agent", unsafe.Sizeof(Agent{}), 160},
		{"conn", unsafe.Sizeof(conn{}), 72},
		{"mailbox", unsafe.Sizeof(mailbox{}), 24},
		{"action", unsafe.Sizeof(action{}), 48},
	} {
		if c.got > c.want {
			t.Errorf("%s is %d bytes, over %d", c.name, c.got, c.want)
		}
	}
}
