package amqpspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unsafe"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
)

// publisher publishes on one confirm-mode channel and tells each caller
// what became of its message: confirmed, returned as unroutable, refused,
// or lost with the connection.
//
// One goroutine writes: it takes each publishing's delivery tag before
// sending it, and the tag also travels as the correlation id, which is how
// a basic.return finds its publish. A caller never blocks on the socket
// itself, so a broker that stops reading (a resource alarm, a stalled
// network) cannot hold it past its context; a write stuck for longer than
// the publish timeout fails the session.
//
// One goroutine reads both returns and confirms: the broker sends a
// message's return before its ack, and the client library's reader hands
// them over in that order. Returns come on an unbuffered channel, so the
// reader goes on to the ack only once the listener has the return, and
// records it before it can read anything else; confirms come on a
// buffered one, so that the reader does not wait for the listener at each
// confirmation (the broker confirms many at once, and the library hands
// them over one by one).
type publisher struct {
	ch      *amqp.Channel
	appID   string
	timeout time.Duration
	stalled func(error) // called when a write hangs: fails the session

	requests chan *publishing

	mu      sync.Mutex
	waiting map[uint64]*publishing
	lost    error         // set once the channel is gone; every later publish fails with it
	gone    chan struct{} // closed with lost

	// What the channel had confirmed, by routing key, while it was young
	// (see youngFor); handed to refused with the first refusal of its key.
	// nil when nothing is kept (the channel is old, or refused is nil).
	born    time.Time
	kept    map[string][]amqp.Publishing
	keptLen int
	refused func(key string, confirmed []amqp.Publishing)
}

// A channel that a reconnect opened keeps, for youngFor after it opens
// and up to keepBytes of bodies, the messages the broker confirmed, so that it can send them again
// if the broker then refuses a message to the same queue. RabbitMQ 3.10.8
// was seen to do both to a new channel whose first messages to a quorum
// queue came while that queue elected a leader (a cluster node had died):
// confirm the first without queueing it, and refuse the rest for many
// seconds. A space that has just reconnected has new channels, at the
// moment the queues of the lost node elect their leaders.
const (
	youngFor  = 10 * time.Second
	keepBytes = 16 << 20
)

// publishing is one message on its way, and then waiting for the broker's
// word on it.
type publishing struct {
	exchange, key string
	mandatory     bool
	msg           amqp.Publishing

	returned bool
	result   chan error // buffered: receives exactly one outcome

	// The bytes of msg.CorrelationId and msg.Expiration, numbers in
	// decimal: in the publishing's own allocation rather than one each.
	// Written once, before the message is published.
	corr, ttl [20]byte
}

// decimal writes n in decimal into buf and returns it as a string that
// shares buf's bytes: buf must not change while the string is in use.
func decimal(buf *[20]byte, n uint64) string {
	b := strconv.AppendUint(buf[:0], n, 10)
	return unsafe.String(&buf[0], len(b))
}

// confirmBuffer is how many confirmations the client library can hand
// over before the listener reads them.
const confirmBuffer = 512

func newPublisher(wg *sync.WaitGroup, ch *amqp.Channel, appID string, timeout time.Duration, stalled func(error), refused func(key string, confirmed []amqp.Publishing)) *publisher {
	p := &publisher{
		ch: ch, appID: appID, timeout: timeout, stalled: stalled,
		requests: make(chan *publishing),
		waiting:  make(map[uint64]*publishing),
		gone:     make(chan struct{}),
		born:     time.Now(),
		refused:  refused,
	}
	if refused != nil {
		p.kept = make(map[string][]amqp.Publishing)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, confirmBuffer))
	wg.Add(2)
	go func() { defer wg.Done(); p.listen(returns, confirms) }()
	go func() { defer wg.Done(); p.write() }()
	return p
}

// write sends the publishings one at a time until the channel is gone.
func (p *publisher) write() {
	stall := time.AfterFunc(time.Hour, func() {
		p.stalled(fmt.Errorf("%w: the broker has not taken a message for %v (blocked by a resource alarm, or the network stalls)", ErrDisconnected, p.timeout))
	})
	stall.Stop()
	defer stall.Stop()
	for {
		var w *publishing
		select {
		case w = <-p.requests:
		case <-p.gone:
			return
		}
		tag := p.ch.GetNextPublishSeqNo()
		p.mu.Lock()
		if p.lost != nil {
			p.mu.Unlock()
			w.result <- p.lost
			continue
		}
		p.waiting[tag] = w
		p.mu.Unlock()
		if w.mandatory {
			w.msg.CorrelationId = decimal(&w.corr, tag)
		}
		stall.Reset(p.timeout)
		err := p.ch.Publish(w.exchange, w.key, w.mandatory, false, w.msg)
		stall.Stop()
		if err != nil {
			if p.forget(tag) {
				w.result <- fmt.Errorf("%w: publish: %v", ErrDisconnected, err)
			}
		}
	}
}

