package amqpspace

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// session is one generation of the space's link to the broker: a
// connection that publishes and one that consumes (RabbitMQ blocks a
// connection that publishes too fast; acknowledgements then still flow on
// the other), and the publishing channel. When any of them fails the
// session is dead as a whole and the supervisor builds a new one.
type session struct {
	pubConn, subConn *amqp.Connection
	pub              *publisher

	dead     chan struct{} // closed once the session has failed or was closed
	deadOnce sync.Once
	err      error // why; set before dead closes

	wg sync.WaitGroup // the session's own goroutines: publisher and watcher
}

// dialTimeout bounds one attempt to open a TCP connection to the broker.
const dialTimeout = 5 * time.Second

// dial opens a session and declares the exchange.
func (s *Space) dial() (*session, error) {
	conf := amqp.Config{
		Heartbeat:       s.cfg.Heartbeat,
		TLSClientConfig: s.cfg.TLS,
		Locale:          "en_US",
		Dial:            amqp.DefaultDial(dialTimeout),
	}
	open := func(role string) (*amqp.Connection, error) {
		// The name shows in the broker's management tools: which exchange,
		// which role, which process.
		conf.Properties = amqp.Table{"connection_name": fmt.Sprintf("agency-go amqpspace exchange=%s %s %s", s.cfg.Exchange, role, s.token[:8])}
		c, err := amqp.DialConfig(s.cfg.URL, conf)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrDisconnected, redact(s.cfg.URL), err)
		}
		return c, nil
	}
	pubConn, err := open("publish")
	if err != nil {
		return nil, err
	}
	subConn, err := open("consume")
	if err != nil {
		_ = pubConn.Close()
		return nil, err
	}
	sess := &session{pubConn: pubConn, subConn: subConn, dead: make(chan struct{})}
	ch, err := pubConn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(s.cfg.Exchange, "topic", true, false, false, false, nil)
		if err != nil {
			err = fmt.Errorf("amqpspace: declaring exchange %q: %w", s.cfg.Exchange, err)
		}
	}
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		sess.close()
		return nil, err
	}
	sess.pub = newPublisher(&sess.wg, ch, s.token, s.cfg.PublishTimeout, sess.fail)

	pubClosed := pubConn.NotifyClose(make(chan *amqp.Error, 1))
	subClosed := subConn.NotifyClose(make(chan *amqp.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	sess.wg.Add(1)
	go func() {
		defer sess.wg.Done()
		var e *amqp.Error
		select {
		case e = <-pubClosed:
		case e = <-subClosed:
		case e = <-chClosed:
		case <-sess.dead:
			return
		}
		if e == nil {
			sess.fail(fmt.Errorf("%w: connection closed", ErrDisconnected))
			return
		}
		sess.fail(fmt.Errorf("%w: %v", ErrDisconnected, e))
	}()
	return sess, nil
}

// closeTimeout bounds closing a connection: a broker that has stopped
// reading (a resource alarm) would otherwise hold the close, and a write
// stuck in the publisher with it, for as long as the alarm lasts.
const closeTimeout = 2 * time.Second

// fail marks the session dead and closes its connections; the consumers'
// delivery channels close with them.
func (sess *session) fail(err error) {
	sess.deadOnce.Do(func() {
		sess.err = err
		close(sess.dead)
		if sess.pub != nil {
			sess.pub.fail(err)
		}
		// The consuming connection first: it is the one that frees the
		// agents' consumers, and the publishing one may be stuck.
		_ = sess.subConn.CloseDeadline(time.Now().Add(closeTimeout))
		_ = sess.pubConn.CloseDeadline(time.Now().Add(closeTimeout))
	})
}

// close ends a session on purpose.
func (sess *session) close() { sess.fail(ErrClosed) }

// alive reports whether the session has not failed.
func (sess *session) alive() bool {
	select {
	case <-sess.dead:
		return false
	default:
		return true
	}
}

// Reconnection backoff: the first retry comes soon, later ones double up to
// a ceiling that still brings a space back within seconds of the broker.
const (
	backoffFirst = 100 * time.Millisecond
	backoffMax   = 3 * time.Second
)

// supervise rebuilds the session each time it dies, until the space
// closes.
func (s *Space) supervise(sess *session) {
	defer s.wg.Done()
	for {
		select {
		case <-sess.dead:
		case <-s.closing:
			return
		}
		s.sess.CompareAndSwap(sess, nil)
		s.log.Warn("amqpspace: lost the broker; reconnecting", "error", sess.err)
		sess.wg.Wait() // its publisher is done before the next one starts
		lostAt := time.Now()
		delay := backoffFirst
		for attempt := 1; ; attempt++ {
			jitter := time.Duration(rand.Int64N(int64(delay) / 4))
			select {
			case <-time.After(delay + jitter):
			case <-s.closing:
				return
			}
			next, err := s.reconnect()
			if err == nil {
				sess = next
				s.log.Info("amqpspace: reconnected", "attempt", attempt, "outage", time.Since(lostAt).Round(time.Millisecond))
				break
			}
			s.log.Warn("amqpspace: reconnect failed", "attempt", attempt, "error", err)
			delay = min(2*delay, backoffMax)
		}
	}
}

// reconnect dials a new session and re-subscribes every agent. Add and
// Remove wait while it runs; sending works as soon as the connections are
// up (until then Send and Request fail at once).
func (s *Space) reconnect() (*session, error) {
	sess, err := s.dial()
	if err != nil {
		return nil, err
	}
	s.topology.Lock()
	defer s.topology.Unlock()
	select {
	case <-s.closing:
		sess.close()
		return nil, ErrClosed
	default:
	}
	// Publishing needs no consumers: the agents that are subscribed first
	// can answer what waited for them while the others are.
	s.sess.Store(sess)
	for _, mem := range s.members() {
		if err := mem.resubscribe(sess); err != nil {
			if !sess.alive() {
				s.sess.CompareAndSwap(sess, nil)
				return nil, err
			}
			// The id is taken elsewhere now (another process added it
			// while this one was away) or its queues cannot be declared:
			// the agent cannot be reached, so it leaves.
			s.log.Error("amqpspace: agent cannot rejoin after reconnecting; removing it", "agent", mem.id, "error", err)
			s.wg.Add(1)
			go s.evict(mem)
		}
	}
	return sess, nil
}
