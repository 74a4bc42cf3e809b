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
// when it goes, bound to the exchange with "#": every agent's queue gets
// its messages as before, and no one else's message is taken. In the demo
// it reads through the space's tap.
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
	if err := ch.QueueBind(queue, "#", s.exchange, false, nil); err != nil {
		return fmt.Errorf("binding the tail's queue to exchange %q: %w", s.exchange, err)
	}
	deliveries, err := ch.ConsumeWithContext(ctx, queue, queue, true, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("reading the tail's queue: %w", err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
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
		case d, ok := <-deliveries:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the broker stopped the tail's consumer")
			}
			f(time.Now(), d.Body)
		}
	}
}