// listen resolves publishings as the broker answers, until the channel
// closes; then every publishing still waiting has been lost.
func (p *publisher) listen(returns <-chan amqp.Return, confirms <-chan amqp.Confirmation) {
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			tag, err := strconv.ParseUint(r.CorrelationId, 10, 64)
			if err != nil {
				continue
			}
			p.mu.Lock()
			if w := p.waiting[tag]; w != nil {
				w.returned = true
			}
			p.mu.Unlock()
		case c, ok := <-confirms:
			if !ok {
				p.fail(fmt.Errorf("%w: the channel was closed", ErrDisconnected))
				return
			}
			p.mu.Lock()
			w := p.waiting[c.DeliveryTag]
			delete(p.waiting, c.DeliveryTag)
			var confirmed []amqp.Publishing
			if w != nil && w.mandatory && p.kept != nil {
				confirmed = p.keep(w, c.Ack)
			}
			p.mu.Unlock()
			if w == nil {
				continue
			}
			if len(confirmed) > 0 {
				go p.refused(w.key, confirmed)
			}
			switch {
			case !c.Ack:
				w.result <- ErrRejected
			case w.returned:
				w.result <- agency.ErrNoRecipient
			default:
				w.result <- nil
			}
		}
	}
}

// keep records the broker's answer to w while the channel is young: a
// confirmed message is kept; a refusal returns what was kept for its key,
// whose later messages are not kept. The caller holds mu.
func (p *publisher) keep(w *publishing, ack bool) []amqp.Publishing {
	if time.Since(p.born) > youngFor {
		p.kept, p.keptLen = nil, 0
		return nil
	}
	k, ok := p.kept[w.key]
	switch {
	case !ack:
		p.kept[w.key] = nil // refused from now on: nothing more to keep
		for _, m := range k {
			p.keptLen -= len(m.Body)
		}
		return k
	case w.returned, ok && k == nil, p.keptLen+len(w.msg.Body) > keepBytes:
		return nil
	}
	p.kept[w.key] = append(k, w.msg)
	p.keptLen += len(w.msg.Body)
	return nil
}

// fail ends every waiting publishing, and all later ones, with err: those
// handed to the broker may or may not have been delivered (ErrUnconfirmed),
// later ones are not sent.
func (p *publisher) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return
	}
	p.lost = err
	close(p.gone)
	for tag, w := range p.waiting {
		w.result <- fmt.Errorf("%w: the connection was lost before the broker confirmed it: %w", ErrUnconfirmed, err)
		delete(p.waiting, tag)
	}
}

// forget drops the publishing with tag, reporting whether it was still
// waiting.
func (p *publisher) forget(tag uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.waiting[tag]
	delete(p.waiting, tag)
	return ok
}

// publish sends msg to the exchange (or, with exchange "", straight to the
// queue named key), with deadline, unless it is zero, as its expiration
// (see expiration), and waits until the broker confirms it, returns it
// (agency.ErrNoRecipient; only mandatory messages are returned), refuses
// it (ErrRejected), or the connection goes (ErrUnconfirmed and
// ErrDisconnected) — or until ctx ends or the publish timeout passes,
// whichever comes first (ErrUnconfirmed once the message is on its way, the
// context's error alone before).
func (p *publisher) publish(ctx context.Context, exchange, key string, mandatory bool, msg amqp.Publishing, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("amqpspace: the message was not sent: %w", err)
	}
	// The publish timeout, on a timer of the pool's: a context made for
	// each message would cost a timer and the context.
	timeout := getTimer(p.timeout)
	defer putTimer(timeout)
	msg.AppId = p.appID
	w := &publishing{exchange: exchange, key: key, mandatory: mandatory, msg: msg, result: make(chan error, 1)}
	if !deadline.IsZero() {
		// The broker drops the message once its sender has stopped
		// waiting, wherever it waits; the recipient checks again when it
		// gets to it.
		w.msg.Expiration = decimal(&w.ttl, expiration(time.Until(deadline)))
	}
	select {
	case p.requests <- w:
	case <-p.gone:
		return p.lostErr()
	case <-ctx.Done():
		return fmt.Errorf("amqpspace: the message was not sent: %w", ctx.Err())
	case <-timeout.C:
		return fmt.Errorf("amqpspace: the message was not sent: %w", context.DeadlineExceeded)
	}
	select {
	case err := <-w.result:
		return err
	case <-ctx.Done():
		// The writer or the listener still settles w; no one reads it.
		return fmt.Errorf("%w: %w", ErrUnconfirmed, ctx.Err())
	case <-timeout.C:
		return fmt.Errorf("%w: %w", ErrUnconfirmed, context.DeadlineExceeded)
	}
}

// timers holds stopped timers for publish.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and gives it back to the pool. (Since Go 1.23 a
// stopped timer's channel holds no stale value: Reset starts afresh.)
func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

