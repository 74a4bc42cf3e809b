package amqpspace

import (
	"encoding/binary"
	"log/slog"
	"net"
	"sync"
	"time"
)

// The bound on what a space holds of its input. RabbitMQ ignores a prefetch
// in bytes, and a prefetch in messages bounds memory only as far as the
// largest message allows: 256 messages of 4 MiB per queue, per agent. So
// the space counts the bytes itself, where they come in: a gate in front of
// each consuming connection reads the AMQP frames as they pass, counts the
// body of each delivery until the space is done with it (acknowledged it,
// or dropped it), and stops reading from the socket while the count is at
// Config.MaxPendingBytes. The broker then holds what is sent meanwhile:
// TCP's flow control does the rest. The gate also drops the body of a
// delivery over Config.MaxMessageSize as it passes, so that such a message
// is never held in memory at all; the client library sees it with an empty
// body, and the gate tells the consumer what it was.

// AMQP 0-9-1 frame types, and what the gate reads of them.
const (
	frameMethod    = 1
	frameHeader    = 2
	frameBody      = 3
	frameHeartbeat = 8
	frameEnd       = 0xCE

	frameHeaderLen = 7       // type, channel, payload size
	maxParsedFrame = 1 << 20 // a method or header frame longer than this is not parsed

	classBasic   = 60
	basicDeliver = 60
)

// budget is the space's count of bytes held, shared by its gates.
type budget struct {
	limit int64
	log   *slog.Logger

	mu     sync.Mutex
	used   int64
	paused bool          // a gate waits: logged once per pause
	below  chan struct{} // closed when used drops below limit
}

func newBudget(limit int64, log *slog.Logger) *budget {
	b := &budget{limit: limit, log: log, below: make(chan struct{})}
	close(b.below)
	return b
}

func (b *budget) add(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used += n
	if b.used >= b.limit && b.used-n < b.limit {
		b.below = make(chan struct{})
	}
	b.mu.Unlock()
}

func (b *budget) sub(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < b.limit && b.used+n >= b.limit {
		close(b.below)
		if b.paused {
			b.paused = false
			b.log.Info("amqpspace: reading from the broker again", "held_bytes", b.used, "limit", b.limit)
		}
	}
	b.mu.Unlock()
}

// held returns the bytes counted now.
func (b *budget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// wait returns at once while the count is below the limit; otherwise when it
// drops below, or when done closes. It reports whether it waited.
func (b *budget) wait(done <-chan struct{}) bool {
	b.mu.Lock()
	below := b.below
	select {
	case <-below:
		b.mu.Unlock()
		return false
	default:
	}
	if !b.paused {
		b.paused = true
		b.log.Warn("amqpspace: agents hold as many bytes of incoming messages as they may; reading from the broker pauses until they take some",
			"held_bytes", b.used, "limit", b.limit)
	}
	b.mu.Unlock()
	select {
	case <-below:
	case <-done:
	}
	return true
}

// deliveryKey names a delivery on one connection: consumer tags are unique
// on a connection (they are queue names), delivery tags on a channel.
type deliveryKey struct {
	consumer string
	tag      uint64
}

// gate wraps a consuming connection's socket; see the top of this file.
// Read runs on the client library's reader goroutine; release, forget and
// oversized on the consumers'. It waits before a delivery, never inside
// one, so that the bound is passed by one message at most.
type gate struct {
	net.Conn
	budget  *budget
	maxBody uint64

	mu       sync.Mutex
	held     map[string]int64 // consumer tag → bytes counted and not released
	total    int64            // the sum of held
	dropped  map[deliveryKey]uint64
	closed   bool
	done     chan struct{} // closed by Close
	deadline time.Duration // the read deadline the library asks for, as a span

	// The reader's state, touched by Read only.
	in       []byte // the array buf lives in, reused
	buf      []byte // read from the socket, not yet passed on
	out      []byte // passed on; out[outStart:] not yet returned by Read
	outStart int
	raw      bool // not AMQP frames after all (or one too large): pass all on
	channels map[uint16]*channelState
}

// channelState is what the gate knows of one channel's current delivery.
type channelState struct {
	delivery deliveryKey // of the last basic.deliver
	pending  bool        // that basic.deliver waits for its header
	left     uint64      // body bytes still to come
	drop     bool        // and they are dropped
}

func newGate(c net.Conn, b *budget, maxBody int) *gate {
	return &gate{
		Conn: c, budget: b, maxBody: uint64(maxBody),
		held:     make(map[string]int64),
		dropped:  make(map[deliveryKey]uint64),
		done:     make(chan struct{}),
		channels: make(map[uint16]*channelState),
		in:       make([]byte, 0, 2*readChunk),
	}
}

// SetReadDeadline records the span the library allows between frames, so
// that a pause of the gate's own does not count against it.
func (g *gate) SetReadDeadline(t time.Time) error {
	g.mu.Lock()
	if t.IsZero() {
		g.deadline = 0
	} else {
		g.deadline = time.Until(t)
	}
	g.mu.Unlock()
	return g.Conn.SetReadDeadline(t)
}

// Close stops the gate and closes the socket.
func (g *gate) Close() error {
	g.stop()
	return g.Conn.Close()
}

// stop releases what the gate counted, and lets a Read that waits for the
// budget go on: the connection is closing, and its close handshake must
// get through.
func (g *gate) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	g.budget.sub(g.total)
	g.total = 0
	clear(g.held)
	close(g.done)
}

