package amqpspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
	"github.com/seed72275b23/agency-go/space"
)

// Errors of an AMQP space, besides those of package space and agency.
var (
	// ErrDisconnected is returned while the space has no connection to the
	// broker (it reconnects by itself), by a Request that was waiting for
	// its response when the connection was lost, and (with ErrUnconfirmed)
	// for a message whose connection went before the broker confirmed it.
	ErrDisconnected = errors.New("amqpspace: not connected to the broker")
	// ErrRejected is returned when the broker refused a message (a
	// negative confirmation, for example when a queue is over its limits,
	// or a quorum queue elects a leader): it was not queued.
	ErrRejected = errors.New("amqpspace: the broker refused the message")
	// ErrUnconfirmed is returned for a message that was handed to the
	// broker but whose confirmation did not come: the sender's context
	// ended first, or the connection was lost (the error then matches
	// ErrDisconnected too). The message may or may not have been
	// delivered; every other error of Send means it was not sent. A
	// Request waiting for its answer also ends with it when the broker
	// refuses a later message to the same agent (see docs/amqp.md).
	ErrUnconfirmed = errors.New("amqpspace: the broker has not confirmed the message; it may or may not have been delivered")
	// ErrMessageTooLarge is returned for a message whose encoding exceeds
	// Config.MaxMessageSize. It is agency.ErrMessageTooLarge, which every
	// space returns for such a message: an agent whose response is too
	// large answers its caller with agency.ErrResponseTooLarge instead.
	ErrMessageTooLarge = agency.ErrMessageTooLarge
	// ErrNoExchange is returned by New when Config.ExchangeMustExist is set
	// and the broker has no exchange of that name.
	ErrNoExchange = errors.New("amqpspace: no such exchange on the broker")
	// ErrClosed is space.ErrClosed: the space has been closed.
	ErrClosed = space.ErrClosed
)

// broadcastKey is the routing key of broadcasts; every agent's broadcast
// queue is bound with it.
const broadcastKey = "__broadcast__"

// broadcastSuffix names an agent's broadcast queue: id + broadcastSuffix.
const broadcastSuffix = "-broadcast"

// leavingPrefix makes the routing key that still reaches an agent's queue
// while it leaves: leavingPrefix + id, for the answers its running actions
// wait for. No id starts with "__", so no agent is bound with it.
const leavingPrefix = "__leaving."

// maxIDLength is the longest id whose broadcast queue name still fits the
// broker's 255-byte limit.
const maxIDLength = 255 - len(broadcastSuffix)

// Space is a space.Space whose agents may live in many processes, on many
// hosts, that share a RabbitMQ exchange. Create one with New or
// NewFromEnv; it is safe for concurrent use.
type Space struct {
	cfg   settings
	log   *slog.Logger
	token string // AppId of every message this process publishes

	sess   atomic.Pointer[session] // nil while disconnected
	sessMu sync.Mutex              // orders storing a new session with Close

	budget *budget // what the agents hold of their input; see gate.go
	nodes  *rotation

	reconnects atomic.Int64 // see Reconnects

	mu      sync.Mutex
	agents  map[string]*member
	closed  bool
	closing chan struct{} // closed by Close, once every agent is out

	wg sync.WaitGroup // the supervisor and the consumers

	py *pyState // nil unless Config.Interop is set (interop.go)

	watchers watchers // streams' callers watching their responders (stream.go)
}

var _ space.Space = (*Space)(nil)

