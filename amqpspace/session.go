package amqpspace

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/space"
)

// session is one generation of the space's link to the broker: a
// connection that publishes, with its publishing channel, and connections
// that consume, each carrying the consumers of up to agentsPerConn agents
// (RabbitMQ blocks a connection that publishes too fast; acknowledgements
// then still flow on the others). When any of them fails the session is
// dead as a whole and the supervisor builds a new one.
type session struct {
	s       *Space
	node    node // the broker's address: every connection of a session goes to one node
	pubConn *amqp.Connection
	pub     *publisher

	// The routing keys the publishing channel has had a message refused
	// for, whose messages go on a side channel from then on (see
	// publisherFor).
	sideMu  sync.Mutex
	refused map[string]bool
	side    *publisher // nil until needed, or after it refused a message
	sideAt  time.Time  // when side was opened

	subMu sync.Mutex
	subs  []*consumerConn

	dead     chan struct{} // closed once the session has failed or was closed
	deadOnce sync.Once
	err      error // why; set before dead closes

	wg sync.WaitGroup // the session's own goroutines: publisher and watchers
}

// consumerConn is a consuming connection and the gate in front of it.
type consumerConn struct {
	conn   *amqp.Connection
	gate   *gate
	agents int             // places handed out; under session.subMu
	chans  []*consumerChan // its consuming channels; under session.subMu

	// Channels for declaring, binding and deleting queues, opened as
	// needed: nil until then, or once closed.
	ops chan *amqp.Channel
}

// opsPerConn bounds the channels for queue operations on a consuming
// connection: the operations of many Adds, or of a Close, wait for one
// rather than have the broker open a channel for each.
const opsPerConn = 16

func newConsumerConn(conn *amqp.Connection, g *gate) *consumerConn {
	cc := &consumerConn{conn: conn, gate: g, ops: make(chan *amqp.Channel, opsPerConn)}
	for range opsPerConn {
		cc.ops <- nil
	}
	return cc
}

// consumerChan is a channel on which up to agentsPerChannel agents
// consume. Only consuming, cancelling and acknowledging happen on it: a
// failed call to the broker closes its channel, and every other operation
// (declaring, binding, deleting a queue) goes on a channel of its own (see
// op). An agent is refused before it consumes when its queue has a
// consumer already, so that the refusal of an exclusive consumer does not
// close the channel for the others.
type consumerChan struct {
	cc     *consumerConn
	ready  chan struct{} // closed once the channel is open, or failed to open
	ch     *amqp.Channel // set before ready closes
	acks   *chanAcks     // its acknowledgements (acks.go); set before ready closes
	err    error         // why it did not open; set before ready closes
	agents int           // under session.subMu

	// One call at a time: the client library hands a channel's replies to
	// its calls in turn, and calls from several goroutines could swap them.
	mu sync.Mutex
}

// broken reports whether the channel failed to open or has closed. The
// caller holds session.subMu.
func (cch *consumerChan) broken() bool {
	select {
	case <-cch.ready:
		return cch.err != nil || cch.ch.IsClosed()
	default:
		return false // still opening
	}
}

// consume starts an exclusive consumer of queue, tagged with its name.
func (cch *consumerChan) consume(queue string) (<-chan amqp.Delivery, error) {
	cch.mu.Lock()
	defer cch.mu.Unlock()
	return cch.ch.Consume(queue, queue, false, true, false, false, nil)
}

// cancel ends the consumers of queues: the broker sends them nothing more,
// and their delivery channels close once what came before is read.
func (cch *consumerChan) cancel(queues ...string) {
	cch.mu.Lock()
	defer cch.mu.Unlock()
	for _, q := range queues {
		if cch.ch.Cancel(q, false) != nil {
			return // closed: the consumers went with it
		}
	}
}

// agentsPerConn is how many agents share a consuming connection, and
// agentsPerChannel how many consume on one of its channels. The broker
// runs a process, and helpers, for every channel; when connections are
// lost it ends them, and with a channel for each of 10,000 agents it kept
// every client waiting meanwhile, this process's Adds and any other
// process's calls: 18-25 s for a bare client's Add-like calls on a loaded
// machine, against 2-4 s with 100 agents to a channel (see
// BenchmarkAMQPRecovery and docs/performance.md). Spreading agents over
// several connections spreads the work of reading them.
const (
	agentsPerConn    = 1000
	agentsPerChannel = 100
)

// dialTimeout bounds one attempt to open a TCP connection to the broker,
// and each handshake (TLS, AMQP) that follows.
const dialTimeout = 5 * time.Second

// frameSize is the AMQP frame size the space asks for: RabbitMQ's default.
const frameSize = 128 << 10

