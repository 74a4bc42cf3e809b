package amqpspace

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// ackLog records the acknowledgements sent, as "tag" or "tag+" for
// multiple=true.
type ackLog struct{ sent []string }

func (r *ackLog) Ack(tag uint64, multiple bool) error {
	s := fmt.Sprint(tag)
	if multiple {
		s += "+"
	}
	r.sent = append(r.sent, s)
	return nil
}
func (r *ackLog) Nack(uint64, bool, bool) error { return nil }
func (r *ackLog) Reject(uint64, bool) error     { return nil }

// testSub returns a subscription on the channel whose acknowledgements a
// records, noting the keys acknowledged in acked.
func testSub(a *chanAcks, acked *[]string) *subscription {
	return &subscription{acks: a, acked: func(k string) { *acked = append(*acked, k) }}
}

// Acknowledgements are batched with multiple=true only up to a delivery
// that has not come or has not been settled; what is settled past it goes
// on its own when the batch goes. A key counts as acknowledged when its
// acknowledgement is sent.
func TestAcksBatched(t *testing.T) {
	log := &ackLog{}
	var acked []string
	a := newChanAcks(log, 3)
	a.delay = time.Hour
	sub := testSub(a, &acked)
	expect := func(sent, keys []string) {
		t.Helper()
		if !slices.Equal(log.sent, sent) || !slices.Equal(acked, keys) {
			t.Fatalf("sent %v for %v, want %v for %v", log.sent, acked, sent, keys)
		}
	}
	sub.setBusy(true)
	for tag := uint64(1); tag <= 3; tag++ {
		sub.hold(tag, fmt.Sprint("m", tag), "", 0)
	}
	sub.ack(2) // 1 is still held: 2 waits
	sub.ack(1)
	expect(nil, nil)
	sub.ack(3) // three wait: they go
	expect([]string{"3+"}, []string{"m2", "m1", "m3"})

	// Not past a delivery that has not come: 5 is settled before 4 is
	// seen (the other queue's consumer has it).
	sub.settle(5)
	sub.setBusy(false) // 4 is on its way: nothing goes
	expect([]string{"3+"}, []string{"m2", "m1", "m3"})
	a.flush() // the delay is over: 5 goes on its own
	expect([]string{"3+", "5"}, []string{"m2", "m1", "m3"})
	sub.setBusy(true)
	sub.hold(4, "m4", "", 0)
	sub.hold(6, "m6", "", 0)
	sub.ack(6) // 4 is held: 6 waits
	sub.ack(4)
	sub.setBusy(false) // nothing is unsettled: what waits goes
	expect([]string{"3+", "5", "6+"}, []string{"m2", "m1", "m3", "m6", "m4"})

	// With the consumer idle, a settled delivery goes at once.
	sub.hold(7, "m7", "", 0)
	sub.ack(7)
	expect([]string{"3+", "5", "6+", "7+"}, []string{"m2", "m1", "m3", "m6", "m4", "m7"})
	// A tag settled twice is acknowledged once.
	sub.ack(7)
	sub.settle(7)
	expect([]string{"3+", "5", "6+", "7+"}, []string{"m2", "m1", "m3", "m6", "m4", "m7"})

	// releaseAll sends what waits, and what is held.
	sub.setBusy(true)
	sub.hold(8, "m8", "", 0)
	sub.hold(9, "m9", "", 0)
	sub.ack(8)
	sub.releaseAll(time.Time{})
	expect([]string{"3+", "5", "6+", "7+", "9+"}, []string{"m2", "m1", "m3", "m6", "m4", "m7", "m8", "m9"})
}