// release uncounts n bytes of a delivery to consumer.
func (g *gate) release(consumer string, n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	n = min(n, g.held[consumer])
	if g.held[consumer] -= n; g.held[consumer] == 0 {
		delete(g.held, consumer)
	}
	g.total -= n
	g.budget.sub(n)
}

// forget uncounts whatever is still counted for consumer: its channel has
// closed, and the deliveries the library still held for it are gone.
func (g *gate) forget(consumer string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	n := g.held[consumer]
	delete(g.held, consumer)
	for k := range g.dropped {
		if k.consumer == consumer {
			delete(g.dropped, k)
		}
	}
	g.total -= n
	g.budget.sub(n)
}

// oversized reports the size of a delivery whose body the gate dropped.
func (g *gate) oversized(consumer string, tag uint64) (uint64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := deliveryKey{consumer, tag}
	n, ok := g.dropped[k]
	delete(g.dropped, k)
	return n, ok
}

func (g *gate) count(consumer string, n uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.held[consumer] += int64(n)
	g.total += int64(n)
	g.budget.add(int64(n))
}

// Read returns the frames from the socket, less the dropped bodies. Before
// a delivery it waits while the budget is spent.
func (g *gate) Read(p []byte) (int, error) {
	for g.outStart == len(g.out) {
		g.out, g.outStart = g.out[:0], 0
		held := g.parse()
		if len(g.out) > 0 {
			break
		}
		if held {
			g.budget.wait(g.done)
			g.mu.Lock()
			span := g.deadline
			g.mu.Unlock()
			if span > 0 {
				// The library's deadline has run while the gate held back:
				// give it its span from now.
				_ = g.Conn.SetReadDeadline(time.Now().Add(span))
			}
			continue
		}
		g.room()
		n, err := g.Conn.Read(g.buf[len(g.buf):cap(g.buf)])
		g.buf = g.buf[:len(g.buf)+n]
		if err != nil {
			g.parse()
			if len(g.out) == 0 {
				return 0, err
			}
			break
		}
	}
	n := copy(p, g.out[g.outStart:])
	g.outStart += n
	return n, nil
}

// readChunk is the most one socket read takes.
const readChunk = 32 << 10

// room makes space for a socket read at the end of buf, moving what is left
// of buf (the start of a frame) to the front of its array, which grows when
// a frame is larger than it.
func (g *gate) room() {
	if cap(g.buf)-len(g.buf) >= readChunk {
		return
	}
	if need := len(g.buf) + readChunk; cap(g.in) < need {
		g.in = make([]byte, 0, max(2*cap(g.in), need))
	}
	g.buf = g.in[:copy(g.in[:cap(g.in)], g.buf)]
}

