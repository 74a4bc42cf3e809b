package amqpspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
	"github.com/seed72275b23/agency-go/space"
)

// fenceType marks the message Remove puts at the end of an agent's queues:
// once the consumer sees it, everything sent before is in the agent's
// hands.
const fenceType = "agency.fence"

// member is an agent of this process and its consumer.
type member struct {
	s    *Space
	id   string
	conn *driver.Conn // set under s.mu (and subMu) once the agent is connected

	// subMu orders what changes the agent's queues and consumers: its Add,
	// its re-subscription after a reconnect, and its removal.
	subMu sync.Mutex

	mu      sync.Mutex
	sub     *subscription // the current session's, nil while disconnected
	last    *subscription // the latest started, whose consumer may still run
	leaving bool
	left    chan struct{} // closed when the removal is over; set when it starts

	// draining is set when the removal begins: from then on nothing is
	// held back, so that the fences reach the consumer whatever the agent
	// does meanwhile (it may be the one removing itself).
	draining atomic.Bool

	fence  string        // token of the fence being waited for
	fenced chan struct{} // closed when both queues' fences have arrived
	fences int

	// The broker delivers again, flagged as redelivered, what was not
	// acknowledged when a connection went: a message the agent has, but
	// whose acknowledgement is held (unacked) or was sent and may have been
	// lost with the connection (recent, the latest acknowledged). Those are
	// skipped.
	keysMu  sync.Mutex
	unacked map[string]int // handed-over message → how many of its deliveries are held
	recent  recentSet

	leaveErr error // the removal's result, written before left closes
}

// subscription is an agent's consumers on one session.
type subscription struct {
	sess      *session
	cc        *consumerConn // the connection of cch; nil in tests
	cch       *consumerChan // the channel they consume on, shared with other agents
	consumers []string      // the queues consumed so far
	direct    <-chan amqp.Delivery
	broadcast <-chan amqp.Delivery
	stopped   chan struct{}    // closed when the consumer goroutine has returned
	acked     func(key string) // the member's record of what was acknowledged
	closeOnce sync.Once

	acks *chanAcks               // cch's record of acknowledgements (acks.go); under its mu:
	held map[uint64]heldDelivery // handed to the agent, not yet taken
	busy bool                    // the consumer has deliveries in hand
}

// heldDelivery is a delivery whose acknowledgement waits for the agent.
type heldDelivery struct {
	key      string    // the message's handedKey
	since    time.Time // when it was handed over
	consumer string    // the consumer it came to, and its size: counted
	size     int64     // against Config.MaxPendingBytes until acknowledged
}

// close cancels the consumers, once, and gives back their place on the
// channel. What was delivered before goes on to the consumer goroutine.
func (sub *subscription) close() {
	sub.closeOnce.Do(func() {
		if sub.cch != nil {
			sub.cch.cancel(sub.consumers...)
			sub.sess.unchannel(sub.cch)
		}
	})
}

// abandon is close for a subscription whose consumer goroutine never ran:
// what the broker delivered meanwhile goes back to the queue (the channel,
// shared, stays open, and would hold it unacknowledged).
func (sub *subscription) abandon() {
	sub.close()
	for _, in := range [2]<-chan amqp.Delivery{sub.direct, sub.broadcast} {
		if in == nil {
			continue
		}
		go func() {
			for d := range in {
				sub.putBack(d.DeliveryTag)
				sub.uncount(d.ConsumerTag, int64(len(d.Body)))
			}
		}()
	}
}

// op runs f on a channel for queue operations (see consumerConn.op).
func (sub *subscription) op(f func(ch *amqp.Channel) error) error { return sub.cc.op(f) }

// uncount releases n bytes of a delivery to consumer from the budget.
func (sub *subscription) uncount(consumer string, n int64) {
	if sub.cc != nil {
		sub.cc.gate.release(consumer, n)
	}
}