// New connects to the broker that cfg names, declares the exchange, and
// returns an empty space. Configuration that cannot work, and a broker that
// cannot be reached or refuses the exchange, are errors; once New has
// succeeded, a lost connection is re-established by the space itself.
func New(ctx context.Context, cfg Config) (*Space, error) {
	set, err := cfg.check()
	if err != nil {
		return nil, err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	s := &Space{
		cfg:     set,
		log:     set.Logger,
		token:   hex.EncodeToString(b[:]),
		agents:  make(map[string]*member),
		closing: make(chan struct{}),
		budget:  newBudget(set.MaxPendingBytes, set.Logger),
		py:      newPyState(set.Interop),
		nodes:   newRotation(set.nodes),
	}
	type dialed struct {
		sess *session
		err  error
	}
	res := make(chan dialed, 1)
	go func() {
		// Each node once, until one answers.
		var errs []error
		for range s.nodes.size() {
			sess, err := s.dial(s.nodes.next(), false)
			if err == nil || !errors.Is(err, ErrDisconnected) {
				res <- dialed{sess, err}
				return
			}
			errs = append(errs, err)
		}
		res <- dialed{nil, errors.Join(errs...)}
	}()
	var sess *session
	select {
	case d := <-res:
		if d.err != nil {
			return nil, d.err
		}
		sess = d.sess
	case <-ctx.Done():
		go func() {
			if d := <-res; d.sess != nil {
				d.sess.close()
			}
		}()
		return nil, fmt.Errorf("amqpspace: connecting to %s: %w", redact(set.URL), ctx.Err())
	}
	s.sess.Store(sess)
	s.wg.Add(1)
	go s.supervise(sess)
	return s, nil
}

// NewFromEnv is New with the configuration of ConfigFromEnv.
func NewFromEnv(ctx context.Context) (*Space, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg)
}

// Exchange returns the name of the space's exchange.
func (s *Space) Exchange() string { return s.cfg.Exchange }

// Add puts a in the space; see space.Space. The id must not be live in any
// process on the broker's vhost (ErrAgentExists: queue names are the
// vhost's, whatever the exchange), must leave room for its broadcast
// queue's name (at most 245 bytes), must not end in "-broadcast", which
// would share another agent's queue, and must not start with "__", the
// prefix of the space's own routing keys such as "__broadcast__". Without
// a connection to the broker Add fails with ErrDisconnected. Agents
// consume 100 to a channel; the space opens a consuming connection for
// every 1,000 agents. Add does not wait for other agents to be
// subscribed again after a reconnect; it does wait while the space holds
// Config.MaxPendingBytes of input (the broker's answers come the same way).
func (s *Space) Add(ctx context.Context, a *agency.Agent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := a.ID()
	if err := checkID(id); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if _, ok := s.agents[id]; ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", space.ErrAgentExists, id)
	}
	mem := &member{s: s, id: id}
	s.agents[id] = mem // reserved: a concurrent Add of the same id fails
	s.mu.Unlock()

	conn, err := s.join(mem, a)
	if err != nil {
		s.mu.Lock()
		delete(s.agents, id)
		s.mu.Unlock()
		return err
	}
	conn.Added(ctx)
	return nil
}

// join claims and binds the agent's queues, connects the agent and starts
// its consumer. Connecting and the check that the space is still open
// happen under one lock, so Close sees every agent that Add lets in. The
// agent's own lock orders this with its re-subscription after a reconnect
// (see reconnect): the session is read under it.
func (s *Space) join(mem *member, a *agency.Agent) (*driver.Conn, error) {
	mem.subMu.Lock()
	defer mem.subMu.Unlock()
	sess := s.sess.Load()
	if sess == nil {
		if s.isClosed() {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("adding %q: %w", mem.id, ErrDisconnected)
	}
	sub, err := mem.claim(sess)
	if err != nil {
		if s.isClosed() {
			return nil, ErrClosed // the session went with the space
		}
		return nil, err
	}
	if err := mem.bind(sub); err != nil {
		mem.release(sub)
		if s.isClosed() {
			return nil, ErrClosed
		}
		return nil, err
	}
	// A Remove may come as soon as the agent is visible: it finds its
	// subscription in place.
	mem.setSub(sub)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		mem.release(sub)
		return nil, ErrClosed
	}
	conn, err := driver.Connect(a, router{mem: mem})
	if err != nil {
		s.mu.Unlock()
		mem.release(sub)
		return nil, err
	}
	mem.conn = conn
	s.mu.Unlock()
	mem.run(sess, sub)
	return conn, nil
}

