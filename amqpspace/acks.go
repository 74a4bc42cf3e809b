package amqpspace

import "time"

// Acknowledgements go to the broker in batches where that is safe: one
// basic.ack with multiple=true for a run of deliveries that are all done
// with, rather than one per delivery. The broker does less work per
// message, and so does the socket.
//
// multiple=true acknowledges every delivery of the channel up to the tag,
// so it is sent only for a prefix of the channel's tags that has all come
// to the consumer and been settled (taken by the agent, or dropped): never
// past a delivery the agent has not taken yet, nor past one the client
// library still holds for the other queue's consumer (both consumers of an
// agent share a channel and its tags). A delivery settled while an earlier
// one is still outstanding is acknowledged at once, on its own, as it
// always was: an agent that holds one message for long does not hold back
// the acknowledgement of the others, nor the prefetch window they take.
//
// The settled prefix waits while more is on its way: while the agent
// still holds deliveries of the subscription it has not taken (its
// mailbox has a backlog, and takes them one after another) or the
// consumer has deliveries in hand, up to ackBatch acknowledgements and at
// most ackDelay. Otherwise it goes at once: a lone message is acknowledged
// when it is taken, as ever, and a burst in batches. Until its
// acknowledgement is sent, a message counts as held (its key stays in
// member.unacked), so a redelivery after a lost connection is recognised
// whichever way the acknowledgement went.

// ackDelay bounds how long a settled delivery's acknowledgement waits for
// others to go with it.
const ackDelay = 2 * time.Millisecond

// ackState is a subscription's record of its acknowledgements, under
// subscription.ackMu.
type ackState struct {
	floor uint64          // every tag up to floor has come and is settled
	early map[uint64]bool // settled tags past a gap, acknowledged one by one
	top   uint64          // the last tag of the waiting prefix; 0: none waits
	keys  []string        // the keys of the waiting acknowledgements
	n     int             // how many acknowledgements wait
	busy  bool            // the consumer has deliveries in hand
	batch int             // at most this many wait; 0 or 1: none does
	off   bool            // a gap stayed open too long: no more batches
	timer *time.Timer     // sends what waits after delay
	delay time.Duration   // 0: ackDelay
}

// maxEarly bounds ackState.early. On a channel of its own, a gap closes
// within a few deliveries (the other queue's consumer takes its turn, the
// agent takes what it holds). On a channel shared with other agents'
// consumers their deliveries are gaps that never close: the subscription
// then stops batching, and acknowledges one by one as before, rather than
// remember more. (Batching per shared channel is not done yet.)
const maxEarly = 64

// settleLocked records that the delivery with tag is done with; key is the
// handed-over message's key ("" for one that was dropped). It returns the
// keys whose acknowledgements it sent, for sub.acked.
func (sub *subscription) settleLocked(tag uint64, key string) []string {
	a := &sub.acks
	switch {
	case tag == a.floor+1 && !a.off:
		a.floor, a.top = tag, tag
		if key != "" {
			a.keys = append(a.keys, key)
		}
		a.n++
		for a.early[a.floor+1] {
			delete(a.early, a.floor+1)
			a.floor++
		}
		if a.n >= a.batch || !a.busy && len(sub.held) == 0 {
			return sub.flushLocked()
		}
		if a.n == 1 {
			if a.delay == 0 {
				a.delay = ackDelay
			}
			if a.timer == nil {
				a.timer = time.AfterFunc(a.delay, sub.flush)
			} else {
				a.timer.Reset(a.delay)
			}
		}
		return nil
	case tag > a.floor:
		// An earlier delivery is outstanding: this one goes on its own.
		_ = sub.acker.Ack(tag, false) // a lost one is recognised on redelivery
		switch {
		case a.off:
		case len(a.early) >= maxEarly:
			a.off, a.early = true, nil
		default:
			if a.early == nil {
				a.early = make(map[uint64]bool)
			}
			a.early[tag] = true
		}
		if key != "" {
			return []string{key}
		}
	}
	return nil
}

// flushLocked sends the waiting acknowledgements, and returns their keys.
func (sub *subscription) flushLocked() []string {
	a := &sub.acks
	if a.n == 0 {
		return nil
	}
	_ = sub.acker.Ack(a.top, true) // a lost one is recognised on redelivery
	if a.timer != nil {
		a.timer.Stop()
	}
	keys := a.keys
	a.keys, a.top, a.n = nil, 0, 0
	return keys
}

// flush sends the waiting acknowledgements.
func (sub *subscription) flush() {
	sub.ackMu.Lock()
	keys := sub.flushLocked()
	sub.ackMu.Unlock()
	sub.ackedAll(keys)
}

// settle is settleLocked for a delivery the consumer drops: it was never
// held.
func (sub *subscription) settle(tag uint64) {
	sub.ackMu.Lock()
	sub.settleLocked(tag, "")
	sub.ackMu.Unlock()
}

// setBusy records whether the consumer has deliveries in hand; when it has
// none and the agent holds none, the waiting acknowledgements go.
func (sub *subscription) setBusy(busy bool) {
	sub.ackMu.Lock()
	sub.acks.busy = busy
	var keys []string
	if !busy && len(sub.held) == 0 {
		keys = sub.flushLocked()
	}
	sub.ackMu.Unlock()
	sub.ackedAll(keys)
}

func (sub *subscription) ackedAll(keys []string) {
	for _, k := range keys {
		sub.acked(k)
	}
}