// maxHold bounds how long an acknowledgement waits for the agent to take
// its message. RabbitMQ closes a channel that holds a delivery longer than
// its consumer_timeout (30 minutes by default); an agent busy for that
// long (an action waiting for a human, say) gets its backlog acknowledged
// rather than its channel closed. Backpressure lapses for that agent
// meanwhile.
var maxHold = 10 * time.Minute

// hold notes that the delivery with tag, of the message with key, waits
// for the agent; it came to consumer, with a body of size bytes.
func (sub *subscription) hold(tag uint64, key, consumer string, size int) {
	a := sub.acks
	a.mu.Lock()
	if sub.held == nil {
		sub.held = make(map[uint64]heldDelivery)
	}
	sub.held[tag] = heldDelivery{key: key, since: time.Now(), consumer: consumer, size: int64(size)}
	a.seeLocked(tag)
	a.mu.Unlock()
}

// ack acknowledges a held delivery, once: acknowledging a tag twice would
// close the channel. The acknowledgement may wait to go with others
// (acks.go).
func (sub *subscription) ack(tag uint64) {
	a := sub.acks
	a.mu.Lock()
	h, ok := sub.held[tag]
	var sent []waitingAck
	if ok {
		delete(sub.held, tag)
		sent = a.settleLocked(sub, tag, h.key)
	}
	a.mu.Unlock()
	if ok {
		sub.uncount(h.consumer, h.size)
	}
	ackedAll(sent)
}

// releaseAll acknowledges every held delivery, or those held since before
// cutoff when it is not zero, and sends every acknowledgement that waits.
func (sub *subscription) releaseAll(cutoff time.Time) {
	var done []heldDelivery
	var sent []waitingAck
	a := sub.acks
	a.mu.Lock()
	tags := make([]uint64, 0, len(sub.held))
	for tag, h := range sub.held {
		if !cutoff.IsZero() && h.since.After(cutoff) {
			continue
		}
		tags = append(tags, tag)
	}
	slices.Sort(tags) // the lowest first: the most go in one batch
	for _, tag := range tags {
		h := sub.held[tag]
		delete(sub.held, tag)
		done = append(done, h)
		sent = append(sent, a.settleLocked(sub, tag, h.key)...)
	}
	sent = append(sent, a.flushLocked()...)
	a.mu.Unlock()
	for _, h := range done {
		sub.uncount(h.consumer, h.size)
	}
	ackedAll(sent)
}

func (mem *member) queues() [2]string { return [2]string{mem.id, mem.id + broadcastSuffix} }

// claim declares the agent's queues and consumes them exclusively: the
// broker lets one consumer at a time hold them, which is what makes an id
// unique across processes.
func (mem *member) claim(sess *session) (*subscription, error) {
	return mem.consumeQueues(sess, false)
}

// errQueueGone is what reclaim returns when a queue it expected is gone.
var errQueueGone = errors.New("amqpspace: the queue is gone")

// reclaim consumes the agent's queues again, exclusively, on a new
// session, expecting them to be there, bound as they were: queues and
// bindings are durable, and outlive a lost connection. That spares the
// broker two bindings per agent (each a disk write, which it does one at a
// time), so that many agents come back within seconds rather than minutes,
// and Adds meanwhile are not held up behind them. A queue that has gone
// (it expired during a long outage, or was deleted) is errQueueGone, and
// the caller claims and binds it afresh.
func (mem *member) reclaim(sess *session) (*subscription, error) {
	return mem.consumeQueues(sess, true)
}