func (s *Space) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// checkID refuses ids that the AMQP topology cannot carry safely.
func checkID(id string) error {
	if err := checkTopology(id); err != nil {
		return err
	}
	return agency.ValidateID(id)
}

// checkTopology is checkID without agency.ValidateID, for an id that
// agency.DecodeMessage has checked already.
func checkTopology(id string) error {
	switch {
	case len(id) > maxIDLength:
		return fmt.Errorf("%w: %d bytes; amqpspace takes at most %d, to leave room for the %q queue", agency.ErrInvalidID, len(id), maxIDLength, broadcastSuffix)
	case strings.HasPrefix(id, "__"):
		return fmt.Errorf("%w: %q: ids starting with __ are routing keys of the space's own (%q, say)", agency.ErrInvalidID, id, broadcastKey)
	case strings.HasSuffix(id, broadcastSuffix):
		return fmt.Errorf("%w: %q: an id ending in %q would share the broadcast queue of agent %q", agency.ErrInvalidID, id, broadcastSuffix, strings.TrimSuffix(id, broadcastSuffix))
	}
	return nil
}

// Remove takes the agent with the given id out; see space.Space. It runs
// the agent's BeforeRemove hook while the agent can still be reached, then
// unbinds its queues (a Request to it fails with ErrNoRecipient from then
// on), lets the agent handle the messages already in its queues and finish
// its running action, and deletes the queues.
func (s *Space) Remove(ctx context.Context, id string) error {
	s.mu.Lock()
	mem := s.agents[id]
	if mem == nil || mem.conn == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", space.ErrUnknownAgent, id)
	}
	s.mu.Unlock()
	err := mem.leave(ctx)
	if !mem.gone() {
		return err // a second Remove gave up waiting for the first
	}
	s.mu.Lock()
	if s.agents[id] == mem {
		delete(s.agents, id)
	}
	s.mu.Unlock()
	return err
}

// evict takes out an agent whose queues were lost to another process
// while this one was disconnected.
func (s *Space) evict(mem *member) {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.PublishTimeout)
	defer cancel()
	switch err := s.Remove(ctx, mem.id); {
	case err == nil:
		s.log.Warn("amqpspace: removed an agent whose id another process holds now", "agent", mem.id)
	case !errors.Is(err, space.ErrUnknownAgent):
		s.log.Error("amqpspace: removing an agent that lost its queues", "agent", mem.id, "error", err)
	}
}

