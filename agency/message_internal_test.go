package agency

import (
	"testing"
	"unsafe"
)

// A Message stays within the allocator's 144-byte size class, and an
// idBlock holds as many slots as fit in 512 bytes: a field added to either
// costs every message more.
func TestSentMessageSize(t *testing.T) {
	if got := unsafe.Sizeof(Message{}); got != 144 {
		t.Errorf("Message is %d bytes, want 144", got)
	}
	if got := unsafe.Sizeof(idBlock{}); got > 512 || got+idSlotLen <= 512 {
		t.Errorf("idBlock is %d bytes, want the most slots that fit in 512", got)
	}
}

// The first recipient a message is delivered to has it as its handler's
// context; no other does, and a copy made afterwards is a message
// delivered to that same recipient.
func TestClaimContext(t *testing.T) {
	m := newMessageNumbered(12345)
	c1, c2 := &conn{}, &conn{}
	if c1.sentContext(m) != nil {
		t.Fatal("a message delivered to no one is a context")
	}
	claimContext(c1, m)
	if sc := c1.sentContext(m); sc == nil || &sc.Message != m {
		t.Fatal("the first recipient does not get the message as its context")
	}
	claimContext(c2, m)
	if c2.sentContext(m) != nil {
		t.Fatal("a second recipient gets the message as its context")
	}
	cp := *m
	if sc := c1.sentContext(&cp); sc == nil || &sc.Message != &cp || fromContext(sc).conn != c1 || fromContext(sc).msg != &cp {
		t.Fatal("a copy is not its own context at the same recipient")
	}
	if big := newMessageNumbered(1 << 40); big.ID != string(appendID(nil, 1<<40)) {
		t.Fatalf("an id that does not fit in a slot: %q", big.ID)
	}
}