func (mem *member) consumeQueues(sess *session, existing bool) (*subscription, error) {
	s := mem.s
	cch, err := sess.channel()
	if err != nil {
		return nil, fmt.Errorf("adding %q: %w", mem.id, err)
	}
	sub := &subscription{sess: sess, cc: cch.cc, cch: cch, acks: cch.acks, stopped: make(chan struct{}), acked: mem.acked}
	fail := func(err error) (*subscription, error) {
		sub.abandon()
		var ae *amqp.Error
		if errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == amqp.ResourceLocked) {
			return nil, fmt.Errorf("%w: %q is live in another process (queue names are per vhost: perhaps under another exchange)", space.ErrAgentExists, mem.id)
		}
		if existing && errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return nil, errQueueGone
		}
		if !sess.alive() || connectionLost(err) {
			return nil, fmt.Errorf("adding %q: %w", mem.id, ErrDisconnected)
		}
		return nil, fmt.Errorf("amqpspace: subscribing %q: %w", mem.id, err)
	}
	for _, q := range mem.queues() {
		if err := s.declareQueue(sub, q, existing); err != nil {
			return fail(err)
		}
	}
	for i, q := range mem.queues() {
		// A consumer that got in since (another process adding the
		// same id at the same moment) closes the channel: the other
		// agents' consumers end with it, and the session starts over.
		d, err := cch.consume(q)
		if err != nil {
			return fail(err)
		}
		sub.consumers = append(sub.consumers, q)
		if i == 0 {
			sub.direct = d
		} else {
			sub.broadcast = d
		}
	}
	return sub, nil
}

// bind routes the agent's id and broadcasts to its queues.
func (mem *member) bind(sub *subscription) error {
	q := mem.queues()
	return sub.op(func(ch *amqp.Channel) error {
		if err := ch.QueueBind(q[0], mem.id, mem.s.cfg.Exchange, false, nil); err != nil {
			return fmt.Errorf("amqpspace: binding %q: %w", q[0], err)
		}
		if err := ch.QueueBind(q[1], broadcastKey, mem.s.cfg.Exchange, false, nil); err != nil {
			return fmt.Errorf("amqpspace: binding %q: %w", q[1], err)
		}
		return nil
	})
}

// release gives up queues that were claimed for an agent that does not
// join after all: they stop receiving, and expire unless it comes back.
func (mem *member) release(sub *subscription) {
	q := mem.queues()
	_ = sub.op(func(ch *amqp.Channel) error {
		_ = ch.QueueUnbind(q[0], mem.id, mem.s.cfg.Exchange, nil)
		return ch.QueueUnbind(q[1], broadcastKey, mem.s.cfg.Exchange, nil)
	})
	sub.abandon()
}

// setSub makes sub the agent's current subscription.
func (mem *member) setSub(sub *subscription) {
	mem.mu.Lock()
	mem.sub, mem.last = sub, sub
	mem.mu.Unlock()
}

// subscribed reports whether the agent consumes its queues on the
// space's current session: after a reconnect, not until it has been
// subscribed again.
func (mem *member) subscribed() bool {
	sess := mem.s.sess.Load()
	mem.mu.Lock()
	defer mem.mu.Unlock()
	return sess != nil && mem.sub != nil && mem.sub.sess == sess
}

// run starts the consumer of sub.
func (mem *member) run(sess *session, sub *subscription) {
	mem.s.wg.Add(1)
	go mem.consume(sess, sub)
}

// resubscribe claims and binds the agent's queues on a new session,
// unless the agent has not joined (its Add failed, or is under way on this
// session), is leaving, or is subscribed on sess already.
func (mem *member) resubscribe(sess *session) error {
	mem.subMu.Lock()
	defer mem.subMu.Unlock()
	mem.mu.Lock()
	leaving, last := mem.leaving, mem.last
	mem.mu.Unlock()
	if leaving || mem.conn == nil || last == nil || last.sess == sess {
		return nil
	}
	if last != nil {
		// The old session's consumer hands over what it still holds
		// first: the agent gets its messages in order, and the lost
		// acknowledgements are on record before their redeliveries come.
		<-last.stopped
	}
	sub, err := mem.reclaim(sess)
	if errors.Is(err, errQueueGone) {
		// Without Durable, a cluster node that died took them, with what
		// they held (or they were deleted, or expired, meanwhile).
		mem.s.log.Warn("amqpspace: an agent's queues were gone after the reconnect; declared again, what they held is lost", "agent", mem.id, "durable", mem.s.cfg.Durable)
		if sub, err = mem.claim(sess); err == nil {
			if err = mem.bind(sub); err != nil {
				mem.release(sub)
			}
		}
	}
	if err != nil {
		return err
	}
	mem.setSub(sub)
	mem.run(sess, sub)
	return nil
}