// dial opens a session, with one consuming connection, and declares the
// exchange. A session that a reconnect dials (again) keeps, while young,
// what its channel had confirmed (see youngFor); the first does not.
func (s *Space) dial(n node, again bool) (*session, error) {
	pubConn, _, err := s.open(n, "publish", false)
	if err != nil {
		return nil, err
	}
	sess := &session{s: s, node: n, pubConn: pubConn, dead: make(chan struct{})}
	sess.subMu.Lock()
	sess.watch(pubConn)
	_, err = sess.addConsumer()
	sess.subMu.Unlock()
	if err != nil {
		sess.close()
		sess.wg.Wait()
		return nil, err
	}
	ch, err := pubConn.Channel()
	switch {
	case err != nil:
	case s.cfg.ExchangeMustExist:
		err = ch.ExchangeDeclarePassive(s.cfg.Exchange, "topic", true, false, false, false, nil)
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			err = fmt.Errorf("%w: %q (Config.ExchangeMustExist is set; is the name right?)", ErrNoExchange, s.cfg.Exchange)
		} else if err != nil {
			err = fmt.Errorf("amqpspace: checking exchange %q: %w", s.cfg.Exchange, err)
		}
	default:
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
		sess.wg.Wait()
		return nil, err
	}
	var refused func(key string, confirmed []amqp.Publishing) // nil: the channel keeps nothing
	if again || testHookKeepFirst.Load() {
		refused = sess.sendConfirmedAgain
	}
	pub := newPublisher(&sess.wg, ch, s.token, s.cfg.PublishTimeout, sess.fail, refused)
	sess.subMu.Lock() // fail reads it under the lock
	sess.pub = pub
	sess.subMu.Unlock()
	if !sess.alive() {
		pub.fail(sess.err)
		sess.wg.Wait()
		return nil, sess.err
	}
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	sess.wg.Add(1)
	go func() {
		defer sess.wg.Done()
		select {
		case e := <-chClosed:
			sess.fail(closeError(e))
		case <-sess.dead:
		}
	}()
	return sess, nil
}

// open opens a connection to the broker, with a gate in front of it when
// it is to consume. The space does the TLS handshake itself, so that the
// gate reads AMQP frames, not ciphertext.
func (s *Space) open(n node, role string, gated bool) (*amqp.Connection, *gate, error) {
	uri := n.uri
	fail := func(err error) (*amqp.Connection, *gate, error) {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrDisconnected, redact(n.url), err)
	}
	raw, err := net.DialTimeout("tcp", net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)), dialTimeout)
	if err != nil {
		return fail(err)
	}
	// Heartbeats start after the handshakes: until then a dead broker is
	// noticed by this deadline, which the client library clears once open.
	_ = raw.SetDeadline(time.Now().Add(dialTimeout))
	conn := raw
	if uri.Scheme == "amqps" {
		conf, err := s.tlsConfig(uri)
		if err != nil {
			raw.Close()
			return nil, nil, err
		}
		tc := tls.Client(raw, conf)
		if err := tc.Handshake(); err != nil {
			raw.Close()
			return fail(err)
		}
		conn = tc
	}
	var g *gate
	if gated {
		g = newGate(conn, s.budget, s.cfg.MaxMessageSize)
		conn = g
	}
	sasl, err := saslFor(uri)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%w: URL %q: %v", ErrInvalidConfig, redact(n.url), err)
	}
	c, err := amqp.Open(conn, amqp.Config{
		SASL:       sasl,
		Vhost:      uri.Vhost,
		ChannelMax: uri.ChannelMax,
		FrameSize:  frameSize,
		Heartbeat:  s.cfg.Heartbeat,
		Locale:     "en_US",
		// The name shows in the broker's management tools: which exchange,
		// which role, which process.
		Properties: amqp.Table{"connection_name": fmt.Sprintf("agency-go amqpspace exchange=%s %s %s", s.cfg.Exchange, role, s.token[:8])},
	})
	if err != nil {
		conn.Close()
		return fail(err)
	}
	return c, g, nil
}

