package amqpspace

import (
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Acknowledgements go to the broker in batches where that is safe: one
// basic.ack with multiple=true for a run of deliveries that are all done
// with, rather than one per delivery. The broker does less work per
// message, and so does the socket.
//
// Delivery tags are the channel's, and up to agentsPerChannel agents
// consume on one channel, so the record is the channel's too (chanAcks):
// multiple=true acknowledges every delivery of the channel up to the tag,
// whichever agent it went to, so it is sent only up to a tag below which
// every delivery of the channel has come to its consumer and been settled
// (taken by its agent, dropped, or put back): never past a delivery an
// agent has not taken yet, nor past one the client library still holds
// for another consumer of the channel.
//
// A settled delivery's acknowledgement waits, with the others of the
// channel, while more is on its way: while a consumer of the channel has
// deliveries in hand, or a delivery of the channel is not settled yet (an
// agent holds it, or its consumer has not read it), up to chanAcks.batch
// of them (a quarter of Config.Prefetch) and at most ackDelay. Otherwise they go at once: a lone message is
// acknowledged when it is taken, as ever, and a burst in batches. When
// they go, those below every unsettled delivery go as one multiple=true
// acknowledgement, and those above one (an agent holds an earlier
// delivery still) each on its own: an agent that holds one message for
// long holds back neither the acknowledgement of its neighbours' nor the
// prefetch window they take, for more than ackDelay. Until its
// acknowledgement is sent, a message counts as held (its key stays in
// member.unacked), so a redelivery after a lost connection is recognised
// whichever way the acknowledgement went.

// ackDelay bounds how long a settled delivery's acknowledgement waits for
// others to go with it.
const ackDelay = 2 * time.Millisecond

// chanAcks is a consuming channel's record of its deliveries and their
// acknowledgements, shared by the subscriptions on the channel.
type chanAcks struct {
	acker amqp.Acknowledger // the channel, but for tests
	batch int               // at most this many wait; 0 or 1: none does
	delay time.Duration     // 0: ackDelay

	mu    sync.Mutex
	seen  uint64              // the highest tag come to a consumer
	open  map[uint64]struct{} // tags up to seen not settled: held, or not read yet
	floor uint64              // every tag up to floor is settled
	wait  []waitingAck        // settled, their acknowledgements not sent
	busy  int                 // the consumers that have deliveries in hand
	timer *time.Timer         // sends what waits after delay
}

// waitingAck is a settled delivery whose acknowledgement waits; key is
// its message's key, "" for a delivery that was dropped.
type waitingAck struct {
	tag uint64
	sub *subscription
	key string
}

// newChanAcks returns the record of a channel acknowledged through acker,
// where up to batch acknowledgements wait to go together.
func newChanAcks(acker amqp.Acknowledger, batch int) *chanAcks {
	return &chanAcks{acker: acker, batch: batch}
}

// seeLocked records that the delivery with tag has come to its consumer:
// those of the channel before it that have not are on their way to theirs.
func (a *chanAcks) seeLocked(tag uint64) {
	if tag <= a.seen {
		return
	}
	if a.open == nil {
		a.open = make(map[uint64]struct{})
	}
	for t := a.seen + 1; t <= tag; t++ {
		a.open[t] = struct{}{}
	}
	a.seen = tag
}

// doneLocked records that the delivery with tag is settled, reporting
// false if it was already.
func (a *chanAcks) doneLocked(tag uint64) bool {
	a.seeLocked(tag)
	if _, ok := a.open[tag]; !ok {
		return false
	}
	delete(a.open, tag)
	for a.floor < a.seen {
		if _, ok := a.open[a.floor+1]; ok {
			break
		}
		a.floor++
	}
	return true
}

// settleLocked records that the delivery with tag, of sub, is done with,
// its acknowledgement to be sent; key is the handed-over message's key
// ("" for one that was dropped). It returns what it sent, for ackedAll.
func (a *chanAcks) settleLocked(sub *subscription, tag uint64, key string) []waitingAck {
	if !a.doneLocked(tag) {
		return nil // acknowledging a tag twice would close the channel
	}
	a.wait = append(a.wait, waitingAck{tag: tag, sub: sub, key: key})
	if len(a.wait) >= a.batch || a.busy == 0 && len(a.open) == 0 {
		return a.flushLocked()
	}
	if len(a.wait) == 1 {
		if a.delay == 0 {
			a.delay = ackDelay
		}
		if a.timer == nil {
			a.timer = time.AfterFunc(a.delay, a.flush)
		} else {
			a.timer.Reset(a.delay)
		}
	}
	return nil
}

// flushLocked sends the waiting acknowledgements, and returns them.
func (a *chanAcks) flushLocked() []waitingAck {
	if len(a.wait) == 0 {
		return nil
	}
	var top uint64 // the last waiting tag below every unsettled one
	for _, w := range a.wait {
		if w.tag <= a.floor {
			top = max(top, w.tag)
		}
	}
	// A lost acknowledgement is recognised on redelivery.
	if top != 0 {
		_ = a.acker.Ack(top, true)
	}
	for _, w := range a.wait {
		if w.tag > a.floor {
			_ = a.acker.Ack(w.tag, false)
		}
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	sent := a.wait
	a.wait = nil
	return sent
}

// flush sends the waiting acknowledgements.
func (a *chanAcks) flush() {
	a.mu.Lock()
	sent := a.flushLocked()
	a.mu.Unlock()
	ackedAll(sent)
}

// ackedAll records that the acknowledgements of sent went.
func ackedAll(sent []waitingAck) {
	for _, w := range sent {
		if w.key != "" {
			w.sub.acked(w.key)
		}
	}
}

// settle records that sub's consumer dropped the delivery with tag: it was
// never held, and is acknowledged.
func (sub *subscription) settle(tag uint64) {
	a := sub.acks
	a.mu.Lock()
	sent := a.settleLocked(sub, tag, "")
	a.mu.Unlock()
	ackedAll(sent)
}

// putBack returns the delivery with tag to its queue, settling it.
func (sub *subscription) putBack(tag uint64) {
	a := sub.acks
	a.mu.Lock()
	defer a.mu.Unlock()
	// Under the lock: a multiple=true acknowledgement past the tag must
	// not go before it (it would acknowledge the message).
	if a.doneLocked(tag) {
		_ = a.acker.Nack(tag, false, true)
	}
}

// setBusy records whether sub's consumer has deliveries in hand; when no
// consumer of the channel has and no delivery of the channel is unsettled,
// the waiting acknowledgements go.
func (sub *subscription) setBusy(busy bool) {
	a := sub.acks
	a.mu.Lock()
	if busy != sub.busy {
		sub.busy = busy
		if busy {
			a.busy++
		} else {
			a.busy--
		}
	}
	var sent []waitingAck
	if a.busy == 0 && len(a.open) == 0 {
		sent = a.flushLocked()
	}
	a.mu.Unlock()
	ackedAll(sent)
}

// stop is setBusy(false) for a consumer that has ended: every waiting
// acknowledgement goes (and fails, the channel being closed, so that its
// key is recorded as maybe acknowledged before the agent subscribes
// again).
func (sub *subscription) stop() {
	sub.setBusy(false)
	sub.acks.flush()
}