// consume hands the agent what arrives on its queues until its consumers
// end: at the end of the session or when the agent leaves.
func (mem *member) consume(sess *session, sub *subscription) {
	defer mem.s.wg.Done()
	defer close(sub.stopped)
	defer func() {
		// The consumers have ended: what the library still held for
		// them was read (cancelled) or is gone with the channel, and is
		// no longer counted.
		if sub.cc != nil {
			for _, q := range mem.queues() {
				sub.cc.gate.forget(q)
			}
		}
	}()
	// What waits goes (and fails, the channel being closed, so that its
	// keys are recorded as maybe acknowledged).
	defer sub.stop()
	direct, broadcast := sub.direct, sub.broadcast
	sweep := time.NewTicker(maxHold / 4)
	defer sweep.Stop()
	busy := false
	for direct != nil || broadcast != nil {
		var d amqp.Delivery
		var ok, isBroadcast bool
		select {
		case now := <-sweep.C:
			sub.releaseAll(now.Add(-maxHold))
			continue
		case d, ok = <-direct:
		case d, ok = <-broadcast:
			isBroadcast = true
		default:
			// Nothing is ready: the acknowledgements that wait go now,
			// unless the agent holds more to take (acks.go).
			if busy {
				sub.setBusy(false)
				busy = false
			}
			select {
			case now := <-sweep.C:
				sub.releaseAll(now.Add(-maxHold))
				continue
			case d, ok = <-direct:
			case d, ok = <-broadcast:
				isBroadcast = true
			}
		}
		if !ok {
			if isBroadcast {
				broadcast = nil
			} else {
				direct = nil
			}
			mem.consumerEnded(sess, sub)
			continue
		}
		if !busy {
			sub.setBusy(true)
			busy = true
		}
		mem.take(sub, d, isBroadcast)
	}
	mem.mu.Lock()
	if mem.sub == sub {
		mem.sub = nil
	}
	mem.mu.Unlock()
}

// consumerEnded handles the end of one of sub's consumers. At the end of
// the session or of the agent that is expected; otherwise the broker
// cancelled it (its queue was deleted from outside, say) and the agent
// would hear nothing more on that queue: the session starts over, and
// declares the queues again.
func (mem *member) consumerEnded(sess *session, sub *subscription) {
	mem.mu.Lock()
	expected := mem.sub != sub || mem.leaving
	mem.mu.Unlock()
	if !expected && sess.alive() {
		sess.fail(fmt.Errorf("%w: the broker cancelled a consumer of %q", ErrDisconnected, mem.id))
	}
}

// take checks one delivery and hands it to the agent. The acknowledgement
// of a message the agent gets waits until the agent takes it (starts
// handling it, or starts waiting for a response): with Config.Prefetch
// unacknowledged per queue, the broker sends no more, and a backlog stays
// in the broker's queue rather than in this process. What cannot be
// handled is answered or logged and acknowledged at once: requeued, it
// would only come back.
func (mem *member) take(sub *subscription, d amqp.Delivery, broadcast bool) {
	if len(d.Body) == 0 && sub.cc != nil {
		if size, ok := sub.cc.gate.oversized(d.ConsumerTag, d.DeliveryTag); ok {
			mem.s.log.Warn("amqpspace: dropped a message over the size limit", "agent", mem.id, "bytes", size, "limit", mem.s.cfg.MaxMessageSize, "app_id", d.AppId)
			sub.settle(d.DeliveryTag)
			return
		}
	}
	m := mem.check(d, broadcast)
	if m == nil {
		sub.settle(d.DeliveryTag)
		sub.uncount(d.ConsumerTag, int64(len(d.Body)))
		return
	}
	if mem.draining.Load() {
		if mem.hand(m) {
			mem.acked(handedKey(m))
		}
		sub.settle(d.DeliveryTag)
		sub.uncount(d.ConsumerTag, int64(len(d.Body)))
		return
	}
	tag, key := d.DeliveryTag, handedKey(m)
	mem.handing(key)
	sub.hold(tag, key, d.ConsumerTag, len(d.Body))
	if !mem.handFunc(m, func() { sub.ack(tag) }) {
		sub.ack(tag)
		return
	}
	if mem.draining.Load() {
		// A removal began meanwhile and may have released what was held
		// before this one: it must not wait for the agent.
		sub.ack(tag)
	}
}

