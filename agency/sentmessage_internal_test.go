package agency

import (
	"testing"
	"unsafe"
)

// A sentMessage stays within the allocator's 160-byte size class, and an
// idBlock within that of 512: a field added to either costs every message
// more.
func TestSentMessageSize(t *testing.T) {
	if got := unsafe.Sizeof(Message{}); got != 144 {
		t.Errorf("Message is %d bytes, want 144", got)
	}
	if got := unsafe.Sizeof(sentMessage{}); got > 160 {
		t.Errorf("sentMessage is %d bytes, over the size class of 160", got)
	}
	if got := unsafe.Sizeof(idBlock{}); got > 512 || got+idSlotLen <= 512 {
		t.Errorf("idBlock is %d bytes, want the most slots that fit in 512", got)
	}
}

// asSent tells a message that Send made from a copy of one and from any
// other message.
func TestAsSent(t *testing.T) {
	m := newSentMessageNumbered(12345)
	if asSent(m) == nil {
		t.Fatal("a message Send made is not recognised")
	}
	cp := *m
	if asSent(&cp) != nil {
		t.Fatal("a copy is taken for the original")
	}
	if asSent(&Message{ID: m.ID}) != nil || asSent(&Message{}) != nil {
		t.Fatal("a plain message is taken for one Send made")
	}
	c1, c2 := &conn{}, &conn{}
	if claimContext(c1, m) == nil {
		t.Fatal("the first recipient does not get the message's context")
	}
	if claimContext(c2, m) != nil || claimContext(c1, m) != nil {
		t.Fatal("a second recipient gets the message's context")
	}
	if big := newSentMessageNumbered(1 << 40); asSent(big) == nil || big.ID != string(appendID(nil, 1<<40)) {
		t.Fatalf("a message whose id does not fit in a slot (%q) is not one Send made", big.ID)
	}
}
