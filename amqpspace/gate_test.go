package amqpspace

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// Frames as a broker writes them, for the gate's tests.
func testFrame(typ byte, ch uint16, payload []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[1:], ch)
	binary.BigEndian.PutUint32(b[3:], uint32(len(payload)))
	return append(append(b, payload...), frameEnd)
}

func deliverFrame(ch uint16, consumer string, tag uint64) []byte {
	p := []byte{0, classBasic, 0, basicDeliver, byte(len(consumer))}
	p = append(p, consumer...)
	p = binary.BigEndian.AppendUint64(p, tag)
	p = append(p, 0, 0, 0) // redelivered, exchange "", routing key ""
	return testFrame(frameMethod, ch, p)
}

func headerFrame(ch uint16, size uint64) []byte {
	p := []byte{0, classBasic, 0, 0}
	p = binary.BigEndian.AppendUint64(p, size)
	p = append(p, 0, 0) // no properties
	return testFrame(frameHeader, ch, p)
}

// delivery is a basic.deliver with its header and a body of size bytes in
// frames of at most 1000 bytes.
func delivery(ch uint16, consumer string, tag uint64, size int) []byte {
	b := append(deliverFrame(ch, consumer, tag), headerFrame(ch, uint64(size))...)
	body := bytes.Repeat([]byte{'x'}, size)
	for len(body) > 0 {
		n := min(len(body), 1000)
		b = append(b, testFrame(frameBody, ch, body[:n])...)
		body = body[n:]
	}
	return b
}

// testGate returns a gate over one end of a pipe and the other end, which
// plays the broker.
func testGate(t *testing.T, limit int64, maxBody int) (*gate, net.Conn) {
	t.Helper()
	client, broker := net.Pipe()
	g := newGate(client, newBudget(limit, slog.New(slog.DiscardHandler)), maxBody)
	t.Cleanup(func() { _ = g.Close(); _ = broker.Close() })
	return g, broker
}

// writeChunks writes b in pieces of random size, as a socket may deliver it.
func writeChunks(w io.Writer, b []byte) {
	for len(b) > 0 {
		n := min(len(b), 1+rand.IntN(3000))
		if _, err := w.Write(b[:n]); err != nil {
			return
		}
		b = b[n:]
	}
}

// read reads n bytes from the gate, failing the test when they do not come.
func readN(t *testing.T, g *gate, n int) []byte {
	t.Helper()
	got := make([]byte, n)
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(g, got)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the gate did not pass on %d bytes", n)
	}
	return got
}

// Frames pass the gate unchanged, however the socket splits them, and the
// bodies of deliveries are counted until released.
func TestGatePassesFramesAndCounts(t *testing.T) {
	g, broker := testGate(t, 1<<20, 1<<20)
	var stream []byte
	stream = append(stream, testFrame(frameMethod, 0, []byte{0, 10, 0, 10, 1, 2, 3})...) // connection.start-ish
	stream = append(stream, testFrame(frameHeartbeat, 0, nil)...)
	stream = append(stream, delivery(1, "Alice", 1, 2500)...)
	stream = append(stream, delivery(2, "Bob", 7, 10)...)
	stream = append(stream, delivery(1, "Alice-broadcast", 2, 0)...)
	go writeChunks(broker, stream)
	if got := readN(t, g, len(stream)); !bytes.Equal(got, stream) {
		t.Fatal("the frames changed on their way through the gate")
	}
	if n := g.budget.held(); n != 2510 {
		t.Fatalf("held %d bytes, want 2510", n)
	}
	g.release("Alice", 2500)
	g.release("Bob", 10)
	if n := g.budget.held(); n != 0 {
		t.Fatalf("held %d bytes after the releases, want 0", n)
	}
}