// hand gives m to the agent, reporting whether it took it in.
func (mem *member) hand(m *agency.Message) bool { return mem.handFunc(m, nil) }

func (mem *member) handFunc(m *agency.Message, taken func()) bool {
	if err := mem.conn.DeliverFunc(m, taken); err != nil {
		mem.s.log.Debug("amqpspace: dropped a message for an agent that is leaving", "agent", mem.id, "from", m.From, "action", m.Action)
		return false
	}
	return true
}

// handing records that a message is handed over with its acknowledgement
// held.
func (mem *member) handing(key string) {
	mem.keysMu.Lock()
	if mem.unacked == nil {
		mem.unacked = make(map[string]int)
	}
	mem.unacked[key]++
	mem.keysMu.Unlock()
}

// acked records that the acknowledgement of a handed-over message was sent.
// It may still be lost with the connection: the latest ones are kept.
func (mem *member) acked(key string) {
	mem.keysMu.Lock()
	defer mem.keysMu.Unlock()
	if n := mem.unacked[key]; n > 1 {
		mem.unacked[key] = n - 1
	} else {
		delete(mem.unacked, key)
	}
	if mem.recent.keys == nil {
		// Acknowledgements in flight when a connection goes: at most a
		// prefetch window per queue.
		mem.recent.init(2*mem.s.cfg.Prefetch + 64)
	}
	mem.recent.add(key)
}

// check returns the message a delivery holds, or nil when the delivery is
// not for the agent: a fence, too large, through another exchange,
// malformed (answered where it can be), misaddressed, forged, or a
// redelivery of what the agent already has (or a response sent again that
// it has).
func (mem *member) check(d amqp.Delivery, broadcast bool) *agency.Message {
	s := mem.s
	if d.Type == fenceType {
		if d.Exchange == "" { // straight to the queue, as stopIntake sends them
			mem.sawFence(d.MessageId)
		}
		return nil
	}
	if len(d.Body) > s.cfg.MaxMessageSize {
		s.log.Warn("amqpspace: dropped a message over the size limit", "agent", mem.id, "bytes", len(d.Body), "limit", s.cfg.MaxMessageSize, "app_id", d.AppId)
		return nil
	}
	if d.Exchange != s.cfg.Exchange {
		// Queue names are the vhost's: a queue of this id still bound to
		// another space's exchange, or published to by name, is no way
		// into this space. (Fences come that way, and are handled above.)
		s.log.Warn("amqpspace: dropped a message that did not come through the space's exchange", "agent", mem.id, "exchange", d.Exchange, "app_id", d.AppId)
		return nil
	}
	m, err := mem.decode(d) // interop.go: both shapes in the Python-compatible mode
	if err != nil {
		mem.malformed(d, broadcast, err)
		return nil
	}
	switch {
	case checkTopology(m.From) != nil: // DecodeMessage has validated it as an id
		s.log.Warn("amqpspace: dropped a message from an id no agent of this space can have", "agent", mem.id, "from", m.From, "action", m.Action)
		return nil
	case broadcast && m.To != agency.Broadcast, !broadcast && m.To != mem.id:
		s.log.Warn("amqpspace: dropped a message whose recipient does not match its queue", "agent", mem.id, "to", m.To, "from", m.From, "broadcast_queue", broadcast)
		return nil
	case d.AppId != s.token && s.local(m.From):
		s.log.Warn("amqpspace: dropped a message from another process that claims to come from an agent of this one", "agent", mem.id, "from", m.From, "action", m.Action)
		return nil
	case (d.Redelivered || resent(d)) && mem.handedBefore(m):
		return nil
	}
	return m
}