// Agents that consume on one channel share its delivery tags: a
// multiple=true acknowledgement never covers a neighbour's delivery that
// its agent has not taken, nor one its consumer has not read yet; what the
// others settle meanwhile goes on its own, and in one batch once the slow
// one is taken.
func TestAcksSharedChannel(t *testing.T) {
	log := &ackLog{}
	var acked []string
	a := newChanAcks(log, 64)
	a.delay = time.Hour
	slow, b, c := testSub(a, &acked), testSub(a, &acked), testSub(a, &acked)
	expect := func(sent, keys []string) {
		t.Helper()
		if !slices.Equal(log.sent, sent) || !slices.Equal(acked, keys) {
			t.Fatalf("sent %v for %v, want %v for %v", log.sent, acked, sent, keys)
		}
	}
	for _, s := range []*subscription{slow, b, c} {
		s.setBusy(true)
	}
	// Tags interleave: 1 and 4 to the slow agent, which holds them.
	slow.hold(1, "s1", "", 0)
	b.hold(2, "b2", "", 0)
	c.hold(3, "c3", "", 0)
	slow.hold(4, "s4", "", 0)
	b.hold(5, "b5", "", 0)
	c.hold(6, "c6", "", 0)
	c.ack(6)
	b.ack(2)
	c.ack(3)
	b.ack(5)
	b.setBusy(false)
	c.setBusy(false)
	slow.setBusy(false) // the slow agent still holds 1 and 4: nothing goes
	expect(nil, nil)
	a.flush() // the delay is over: each on its own, none past 1
	expect([]string{"6", "2", "3", "5"}, []string{"c6", "b2", "c3", "b5"})

	// 8 is settled while 7, delivered to the slow agent's consumer, is
	// still with the client library.
	b.setBusy(true)
	b.hold(8, "b8", "", 0)
	b.ack(8)
	b.setBusy(false)
	a.flush()
	expect([]string{"6", "2", "3", "5", "8"}, []string{"c6", "b2", "c3", "b5", "b8"})

	// The slow agent takes what it holds, and reads 7: once nothing is
	// unsettled, one acknowledgement goes for the three.
	slow.setBusy(true)
	slow.ack(1)
	slow.hold(7, "s7", "", 0)
	slow.ack(7)
	expect([]string{"6", "2", "3", "5", "8"}, []string{"c6", "b2", "c3", "b5", "b8"})
	slow.ack(4)
	slow.setBusy(false)
	expect([]string{"6", "2", "3", "5", "8", "7+"}, []string{"c6", "b2", "c3", "b5", "b8", "s1", "s7", "s4"})

	// A consumer that ends sends what waits, whoever it is for.
	c.setBusy(true)
	b.hold(9, "b9", "", 0)
	b.ack(9)
	c.stop()
	expect([]string{"6", "2", "3", "5", "8", "7+", "9+"}, []string{"c6", "b2", "c3", "b5", "b8", "s1", "s7", "s4", "b9"})
}

// brokerModel is an acknowledger that checks what RabbitMQ would: a
// delivery is acknowledged or put back once (a second time by its tag is
// a channel error), and, for the space's guarantee, only once its agent
// has taken it.
type brokerModel struct {
	t        *testing.T
	mu       sync.Mutex
	unacked  map[uint64]bool // delivered, not acknowledged → taken or dropped
	multiple int             // acknowledgements with multiple=true that covered more than one
	sent     int
}

func (m *brokerModel) Ack(tag uint64, multiple bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent++
	if !multiple {
		taken, ok := m.unacked[tag]
		switch {
		case !ok:
			m.t.Errorf("unknown delivery tag %d", tag)
		case !taken:
			m.t.Errorf("tag %d acknowledged before it was taken", tag)
		}
		delete(m.unacked, tag)
		return nil
	}
	n := 0
	for t, taken := range m.unacked {
		if t > tag {
			continue
		}
		if !taken {
			m.t.Errorf("%d+ acknowledged tag %d before it was taken", tag, t)
		}
		delete(m.unacked, t)
		n++
	}
	if n > 1 {
		m.multiple++
	}
	return nil
}

func (m *brokerModel) Nack(tag uint64, _, _ bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.unacked[tag]; !ok {
		m.t.Errorf("put back unknown delivery tag %d", tag)
	}
	delete(m.unacked, tag)
	return nil
}