// A delivery over the size limit reaches the library with an empty body:
// the gate drops the body frames as they pass and says what it dropped.
func TestGateDropsOversizeBodies(t *testing.T) {
	g, broker := testGate(t, 1<<20, 4096)
	big := delivery(3, "Alice", 5, 10_000)
	small := delivery(3, "Alice", 6, 100)
	go writeChunks(broker, append(append([]byte{}, big...), small...))
	want := append(append(deliverFrame(3, "Alice", 5), headerFrame(3, 0)...), small...)
	if got := readN(t, g, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want the oversize delivery without its body and the small one whole", len(got))
	}
	if size, ok := g.oversized("Alice", 5); !ok || size != 10_000 {
		t.Errorf("oversized = %d, %v; want 10000, true", size, ok)
	}
	if _, ok := g.oversized("Alice", 6); ok {
		t.Error("the small delivery is reported oversize")
	}
	if n := g.budget.held(); n != 100 {
		t.Errorf("held %d bytes, want 100 (the dropped body is not held)", n)
	}
}

// At the limit, the gate passes on no new delivery, and reads no further
// than the start of it, until the consumers release bytes; closing or
// forgetting releases what was counted.
func TestGatePausesAtTheLimit(t *testing.T) {
	g, broker := testGate(t, 5000, 4096)
	held := append(delivery(1, "Alice", 1, 3000), delivery(1, "Alice", 2, 3000)...)
	go writeChunks(broker, held)
	readN(t, g, len(held)) // 6000 bytes held now: over the limit

	one := len(delivery(2, "Bob", 1, 4000))
	var next []byte
	for i := range 50 { // far more than the gate reads at once
		next = append(next, delivery(2, "Bob", uint64(i+1), 4000)...)
	}
	wrote := make(chan struct{})
	go func() { writeChunks(broker, next); close(wrote) }()
	got := make(chan struct{})
	go func() {
		b := make([]byte, 1)
		_, _ = io.ReadFull(g, b)
		close(got)
	}()
	select {
	case <-wrote:
		t.Fatal("the gate read everything from the socket while over its limit")
	case <-got:
		t.Fatal("the gate passed on a delivery while over its limit")
	case <-time.After(100 * time.Millisecond): // a window for the gate to get it wrong
	}
	// Under the limit, deliveries pass until it is reached again: two of
	// Bob's 4000 bytes, then two more once they are released, and so on.
	g.release("Alice", 6000)
	<-got
	rest := next[1:]
	for range 25 {
		b := readN(t, g, 2*one-(len(next)-len(rest))%one)
		if !bytes.Equal(b, rest[:len(b)]) {
			t.Fatal("the frames after the pause changed")
		}
		rest = rest[len(b):]
		if n := g.budget.held(); n != 8000 {
			t.Fatalf("held %d bytes with two of Bob's deliveries through, want 8000", n)
		}
		g.release("Bob", 8000)
	}
	<-wrote
	g.release("Alice", 0)
	go writeChunks(broker, delivery(3, "Carol", 1, 3000))
	readN(t, g, len(delivery(3, "Carol", 1, 3000)))
	g.forget("Carol")
	if n := g.budget.held(); n != 0 {
		t.Errorf("held %d bytes after forgetting Carol, want 0", n)
	}
	go writeChunks(broker, delivery(3, "Carol", 2, 3000))
	readN(t, g, len(delivery(3, "Carol", 2, 3000)))
	_ = g.Close()
	if n := g.budget.held(); n != 0 {
		t.Errorf("held %d bytes after Close, want 0", n)
	}
	g.release("Carol", 3000) // after Close: nothing to release, nothing goes negative
	if n := g.budget.held(); n != 0 {
		t.Errorf("held %d bytes after a release past Close, want 0", n)
	}
}

// Something that is not AMQP frames (a broker answering with its protocol
// header) passes through untouched.
func TestGatePassesNonFrames(t *testing.T) {
	g, broker := testGate(t, 1<<20, 4096)
	header := []byte("AMQP\x00\x00\x09\x01")
	go writeChunks(broker, header)
	if got := readN(t, g, len(header)); !bytes.Equal(got, header) {
		t.Fatalf("got %q", got)
	}
}