// resent reports whether d is a message its sender published again (an
// answer lost with its connection or refused, see Space.sendAgain; one a
// new channel had confirmed before a refusal, see
// session.sendConfirmedAgain): the agent may have the first copy.
func resent(d amqp.Delivery) bool {
	v, _ := d.Headers[resentHeader].(bool)
	return v
}

func (mem *member) handedBefore(m *agency.Message) bool {
	k := handedKey(m)
	mem.keysMu.Lock()
	defer mem.keysMu.Unlock()
	return mem.unacked[k] > 0 || mem.recent.has(k)
}

func handedKey(m *agency.Message) string { return m.From + "\x00" + m.ID }

// recentSet holds the last n keys added.
type recentSet struct {
	keys []string
	next int
	set  map[string]int // key → how many times it is in keys
}

func (r *recentSet) init(n int) {
	r.keys = make([]string, n)
	r.set = make(map[string]int, n)
}

func (r *recentSet) add(k string) {
	if old := r.keys[r.next]; old != "" {
		if r.set[old]--; r.set[old] == 0 {
			delete(r.set, old)
		}
	}
	r.keys[r.next] = k
	r.set[k]++
	r.next = (r.next + 1) % len(r.keys)
}

func (r *recentSet) has(k string) bool {
	_, ok := r.set[k]
	return ok
}

// malformed deals with a delivery that is no message: if it names a
// sender that could be real, that sender gets an [error] invalid_args
// (answering the request it was, where it carries an id); otherwise it is
// dropped with a log line.
func (mem *member) malformed(d amqp.Delivery, broadcast bool, cause error) {
	s := mem.s
	// interop.go: operand/agency messages, broadcasts and answers of
	// either shape are never answered here.
	if mem.unanswerable(d, broadcast, cause) {
		return
	}
	var env struct {
		From   string                     `json:"from"`
		Action map[string]json.RawMessage `json:"action"`
	}
	_ = json.Unmarshal(d.Body, &env) // best effort: whatever decodes helps
	var meta struct {
		ID string `json:"id"`
	}
	if raw, ok := env.Action["__meta__"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	_, isResponse := env.Action[agency.ResponseAction]
	_, isError := env.Action[agency.ErrorAction]
	switch {
	case checkID(env.From) != nil,
		env.From == mem.id, // it would answer itself
		d.AppId != s.token && s.local(env.From),
		isResponse || isError: // answering an answer could loop
		s.log.Warn("amqpspace: dropped a malformed message", "agent", mem.id, "error", cause, "app_id", d.AppId)
		return
	}
	reply := &agency.Message{
		To: env.From, From: mem.id, ID: agency.NewID(), ParentID: meta.ID,
		Action: agency.ErrorAction,
		Args:   &agency.ActionError{Type: agency.TypeInvalidArgs, Text: fmt.Sprintf("%s could not read your message: %v", mem.id, cause)},
	}
	if agency.ValidateID(meta.ID) != nil {
		reply.ParentID = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.PublishTimeout)
	defer cancel()
	if err := s.send(ctx, reply); err != nil {
		s.log.Warn("amqpspace: dropped a malformed message; the error reply failed", "agent", mem.id, "from", env.From, "error", cause, "reply_error", err)
	}
}

// sawFence notes a fence at the end of one of the agent's queues.
func (mem *member) sawFence(token string) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if token == "" || token != mem.fence {
		return
	}
	mem.fences++
	if mem.fences == len(mem.queues()) {
		close(mem.fenced)
	}
}