// tlsConfig is Config.TLS, or what the URL says (its cacertfile, certfile,
// keyfile and server_name_indication parameters) with the system's roots,
// and the URL's host as the server name unless one is given.
func (s *Space) tlsConfig(uri amqp.URI) (*tls.Config, error) {
	var conf *tls.Config
	if s.cfg.TLS != nil {
		conf = s.cfg.TLS.Clone()
	} else {
		conf = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: uri.ServerName}
		if uri.CACertFile != "" {
			pem, err := os.ReadFile(uri.CACertFile)
			if err != nil {
				return nil, fmt.Errorf("%w: reading the CA certificate: %v", ErrInvalidConfig, err)
			}
			conf.RootCAs = x509.NewCertPool()
			conf.RootCAs.AppendCertsFromPEM(pem)
		}
		if uri.CertFile != "" && uri.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(uri.CertFile, uri.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("%w: loading the client certificate: %v", ErrInvalidConfig, err)
			}
			conf.Certificates = []tls.Certificate{cert}
		}
	}
	if conf.ServerName == "" {
		conf.ServerName = uri.Host
	}
	return conf, nil
}

// saslFor returns the authentication mechanisms the URL asks for, PLAIN
// with its user and password by default.
func saslFor(uri amqp.URI) ([]amqp.Authentication, error) {
	if len(uri.AuthMechanism) == 0 {
		return []amqp.Authentication{uri.PlainAuth()}, nil
	}
	var out []amqp.Authentication
	for _, m := range uri.AuthMechanism {
		switch strings.ToUpper(m) {
		case "PLAIN":
			out = append(out, uri.PlainAuth())
		case "AMQPLAIN":
			out = append(out, uri.AMQPlainAuth())
		case "EXTERNAL":
			out = append(out, &amqp.ExternalAuth{})
		default:
			return nil, fmt.Errorf("unsupported auth_mechanism %q", m)
		}
	}
	return out, nil
}