func (p *publisher) lostErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// publishAlone publishes one mandatory message on a channel of its own,
// opened for it on the session's publishing connection and closed once
// the broker has answered: for a message the session's channel had
// refused (see Space.sendAgain).
func (sess *session) publishAlone(ctx context.Context, exchange, key string, msg amqp.Publishing, deadline time.Time) error {
	ch, err := sess.pubConn.Channel()
	if err == nil {
		if err = ch.Confirm(false); err != nil {
			_ = ch.Close()
		}
	}
	if err != nil {
		if sess.pubConn.IsClosed() {
			return fmt.Errorf("%w: opening a channel: %v", ErrDisconnected, err)
		}
		return fmt.Errorf("%w: opening a channel: %v", ErrRejected, err)
	}
	var wg sync.WaitGroup
	p := newPublisher(&wg, ch, sess.s.token, sess.s.cfg.PublishTimeout, sess.fail, nil)
	err = p.publish(ctx, exchange, key, true, msg, deadline)
	_ = ch.Close() // its notifications close with it: the publisher's goroutines end
	wg.Wait()
	return err
}

// sendConfirmedAgain sends again, each on a channel of its own, the
// messages to key that the session's channel had confirmed while young,
// before the broker refused one to the same queue (see keep): they may
// not have been queued. Each copy is marked as sent again, and the
// recipient's space drops one its agent already has. It tries each until
// the broker takes it, for up to PublishTimeout in all, or until the
// session ends.
func (sess *session) sendConfirmedAgain(key string, msgs []amqp.Publishing) {
	sess.subMu.Lock() // as in watch: no goroutine joins a session that has failed
	if !sess.alive() {
		sess.subMu.Unlock()
		return
	}
	sess.wg.Add(1)
	sess.subMu.Unlock()
	defer sess.wg.Done()
	s := sess.s
	s.log.Warn("amqpspace: the broker refused a message on a new channel; sending again what that channel had sent the same queue, which it may have confirmed without queueing", "key", key, "messages", len(msgs))
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.PublishTimeout)
	defer cancel()
	for _, msg := range msgs {
		msg.Headers = amqp.Table{resentHeader: true}
		wait := resendPoll
		for {
			err := sess.publishAlone(ctx, s.cfg.Exchange, key, msg, time.Time{})
			if err == nil || errors.Is(err, agency.ErrNoRecipient) {
				break
			}
			if !errors.Is(err, ErrRejected) {
				s.log.Warn("amqpspace: could not send a message again", "key", key, "error", err)
				return
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				s.log.Warn("amqpspace: could not send a message again", "key", key, "error", err)
				return
			case <-sess.dead:
				return
			}
			wait = min(2*wait, resendMaxWait)
		}
	}
}

// sideEvery bounds how often a side channel that refuses a message is
// replaced by a new one.
const sideEvery = time.Second

// publisherFor returns the publisher for a message with routing key key:
// the session's, or, for a key it has had a message refused for, a side
// channel's. RabbitMQ 3.10.8 was seen to make a new channel whose first
// message to a quorum queue came while the queue elected a leader refuse
// every later message to that queue, for as long as the channel lived
// (16-20 s, and minutes); the side channel, opened after the refusal, and
// replaced at most every sideEvery while it refuses too, gets round it.
func (sess *session) publisherFor(key string) (*publisher, error) {
	sess.sideMu.Lock()
	defer sess.sideMu.Unlock()
	if !sess.refused[key] {
		return sess.pub, nil
	}
	if sess.side != nil {
		return sess.side, nil
	}
	ch, err := sess.pubConn.Channel()
	if err == nil {
		if err = ch.Confirm(false); err != nil {
			_ = ch.Close()
		}
	}
	if err != nil {
		if sess.pubConn.IsClosed() {
			return nil, fmt.Errorf("%w: opening a channel: %v", ErrDisconnected, err)
		}
		return nil, fmt.Errorf("%w: opening a channel: %v", ErrRejected, err)
	}
	sess.subMu.Lock() // as in watch: no goroutine joins a session that has failed
	defer sess.subMu.Unlock()
	if !sess.alive() {
		_ = ch.Close()
		return nil, fmt.Errorf("%w: %v", ErrDisconnected, sess.err)
	}
	sess.side = newPublisher(&sess.wg, ch, sess.s.token, sess.s.cfg.PublishTimeout, sess.fail, sess.sendConfirmedAgain)
	sess.sideAt = time.Now()
	return sess.side, nil
}

// refusedOn notes that p refused a message with routing key key: later
// ones go on the side channel, and a side channel that refuses is
// replaced (at most every sideEvery), the old one closed once what it
// carries has had time to be confirmed.
func (sess *session) refusedOn(p *publisher, key string) {
	sess.sideMu.Lock()
	defer sess.sideMu.Unlock()
	if sess.refused == nil {
		sess.refused = make(map[string]bool)
	}
	sess.refused[key] = true
	if p == sess.side && time.Since(sess.sideAt) >= sideEvery {
		sess.side = nil
		time.AfterFunc(sess.s.cfg.PublishTimeout, func() { _ = p.ch.Close() })
	}
}