// leave takes the agent out, once: a concurrent or later call waits for
// the first (or for its own ctx) and returns its result.
func (mem *member) leave(ctx context.Context) error {
	mem.mu.Lock()
	if left := mem.left; left != nil {
		mem.mu.Unlock()
		select {
		case <-left:
			return mem.leaveErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	mem.left = make(chan struct{})
	mem.mu.Unlock()
	mem.leaveErr = mem.removal(ctx)
	close(mem.left)
	return mem.leaveErr
}

// gone reports whether the agent's removal is over.
func (mem *member) gone() bool {
	mem.mu.Lock()
	left := mem.left
	mem.mu.Unlock()
	if left == nil {
		return false
	}
	select {
	case <-left:
		return true
	default:
		return false
	}
}

// removal takes the agent out: BeforeRemove while it is reachable, then no
// new messages (its queues are unbound), then those already queued handed
// over (a fence at the end of each queue tells when), then the drain, then
// the queues deleted.
func (mem *member) removal(ctx context.Context) error {
	mem.conn.BeforeRemove(ctx)
	mem.draining.Store(true)

	mem.subMu.Lock()
	mem.mu.Lock()
	mem.leaving = true
	sub := mem.sub
	mem.mu.Unlock()
	if sub != nil {
		sub.releaseAll(time.Time{})
	}
	sess := mem.s.sess.Load()
	var fenced chan struct{}
	if sub != nil && sess != nil && sub.sess == sess {
		fenced = mem.stopIntake(ctx, sess, sub)
	}
	mem.subMu.Unlock()

	if fenced != nil {
		select {
		case <-fenced:
		case <-sub.stopped: // the session died; what was not handed over is redelivered to no one
		case <-ctx.Done():
		}
	}
	err := mem.conn.Close(ctx)

	// Nothing more can reach the agent: let its consumer go and its queues
	// with it.
	if sub != nil {
		for _, q := range mem.queues() {
			derr := sub.op(func(ch *amqp.Channel) error {
				_, err := ch.QueueDelete(q, false, false, false)
				return err
			})
			if derr != nil {
				mem.s.log.Warn("amqpspace: could not delete a removed agent's queue; the broker expires it", "queue", q, "error", derr)
				break
			}
		}
		sub.close()
		<-sub.stopped
	}
	return err
}

// stopIntake unbinds the agent's queues and puts a fence at the end of
// each; the returned channel closes once both have reached the consumer.
// nil means there is nothing to wait for.
func (mem *member) stopIntake(ctx context.Context, sess *session, sub *subscription) chan struct{} {
	s := mem.s
	q := mem.queues()
	// Answers to the running actions' requests still get in, by the
	// leaving key; new mail, by the id, does not.
	if err := sub.op(func(ch *amqp.Channel) error {
		return ch.QueueBind(q[0], leavingPrefix+mem.id, s.cfg.Exchange, false, nil)
	}); err != nil {
		s.log.Warn("amqpspace: binding a leaving agent's queue for the answers it waits for", "queue", q[0], "error", err)
		return nil
	}
	if err := sub.op(func(ch *amqp.Channel) error { return ch.QueueUnbind(q[0], mem.id, s.cfg.Exchange, nil) }); err != nil {
		s.log.Warn("amqpspace: unbinding a leaving agent's queue", "queue", q[0], "error", err)
		return nil
	}
	if err := sub.op(func(ch *amqp.Channel) error { return ch.QueueUnbind(q[1], broadcastKey, s.cfg.Exchange, nil) }); err != nil {
		s.log.Warn("amqpspace: unbinding a leaving agent's queue", "queue", q[1], "error", err)
		return nil
	}
	token := agency.NewID()
	fenced := make(chan struct{})
	mem.mu.Lock()
	mem.fence, mem.fenced, mem.fences = token, fenced, 0
	mem.mu.Unlock()
	for _, name := range q {
		// Straight to the queue, through the default exchange.
		err := sess.pub.publish(ctx, "", name, true, amqp.Publishing{Type: fenceType, MessageId: token}, time.Time{})
		if err != nil {
			s.log.Warn("amqpspace: could not fence a leaving agent's queue; messages still in it are dropped", "queue", name, "error", err)
			return nil
		}
	}
	return fenced
}

// connectionLost reports whether err says that the connection went away
// under an operation, which the session may not know yet: the broker
// closed it (a forced close, a shutdown) or the client found it closed.
func connectionLost(err error) bool {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		return false
	}
	return ae == amqp.ErrClosed || ae.Code == amqp.ConnectionForced
}