// watch fails the session when conn closes. The caller holds subMu, which
// fail takes to mark the session dead: a watcher is never added once the
// supervisor may be waiting for the session's goroutines.
func (sess *session) watch(conn *amqp.Connection) {
	if !sess.alive() {
		return // fail has run, and closes no connection it did not list
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	sess.wg.Add(1)
	go func() {
		defer sess.wg.Done()
		select {
		case e := <-closed:
			sess.fail(closeError(e))
		case <-sess.dead:
		}
	}()
}

func closeError(e *amqp.Error) error {
	if e == nil {
		return fmt.Errorf("%w: connection closed", ErrDisconnected)
	}
	return fmt.Errorf("%w: %v", ErrDisconnected, e)
}

// addConsumer opens one more consuming connection. The caller holds subMu,
// or is dial.
func (sess *session) addConsumer() (*consumerConn, error) {
	conn, g, err := sess.s.open(sess.node, "consume", true)
	if err != nil {
		return nil, err
	}
	if !sess.alive() {
		// fail has closed the connections on the list: not this one.
		_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
		return nil, fmt.Errorf("%w: %v", ErrDisconnected, sess.err)
	}
	cc := newConsumerConn(conn, g)
	sess.subs = append(sess.subs, cc)
	sess.watch(conn)
	return cc, nil
}

// reserve opens, all at once, the consuming connections that n agents
// need, so that they are subscribed again without waiting for each other's
// connections to open.
func (sess *session) reserve(n int) error {
	sess.subMu.Lock()
	need := (n+agentsPerConn-1)/agentsPerConn - len(sess.subs)
	sess.subMu.Unlock()
	if need <= 0 {
		return nil
	}
	type opened struct {
		conn *amqp.Connection
		g    *gate
		err  error
	}
	res := make(chan opened, need)
	for range need {
		go func() {
			c, g, err := sess.s.open(sess.node, "consume", true)
			res <- opened{c, g, err}
		}()
	}
	var first error
	for range need {
		o := <-res
		if o.err != nil {
			first = cmp.Or(first, o.err)
			continue
		}
		// Not while dialing: an Add meanwhile takes a channel on a
		// connection already open.
		sess.subMu.Lock()
		if sess.alive() {
			sess.subs = append(sess.subs, newConsumerConn(o.conn, o.g))
			sess.watch(o.conn)
		} else {
			_ = o.conn.CloseDeadline(time.Now().Add(closeTimeout)) // fail did not list it
		}
		sess.subMu.Unlock()
	}
	if first == nil && !sess.alive() {
		first = fmt.Errorf("%w: %v", ErrDisconnected, sess.err)
	}
	return first
}

// channel finds a place for one agent's consumers: on a consuming
// channel with room, on a consuming connection with room (a new channel
// or connection when all are full).
func (sess *session) channel() (*consumerChan, error) {
	sess.subMu.Lock()
	var cc *consumerConn
	for _, c := range sess.subs {
		if c.agents < agentsPerConn {
			cc = c
			break
		}
	}
	if cc == nil {
		if !sess.alive() {
			sess.subMu.Unlock()
			return nil, fmt.Errorf("%w: %v", ErrDisconnected, sess.err)
		}
		var err error
		if cc, err = sess.addConsumer(); err != nil {
			sess.subMu.Unlock()
			return nil, err
		}
	}
	var cch *consumerChan
	for _, c := range cc.chans {
		if c.agents < agentsPerChannel && !c.broken() {
			cch = c
			break
		}
	}
	opening := cch == nil
	if opening {
		cch = &consumerChan{cc: cc, ready: make(chan struct{})}
		cc.chans = append(cc.chans, cch)
	}
	cc.agents++
	cch.agents++
	sess.subMu.Unlock()
	if opening {
		cch.ch, cch.err = cc.conn.Channel()
		if cch.err == nil {
			// Per consumer, for each one started on the channel.
			if cch.err = cch.ch.Qos(sess.s.cfg.Prefetch, 0, false); cch.err != nil {
				_ = cch.ch.Close()
			}
			cch.acks = newChanAcks(cch.ch, max(sess.s.cfg.Prefetch/4, 1))
		}
		close(cch.ready)
	}
	<-cch.ready
	if err := cch.err; err != nil {
		sess.unchannel(cch)
		if !sess.alive() || cc.conn.IsClosed() {
			return nil, fmt.Errorf("%w: opening a channel: %v", ErrDisconnected, err)
		}
		return nil, fmt.Errorf("amqpspace: opening a channel: %w", err)
	}
	return cch, nil
}

// unchannel gives back an agent's place on cch. A broken channel goes once
// no agent holds a place on it.
func (sess *session) unchannel(cch *consumerChan) {
	sess.subMu.Lock()
	defer sess.subMu.Unlock()
	cc := cch.cc
	cc.agents--
	if cch.agents--; cch.agents == 0 && cch.broken() {
		cc.chans = slices.DeleteFunc(cc.chans, func(c *consumerChan) bool { return c == cch })
	}
}

// op runs f, one or more queue operations, on a channel of cc kept for
// them: an operation the broker refuses closes that channel, not one that
// agents consume on. Channels are reused while they stay open.
func (cc *consumerConn) op(f func(ch *amqp.Channel) error) error {
	ch := <-cc.ops
	defer func() { cc.ops <- ch }()
	if ch == nil || ch.IsClosed() {
		var err error
		if ch, err = cc.conn.Channel(); err != nil {
			ch = nil
			return err
		}
	}
	return f(ch) // a refused operation closes ch: the next one opens another
}

// closeTimeout bounds closing a connection: a broker that has stopped
// reading (a resource alarm) would otherwise hold the close, and a write
// stuck in the publisher with it, for as long as the alarm lasts.
const closeTimeout = 2 * time.Second

// fail marks the session dead and closes its connections; the consumers'
// delivery channels close with them.
func (sess *session) fail(err error) {
	sess.deadOnce.Do(func() {
		// Under subMu: a connection on the list is closed below, one added
		// later sees the session dead (see watch and addConsumer).
		sess.subMu.Lock()
		sess.err = err
		close(sess.dead)
		subs := slices.Clone(sess.subs)
		pub := sess.pub
		sess.subMu.Unlock()
		if pub != nil {
			pub.fail(err)
		}
		// The consuming connections first: they are the ones that free the
		// agents' consumers, and the publishing one may be stuck.
		var wg sync.WaitGroup
		for _, cc := range subs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cc.gate.stop() // its count goes, and a paused reader reads the close
				_ = cc.conn.CloseDeadline(time.Now().Add(closeTimeout))
			}()
		}
		wg.Wait()
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

// resubscribers is how many agents are subscribed again at once after a
// reconnect: each takes a few round trips to the broker, which serves
// channels in parallel.
const resubscribers = 8

// supervise rebuilds the session each time it dies, until the space
// closes.
func (s *Space) supervise(sess *session) {
	defer s.wg.Done()
	delay := backoffFirst
	for {
		select {
		case <-sess.dead:
		case <-s.closing:
			return
		}
		s.sess.CompareAndSwap(sess, nil)
		s.nodes.lost()
		s.log.Warn("amqpspace: lost the broker; reconnecting", "node", redact(sess.node.url), "error", sess.err)
		s.failRequests(sess.err)
		sess.wg.Wait() // its publisher is done before the next one starts
		lostAt := time.Now()
		for attempt := 1; ; attempt++ {
			jitter := time.Duration(rand.Int64N(int64(delay) / 4))
			select {
			case <-time.After(delay + jitter):
			case <-s.closing:
				return
			}
			n := s.nodes.next()
			next, err := s.reconnect(n)
			if err == nil {
				sess = next
				s.reconnects.Add(1)
				s.log.Info("amqpspace: reconnected", "node", redact(n.url), "attempt", attempt, "outage", time.Since(lostAt).Round(time.Millisecond))
				delay = backoffFirst
				break
			}
			s.log.Warn("amqpspace: reconnect failed", "node", redact(n.url), "attempt", attempt, "error", err)
			// Another node of a cluster is tried as soon: the wait grows
			// once a round of them has failed.
			if attempt%s.nodes.size() == 0 {
				delay = min(2*delay, backoffMax)
			}
		}
	}
}

// failRequests ends the Requests of every agent that wait for a response:
// the responses come through the consuming connections, which are gone
// with the session, and may never come (the caller decides whether to ask
// again).
func (s *Space) failRequests(cause error) {
	err := fmt.Errorf("%w: the connection to the broker was lost while the request waited for its response (%v); the request may or may not have been handled", ErrDisconnected, cause)
	for _, mem := range s.members() {
		mem.conn.FailRequests(err)
	}
}

// reconnect dials a new session and subscribes every agent again. Sending
// works as soon as the connections are up (until then Send and Request
// fail at once), and Add and Remove do not wait for the others either:
// each agent is subscribed again under a lock of its own.
func (s *Space) reconnect(n node) (*session, error) {
	sess, err := s.dial(n, true)
	if err != nil {
		return nil, err
	}
	s.sessMu.Lock()
	select {
	case <-s.closing:
		s.sessMu.Unlock()
		sess.close()
		sess.wg.Wait()
		return nil, ErrClosed
	default:
	}
	// Publishing needs no consumers: the agents that are subscribed first
	// can answer what waited for them while the others are.
	s.sess.Store(sess)
	s.sessMu.Unlock()
	if h := testHookResubscribe.Load(); h != nil {
		(*h)()
	}

	// Every agent reserved so far: one whose Add runs now either finishes
	// on the old session (and is subscribed again here, once its Add lets
	// go of it) or fails; one reserved after this list was taken sees the
	// new session.
	mems := s.reserved()
	if err := sess.reserve(len(mems)); err != nil {
		s.sess.CompareAndSwap(sess, nil)
		sess.close()
		s.failRequests(err)
		sess.wg.Wait()
		return nil, err
	}
	// An exclusive consumer of the old connection holds its queue until
	// the broker has noticed that connection's end, which after a mass
	// disconnect may take it a few seconds: an agent refused as live
	// elsewhere is tried again, after the others, before it is given up.
	for round := 0; len(mems) > 0; round++ {
		if round > 0 {
			select {
			case <-time.After(time.Second):
			case <-s.closing:
			}
		}
		mems = s.resubscribeAll(sess, mems, round == resubscribeRounds-1)
	}
	if !sess.alive() {
		s.sess.CompareAndSwap(sess, nil)
		s.failRequests(sess.err)
		sess.wg.Wait()
		return nil, sess.err
	}
	return sess, nil
}

// testHookResubscribe, when set, runs after a reconnect has stored its
// session and before it subscribes the agents again (export_test.go).
var testHookResubscribe atomic.Pointer[func()]

// testHookKeepFirst, when set, makes a space's first session keep what its
// channel confirmed while young, as a reconnect's does (export_test.go).
var testHookKeepFirst atomic.Bool

// resubscribeRounds is how often an agent refused as live elsewhere is
// tried after a reconnect.
const resubscribeRounds = 4

// resubscribeAll subscribes mems again on sess, resubscribers at a time,
// and returns those refused as live elsewhere; in the last round, they are
// removed instead. An agent that cannot rejoin for another reason is
// removed at once.
func (s *Space) resubscribeAll(sess *session, mems []*member, last bool) (refused []*member) {
	var mu sync.Mutex
	work := make(chan *member)
	var wg sync.WaitGroup
	for range min(resubscribers, len(mems)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for mem := range work {
				if !sess.alive() || s.isClosing() {
					continue
				}
				err := mem.resubscribe(sess)
				if err == nil || !sess.alive() {
					continue
				}
				if errors.Is(err, space.ErrAgentExists) && !last {
					mu.Lock()
					refused = append(refused, mem)
					mu.Unlock()
					continue
				}
				// The id is taken elsewhere now (another process added it
				// while this one was away) or its queues cannot be
				// declared: the agent cannot be reached, so it leaves.
				s.log.Error("amqpspace: agent cannot rejoin after reconnecting; removing it", "agent", mem.id, "error", err)
				s.wg.Add(1)
				go s.evict(mem)
			}
		}()
	}
	for _, mem := range mems {
		work <- mem
	}
	close(work)
	wg.Wait()
	return refused
}

func (s *Space) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}
