package amqpspace

import (
	"fmt"
	"slices"
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

// Acknowledgements are batched with multiple=true only over a run of
// deliveries that have all come and been settled: never past one the
// agent holds, nor past one that has not come yet; what is settled past
// such a gap goes on its own, at once. A key counts as acknowledged when
// its acknowledgement is sent.
func TestAcksBatched(t *testing.T) {
	log := &ackLog{}
	var acked []string
	sub := &subscription{acker: log, acked: func(k string) { acked = append(acked, k) }}
	sub.acks.batch = 3
	sub.acks.delay = time.Hour
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
	sub.ack(2) // 1 is still held: 2 goes on its own
	expect([]string{"2"}, []string{"m2"})
	sub.ack(1) // 1 and 2 settled: 1 waits, the consumer being busy
	expect([]string{"2"}, []string{"m2"})
	sub.ack(3)
	expect([]string{"2"}, []string{"m2"})
	sub.setBusy(false) // nothing ready: what waits goes
	expect([]string{"2", "3+"}, []string{"m2", "m1", "m3"})

	// Not past a delivery that has not come: 5 is settled before 4 is
	// seen (the other queue's consumer has it).
	sub.setBusy(true)
	sub.settle(5)
	expect([]string{"2", "3+", "5"}, []string{"m2", "m1", "m3"})
	sub.hold(4, "m4", "", 0)
	sub.hold(6, "m6", "", 0)
	sub.ack(6) // 4 is held: on its own
	sub.ack(4)
	expect([]string{"2", "3+", "5", "6"}, []string{"m2", "m1", "m3", "m6"})

	// At most batch wait: 4 (with 5 and 6 past it), 7 and 8.
	for tag := uint64(7); tag <= 9; tag++ {
		sub.hold(tag, fmt.Sprint("m", tag), "", 0)
		sub.ack(tag)
	}
	expect([]string{"2", "3+", "5", "6", "8+"}, []string{"m2", "m1", "m3", "m6", "m4", "m7", "m8"})

	// With the consumer idle, a settled delivery goes at once; releaseAll
	// sends what waits.
	sub.setBusy(false)
	expect([]string{"2", "3+", "5", "6", "8+", "9+"}, []string{"m2", "m1", "m3", "m6", "m4", "m7", "m8", "m9"})
	sub.hold(10, "m10", "", 0)
	sub.ack(10)
	expect([]string{"2", "3+", "5", "6", "8+", "9+", "10+"}, []string{"m2", "m1", "m3", "m6", "m4", "m7", "m8", "m9", "m10"})
	sub.setBusy(true)
	sub.hold(11, "m11", "", 0)
	sub.hold(12, "m12", "", 0)
	sub.ack(11)
	sub.releaseAll(time.Time{})
	expect([]string{"2", "3+", "5", "6", "8+", "9+", "10+", "12+"}, []string{"m2", "m1", "m3", "m6", "m4", "m7", "m8", "m9", "m10", "m11", "m12"})
}

// An acknowledgement that waits goes after ackDelay at the latest, even
// while the agent holds other deliveries.
func TestAckDelayBounded(t *testing.T) {
	log := &ackLog{}
	acked := make(chan string, 1)
	sub := &subscription{acker: log, acked: func(k string) { acked <- k }}
	sub.acks.batch = 64
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
	sub.ackMu.Lock()
	defer sub.ackMu.Unlock()
	if !slices.Equal(log.sent, []string{"1+"}) {
		t.Errorf("sent %v, want [1+]", log.sent)
	}
}