func (m *brokerModel) Reject(tag uint64, requeue bool) error { return m.Nack(tag, false, requeue) }

// Several agents on one channel, their deliveries interleaved at random,
// each consumer reading its own in order and its agent taking them out of
// order, one agent much later than the others: nothing is acknowledged
// before it is taken or twice, everything is acknowledged in the end,
// and batches go.
func TestAcksSharedChannelInterleaved(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		model := &brokerModel{t: t, unacked: make(map[uint64]bool)}
		a := newChanAcks(model, 16)
		a.delay = time.Hour // flushed by hand below, as the timer would
		const agents, total = 5, 2000
		type consumer struct {
			sub     *subscription
			inbox   []uint64 // delivered, not read yet
			holding []uint64 // read and held, not taken yet
		}
		var keys []string
		cs := make([]*consumer, agents)
		for i := range cs {
			cs[i] = &consumer{sub: testSub(a, &keys)}
		}
		slow := cs[0]
		next := uint64(1)
		step := func(slowToo bool) {
			c := cs[rng.IntN(agents)]
			switch r := rng.IntN(10); {
			case r < 3 && next <= total:
				// The broker delivers the channel's next tag to one of them.
				model.mu.Lock()
				model.unacked[next] = false
				model.mu.Unlock()
				c.inbox = append(c.inbox, next)
				next++
			case r < 6 && len(c.inbox) > 0:
				tag := c.inbox[0]
				c.inbox = c.inbox[1:]
				c.sub.setBusy(true)
				if rng.IntN(20) == 0 {
					model.mu.Lock()
					model.unacked[tag] = true // dropped: settled at once
					model.mu.Unlock()
					c.sub.settle(tag)
				} else {
					c.sub.hold(tag, fmt.Sprint("k", tag), "", 0)
					c.holding = append(c.holding, tag)
				}
			case r < 9 && len(c.holding) > 0 && (c != slow || slowToo):
				i := rng.IntN(len(c.holding))
				tag := c.holding[i]
				c.holding = slices.Delete(c.holding, i, i+1)
				model.mu.Lock()
				model.unacked[tag] = true
				model.mu.Unlock()
				c.sub.ack(tag)
			case r == 9:
				if len(c.inbox) == 0 {
					c.sub.setBusy(false)
				}
				if rng.IntN(4) == 0 {
					a.flush()
				}
			}
		}
		for range 20 * total {
			step(false)
		}
		for range 20 * total {
			step(true)
		}
		for _, c := range cs { // the rest, read and taken
			for _, tag := range c.inbox {
				c.sub.hold(tag, fmt.Sprint("k", tag), "", 0)
				c.holding = append(c.holding, tag)
			}
			for _, tag := range c.holding {
				model.mu.Lock()
				model.unacked[tag] = true
				model.mu.Unlock()
				c.sub.ack(tag)
			}
			c.sub.setBusy(false)
		}
		a.flush()
		if len(model.unacked) != 0 {
			t.Fatalf("seed %d: %d deliveries never acknowledged", seed, len(model.unacked))
		}
		if model.multiple == 0 {
			t.Errorf("seed %d: no acknowledgement covered more than one delivery", seed)
		}
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// An acknowledgement that waits goes after ackDelay at the latest, even
// while the agent holds other deliveries.
func TestAckDelayBounded(t *testing.T) {
	log := &ackLog{}
	acked := make(chan string, 1)
	a := newChanAcks(log, 64)
	sub := &subscription{acks: a, acked: func(k string) { acked <- k }}
	sub.hold(1, "m1", "", 0)
	sub.hold(2, "m2", "", 0) // held, not taken
	sub.ack(1)
	select {
	case k := <-acked:
		if k != "m1" {
			t.Fatalf("acknowledged %s, want m1", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the acknowledgement waited for the agent")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Equal(log.sent, []string{"1+"}) {
		t.Errorf("sent %v, want [1+]", log.sent)
	}
}