// spent reports whether the budget is spent, for a gate that still counts.
func (g *gate) spent() bool {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	return !closed && g.budget.held() >= g.budget.limit
}

// parse moves the whole frames in buf to out, less the bodies it drops.
// A frame is at most the negotiated frame size (128 KiB), so holding one
// back until it is whole costs little. It stops before the frame that
// starts a delivery while the budget is spent, and then reports true: the
// message that was being read is finished, the next waits (in buf, and
// then in the socket and the broker).
func (g *gate) parse() (held bool) {
	for len(g.buf) > 0 {
		if g.raw {
			g.out = append(g.out, g.buf...)
			g.buf = g.buf[:0]
			return false
		}
		if len(g.buf) < frameHeaderLen {
			return false
		}
		typ := g.buf[0]
		ch := binary.BigEndian.Uint16(g.buf[1:3])
		size := binary.BigEndian.Uint32(g.buf[3:7])
		switch {
		case typ != frameMethod && typ != frameHeader && typ != frameBody && typ != frameHeartbeat,
			size > maxParsedFrame:
			// The broker's protocol header (it speaks another version),
			// or not AMQP: the library says what is wrong.
			g.raw = true
			continue
		}
		whole := frameHeaderLen + int(size) + 1
		if len(g.buf) < whole {
			return false
		}
		frame, payload := g.buf[:whole], g.buf[frameHeaderLen:whole-1]
		if typ == frameMethod && isDeliver(payload) && g.spent() {
			return true
		}
		g.buf = g.buf[whole:]
		switch typ {
		case frameMethod:
			g.method(ch, payload)
		case frameHeader:
			g.header(ch, payload)
		case frameBody:
			if g.body(ch, uint64(size)) {
				continue // dropped
			}
		}
		g.out = append(g.out, frame...)
	}
	return false
}

func isDeliver(payload []byte) bool {
	return len(payload) >= 4 && binary.BigEndian.Uint16(payload) == classBasic && binary.BigEndian.Uint16(payload[2:]) == basicDeliver
}

// method notes a basic.deliver: its consumer and delivery tags name the
// content that follows on the channel.
func (g *gate) method(ch uint16, payload []byte) {
	if len(payload) < 5 || !isDeliver(payload) {
		return
	}
	n := int(payload[4])
	if len(payload) < 5+n+8 {
		return
	}
	st := g.channel(ch)
	if tag := payload[5 : 5+n]; st.delivery.consumer != string(tag) { // a channel's consumers repeat: no string made for most
		st.delivery.consumer = string(tag)
	}
	st.delivery.tag = binary.BigEndian.Uint64(payload[5+n:])
	st.pending = true
}

// header counts the body a delivery announces, or, when it is over the
// limit, rewrites the announced size to 0 and drops the body as it comes.
func (g *gate) header(ch uint16, payload []byte) {
	if len(payload) < 12 {
		return
	}
	st := g.channel(ch)
	size := binary.BigEndian.Uint64(payload[4:12])
	if !st.pending { // content of something else (none on a consuming connection)
		st.left, st.drop = size, false
		return
	}
	st.pending = false
	if size == 0 {
		return
	}
	if size > g.maxBody {
		binary.BigEndian.PutUint64(payload[4:12], 0)
		st.left, st.drop = size, true
		g.mu.Lock()
		g.dropped[st.delivery] = size
		g.mu.Unlock()
	} else {
		st.left, st.drop = size, false
		g.count(st.delivery.consumer, size)
	}
}

// body accounts for a body frame of size bytes on ch, and reports whether
// it is to be dropped.
func (g *gate) body(ch uint16, size uint64) (drop bool) {
	st := g.channels[ch]
	if st == nil || st.left == 0 {
		return false
	}
	drop = st.drop
	st.left -= min(size, st.left)
	if st.left == 0 {
		st.drop = false
	}
	return drop
}

func (g *gate) channel(ch uint16) *channelState {
	st := g.channels[ch]
	if st == nil {
		st = &channelState{}
		g.channels[ch] = st
	}
	return st
}
