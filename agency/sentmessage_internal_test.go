package agency

import (
	"testing"
	"unsafe"
)

// The flag that marks a message Send made sits in the padding of Message,
// and a sentMessage stays within the allocator's 176-byte size class: a
// field added to either costs every message a larger allocation.
func TestSentMessageSize(t *testing.T) {
	if got := unsafe.Sizeof(Message{}); got != 136 {
		t.Errorf("Message is %d bytes, want 136", got)
	}
	if got := unsafe.Sizeof(sentMessage{}); got > 176 {
		t.Errorf("sentMessage is %d bytes, over the size class of 176", got)
	}
}

// asSent tells a message that Send made from a copy of one and from any
// other message.
func TestAsSent(t *testing.T) {
	// Numbered here: other tests take the process's counter past 2^60,
	// whose ids do not fit in the message and are never recognised.
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
	if big := newSentMessageNumbered(1 << 60); asSent(big) != nil || big.ID == "" {
		t.Fatalf("a message whose id did not fit (%q) is taken for one whose id did", big.ID)
	}
}