// Close removes every agent, concurrently, deleting their queues, then
// closes the connections; see space.Space. A program that serves until it
// is told to stop calls it on SIGINT or SIGTERM (signal.NotifyContext),
// with a context that bounds how long running actions may take.
func (s *Space) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()

	mems := s.members()
	errs := make([]error, len(mems))
	var wg sync.WaitGroup
	for i, mem := range mems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Remove(ctx, mem.id)
			if errors.Is(errs[i], space.ErrUnknownAgent) {
				errs[i] = nil // removed meanwhile
			}
		}()
	}
	wg.Wait()

	s.sessMu.Lock()
	close(s.closing) // a reconnect from now on closes what it dialed
	sess := s.sess.Swap(nil)
	s.sessMu.Unlock()
	if sess != nil {
		sess.close()
		sess.wg.Wait()
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// reserved returns every agent Add has reserved an id for, joined or not.
func (s *Space) reserved() []*member {
	s.mu.Lock()
	defer s.mu.Unlock()
	mems := make([]*member, 0, len(s.agents))
	for _, mem := range s.agents {
		mems = append(mems, mem)
	}
	return mems
}

// members returns the agents in the space.
func (s *Space) members() []*member {
	s.mu.Lock()
	defer s.mu.Unlock()
	mems := make([]*member, 0, len(s.agents))
	for _, mem := range s.agents {
		if mem.conn != nil {
			mems = append(mems, mem)
		}
	}
	return mems
}

// local reports whether id is an agent of this process. An id that Add
// has reserved but not claimed from the broker is not: its Add may yet be
// refused, the id being live elsewhere, and the messages of that live
// agent must get through meanwhile.
func (s *Space) local(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	mem, ok := s.agents[id]
	return ok && mem.conn != nil
}

// router publishes one agent's messages.
type router struct{ mem *member }

func (r router) Route(ctx context.Context, m *agency.Message) error {
	if m.From != r.mem.id {
		return fmt.Errorf("%w: %q sending as %q", agency.ErrForgedSender, r.mem.id, m.From)
	}
	if !m.IsResponse() && !m.NoReply && !r.mem.s.cfg.Durable && !r.mem.subscribed() {
		// Its transient queue may have gone with a cluster node: until it
		// is declared again, the answer would find no queue and be lost.
		return fmt.Errorf("%w: %q is being subscribed again after a reconnect, and its queue may not be there yet for the answer", ErrDisconnected, r.mem.id)
	}
	return r.mem.s.send(ctx, m)
}

// send encodes m and publishes it: a broadcast with the broadcast routing
// key, any other message mandatory, so that an id no queue is bound for
// comes back as agency.ErrNoRecipient.
func (s *Space) send(ctx context.Context, m *agency.Message) error {
	body, err := s.encode(m) // interop.go: operand/agency's shape in the Python-compatible mode
	if err != nil {
		return err
	}
	if len(body) > s.cfg.MaxMessageSize {
		return fmt.Errorf("%w: %d bytes encoded, limit %d (Config.MaxMessageSize)", ErrMessageTooLarge, len(body), s.cfg.MaxMessageSize)
	}
	if strings.HasPrefix(m.To, "__") {
		// No agent has such an id; published, a message to
		// "__broadcast__" would land in every broadcast queue.
		return fmt.Errorf("%w: %q", agency.ErrNoRecipient, m.To)
	}
	key, mandatory := m.To, true
	if m.To == agency.Broadcast {
		key, mandatory = broadcastKey, false
	}
	// text/plain in UTF-8, whatever the mode: see contentType in interop.go.
	msg := amqp.Publishing{ContentType: contentType, ContentEncoding: contentEncoding, MessageId: m.ID, Body: body}
	if s.cfg.Durable {
		msg.DeliveryMode = amqp.Persistent
	}
	sess := s.sess.Load()
	err = s.publish(ctx, sess, key, mandatory, msg, m)
	if errors.Is(err, ErrRejected) && mandatory {
		s.refusedTo(m.To)
	}
	if m.IsResponse() && (lostWith(sess, err) || errors.Is(err, ErrRejected)) {
		err = s.sendAgain(ctx, sess, key, msg, m, err)
	}
	if errors.Is(err, agency.ErrNoRecipient) {
		return fmt.Errorf("%w: %q", agency.ErrNoRecipient, m.To)
	}
	return err
}

// refusedTo fails at once the Requests of this process's agents that wait
// for an answer from the agent with id to, after the broker refused a
// message to it: the way to that agent's queue is broken. Its queue was on
// a cluster node that died (without Durable, with what it held), or it is
// a quorum queue whose leader died, and RabbitMQ 3.10.8 was seen to
// confirm the first message a channel sent it during the election without
// queueing it, then refuse all that channel sent it for many seconds. The
// Requests fail with ErrUnconfirmed: they may or may not have been
// delivered, and an answer may still come (to the agent's hooks). A queue
// that refuses for being full (a max-length policy with reject-publish)
// ends its callers' waits the same way.
func (s *Space) refusedTo(to string) {
	err := fmt.Errorf("%w: the broker refused a message to %q, so a request to it confirmed before may not have been queued", ErrUnconfirmed, to)
	for _, mem := range s.members() {
		mem.conn.FailRequestsTo(to, err)
	}
}

// publish publishes m, encoded in msg, on sess.
func (s *Space) publish(ctx context.Context, sess *session, key string, mandatory bool, msg amqp.Publishing, m *agency.Message) error {
	if sess == nil {
		return ErrDisconnected
	}
	p, err := sess.publisherFor(key)
	if err != nil {
		return err
	}
	err = p.publish(ctx, s.cfg.Exchange, key, mandatory, msg, m.Deadline)
	if errors.Is(err, ErrRejected) && mandatory {
		sess.refusedOn(p, key)
	}
	if errors.Is(err, agency.ErrNoRecipient) && m.IsResponse() {
		// An agent that is leaving has unbound its id, but its running
		// actions still wait for their answers: its queue is bound with
		// the leaving key until it is gone.
		err = sess.pub.publish(ctx, s.cfg.Exchange, leavingPrefix+m.To, true, msg, m.Deadline)
	}
	return err
}

// lostWith reports whether err, what publishing on sess (nil: none)
// returned, says that the message was lost with the connection: not sent
// (ErrDisconnected), or sent without a confirmation that can come now
// (ErrUnconfirmed, the publisher's channel being gone).
func lostWith(sess *session, err error) bool {
	switch {
	case err == nil:
		return false
	case sess != nil && errors.Is(err, ErrUnconfirmed):
		return sess.pub.lostErr() != nil // not a wait for the confirmation that timed out
	default:
		return errors.Is(err, ErrDisconnected)
	}
}

// resentHeader marks a response published again after its connection was
// lost: the first copy may have arrived, and the caller's space drops the
// second (see check).
const resentHeader = "x-agency-resent"

// resendPoll is how often a response lost with its connection looks for
// the next one, and how long one refused first waits before it goes
// again; the wait doubles with each refusal, up to resendMaxWait.
const (
	resendPoll    = 20 * time.Millisecond
	resendMaxWait = time.Second
)

// sendAgain publishes again a response that publishing on sess lost with
// the connection or that the broker refused, until it is confirmed, or
// the caller stops waiting (ctx: the handler's context, which ends with
// the request's deadline; without a deadline, for up to PublishTimeout),
// or the space closes; it returns the last error otherwise.
//
// A response lost with the connection goes once the space has another,
// marked as sent again (it may have arrived). The responder's process
// losing its connection (a cluster node that dies) would otherwise lose
// the answer while the caller, connected elsewhere, waits for it until
// its deadline: the request is not handled a second time, the broker's
// second delivery of it being recognised as one the agent already has
// (see check). A response refused (ErrRejected: a quorum queue refuses
// what a channel sends it while it elects a leader, and RabbitMQ 3.10 was
// seen refusing everything that channel sent it afterwards) goes on a
// channel of its own, opened for it.
func (s *Space) sendAgain(ctx context.Context, sess *session, key string, msg amqp.Publishing, m *agency.Message, err error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.PublishTimeout)
		defer cancel()
	}
	// Every copy is marked: the first may have arrived (a response lost
	// with the connection after it was sent; one refused by one queue of
	// several it was routed to, which RabbitMQ refuses as a whole).
	msg.Headers = amqp.Table{resentHeader: true}
	if errors.Is(err, ErrRejected) {
		s.log.Warn("amqpspace: the broker refused a response; sending it again on a channel of its own", "to", m.To, "in_reply_to", m.ParentID)
	}
	refusedWait := resendPoll
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		lost := lostWith(sess, err)
		if !lost && !errors.Is(err, ErrRejected) {
			return err
		}
		if lost {
			timer.Reset(resendPoll)
		} else {
			timer.Reset(refusedWait)
			refusedWait = min(2*refusedWait, resendMaxWait)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return err
		case <-s.closing:
			return err
		}
		if !lost {
			err = sess.publishAlone(ctx, s.cfg.Exchange, key, msg, m.Deadline)
			continue
		}
		if next := s.sess.Load(); next != nil && next != sess {
			sess = next
			err = s.publish(ctx, sess, key, true, msg, m)
		}
	}
}

// expiration is the per-message TTL (milliseconds) for a message with d
// left before its deadline: rounded up, so that the broker never drops it
// before then, and 0 for a deadline that has passed.
func expiration(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Millisecond - 1) / time.Millisecond)
}

// Reconnects returns how many times the space has reconnected to the
// broker since New: a counter for metrics (otelagency.ObserveReconnects
// reports it as agency.space.reconnects). It is safe for concurrent use.
func (s *Space) Reconnects() int64 { return s.reconnects.Load() }
