package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
)

// watchBuffer bounds the messages of the demo space that wait for the
// watcher; past it the tap drops them (and counts them) rather than hold
// up the agents.
const watchBuffer = 4096

// tailQueueBytes bounds what the broker keeps for a watcher that has not
// read it.
const tailQueueBytes = 64 << 20

// watch calls f with every message that passes in the space, in the order
// they pass, from one goroutine, until ctx ends or the broker goes; ready is
// called once every message from then on will be seen.
//
// On a broker it reads through a queue of its own, exclusive and deleted
// when it goes: every agent's queue gets its messages as before, and no one
// else's message is taken. The queue is bound only with the routing keys
// that have an agent (see binder), never with "#": a message to an id no
// agent has stays unroutable, so the broker still returns it to a sender
// that published it mandatory, and Request still fails at once with
// agency.ErrNoRecipient. In the demo it reads through the space's tap.
func (s *session) watch(ctx context.Context, ready func(), f func(at time.Time, body []byte)) error {
	if s.demo != nil {
		return s.watchLocal(ctx, ready, f)
	}
	return s.watchAMQP(ctx, ready, f)
}

type passed struct {
	at   time.Time
	body []byte
}

func (s *session) watchLocal(ctx context.Context, ready func(), f func(time.Time, []byte)) error {
	ch := make(chan passed, watchBuffer)
	var dropped atomic.Int64
	untap := s.demo.sp.Tap(func(m *agency.Message) {
		body, err := m.MarshalJSON()
		if err != nil {
			body = []byte(fmt.Sprintf("%q", m.String()))
		}
		select {
		case ch <- passed{time.Now(), body}:
		default:
			dropped.Add(1)
		}
	})
	defer untap()
	ready()
	for {
		select {
		case <-ctx.Done():
			if n := dropped.Load(); n > 0 {
				return fmt.Errorf("%d messages passed while the watcher was behind, and were not shown", n)
			}
			return nil
		case p := <-ch:
			f(p.at, p.body)
		}
	}
}

func (s *session) watchAMQP(ctx context.Context, ready func(), f func(time.Time, []byte)) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	queue := "agency-tail-" + hex.EncodeToString(b[:])
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{
		Heartbeat:       10 * time.Second,
		TLSClientConfig: s.cfg.TLS,
		Properties:      amqp.Table{"connection_name": queue},
	})
	if err != nil {
		return fmt.Errorf("cannot reach RabbitMQ at %s: %s", redact(s.cfg.URL), scrubbed(err, s.cfg.URL))
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	// Exclusive: only this connection may read it; auto-delete: it goes
	// with its consumer; bounded: a watcher that falls far behind a busy
	// exchange loses the oldest of what it has not read, rather than fill
	// the broker's memory.
	args := amqp.Table{"x-max-length-bytes": int64(tailQueueBytes)}
	if _, err := ch.QueueDeclare(queue, false, true, true, false, args); err != nil {
		return fmt.Errorf("declaring the tail's queue: %w", err)
	}
	bd, err := newBinder(conn, queue, s.exchange)
	if err != nil {
		return err
	}
	me := s.agent.ID()
	for _, key := range []string{broadcastKey, cliPrefix + "*", me} {
		if err := bd.bind(key); err != nil {
			return err
		}
	}
	deliveries, err := ch.ConsumeWithContext(ctx, queue, queue, true, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("reading the tail's queue: %w", err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	if err := bd.resurvey(ctx, s.agent); err != nil {
		return err
	}

	// The binder goroutine binds the senders the loop below learns of and
	// surveys the space again and again; it ends before this returns.
	learned := make(chan string, watchLearned)
	bctx, stopBinder := context.WithCancel(ctx)
	bound := make(chan error, 1)
	go func() { bound <- bd.run(bctx, s.agent, learned) }()
	defer func() {
		stopBinder()
		<-bound
	}()

	ready()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-closed:
			if e == nil {
				return nil
			}
			return fmt.Errorf("lost the broker: %v", e)
		case err := <-bound:
			bound <- nil // for the deferred wait
			if ctx.Err() != nil {
				return nil
			}
			return err
		case d, ok := <-deliveries:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the broker stopped the tail's consumer")
			}
			h := peek(d.Body)
			if h.commandSurvey() {
				continue
			}
			if h.From != "" && !bd.has(h.From) {
				select {
				case learned <- h.From:
				default: // the next survey finds it
				}
			}
			f(time.Now(), d.Body)
		}
	}
}
