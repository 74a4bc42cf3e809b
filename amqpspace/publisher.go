package amqpspace

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
)

// publisher publishes on one confirm-mode channel and tells each caller
// what became of its message: confirmed, returned as unroutable, refused,
// or lost with the connection.
//
// Publishes are serialised so that each knows its delivery tag before it is
// sent; the tag also travels as the correlation id, which is how a
// basic.return finds its publish. One goroutine reads both returns and
// confirms from unbuffered channels: the broker sends a message's return
// before its ack, the client library hands them over one at a time in that
// order, so the return is always recorded before the ack is seen.
type publisher struct {
	ch      *amqp.Channel
	appID   string
	timeout time.Duration

	sendMu sync.Mutex // held from taking a tag until the frame is written

	mu      sync.Mutex
	waiting map[uint64]*publishing
	lost    error // set once the channel is gone; every later publish fails with it
	done    chan struct{}
}

// publishing is one message waiting for the broker's word on it.
type publishing struct {
	returned bool
	result   chan error // buffered: receives exactly one outcome
}

func newPublisher(ch *amqp.Channel, appID string, timeout time.Duration) *publisher {
	p := &publisher{
		ch: ch, appID: appID, timeout: timeout,
		waiting: make(map[uint64]*publishing),
		done:    make(chan struct{}),
	}
	returns := ch.NotifyReturn(make(chan amqp.Return))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation))
	go p.listen(returns, confirms)
	return p
}

// listen resolves publishings as the broker answers, until the channel
// closes; then every publishing still waiting has been lost.
func (p *publisher) listen(returns <-chan amqp.Return, confirms <-chan amqp.Confirmation) {
	defer close(p.done)
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
				p.fail(fmt.Errorf("%w: the connection was lost before the broker confirmed the message; it may or may not have been delivered", ErrDisconnected))
				return
			}
			p.mu.Lock()
			w := p.waiting[c.DeliveryTag]
			delete(p.waiting, c.DeliveryTag)
			p.mu.Unlock()
			if w == nil {
				continue // its caller gave up waiting
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

// fail ends every waiting publishing, and all later ones, with err.
func (p *publisher) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost == nil {
		p.lost = err
	}
	for tag, w := range p.waiting {
		w.result <- err
		delete(p.waiting, tag)
	}
}

// publish sends body to the exchange (or, with exchange "", straight to
// the queue named key) and waits until the broker confirms it, returns it
// (agency.ErrNoRecipient; only mandatory messages are returned), refuses
// it, or the connection goes.
func (p *publisher) publish(ctx context.Context, exchange, key string, mandatory bool, msg amqp.Publishing) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout) // the earlier deadline wins
	defer cancel()
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &publishing{result: make(chan error, 1)}
	msg.AppId = p.appID

	p.sendMu.Lock()
	tag := p.ch.GetNextPublishSeqNo()
	p.mu.Lock()
	if p.lost != nil {
		p.mu.Unlock()
		p.sendMu.Unlock()
		return p.lost
	}
	p.waiting[tag] = w
	p.mu.Unlock()
	if mandatory {
		msg.CorrelationId = strconv.FormatUint(tag, 10)
	}
	err := p.ch.Publish(exchange, key, mandatory, false, msg)
	p.sendMu.Unlock()
	if err != nil {
		p.forget(tag)
		return fmt.Errorf("%w: publish: %v", ErrDisconnected, err)
	}

	select {
	case err := <-w.result:
		return err
	case <-ctx.Done():
		p.forget(tag)
		return fmt.Errorf("amqpspace: the broker has not confirmed the message: %w", ctx.Err())
	}
}

func (p *publisher) forget(tag uint64) {
	p.mu.Lock()
	delete(p.waiting, tag)
	p.mu.Unlock()
}
