package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
)

// broadcastKey is the routing key of a broadcast on the exchange.
const broadcastKey = "__broadcast__"

// watchSurveyEvery is how often a watcher on a broker surveys the space
// again, to bind the agents that joined since and let go of those that
// left. A message to an agent that joined since the last survey, before it
// sent anything, is not seen.
const watchSurveyEvery = 5 * time.Second

// watchSurveyTimeout bounds one of those surveys.
const watchSurveyTimeout = 10 * time.Second

// watchLearned bounds the senders the watcher has learned of and not bound
// yet; past it they wait for the next survey.
const watchLearned = 1024

// surveySuffix ends the id of the help broadcast of agency.Survey.
const surveySuffix = ".survey"

// A binder keeps a watcher's queue bound with the routing key of every
// agent it knows of, and with no other but the broadcasts' and the agency
// commands' (cliPrefix+"*"). It learns of agents from surveys and from the
// senders of the messages it sees, and lets go of an id once the agent's
// queue has gone from the broker (until then a message to it is routable
// anyway, to that queue).
//
// Binding the agent's own key adds no route to a message that had none:
// that is what keeps the broker's returns of mandatory messages, and so
// agency.ErrNoRecipient, working while a watcher runs.
type binder struct {
	conn            *amqp.Connection
	queue, exchange string
	ch              *amqp.Channel // binds and unbinds
	check           *amqp.Channel // passive declares; a refusal closes it

	mu    sync.Mutex
	known map[string]bool
}

func newBinder(conn *amqp.Connection, queue, exchange string) (*binder, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	return &binder{conn: conn, queue: queue, exchange: exchange, ch: ch, known: make(map[string]bool)}, nil
}

// has reports whether the queue is bound with key id. Any goroutine may
// call it.
func (b *binder) has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.known[id]
}

// bind binds the queue with key, once. The rest of the binder's methods are
// for one goroutine at a time.
func (b *binder) bind(key string) error {
	if b.has(key) {
		return nil
	}
	if err := b.ch.QueueBind(b.queue, key, b.exchange, false, nil); err != nil {
		return fmt.Errorf("binding the tail's queue to exchange %q with %q: %w", b.exchange, key, err)
	}
	b.mu.Lock()
	b.known[key] = true
	b.mu.Unlock()
	return nil
}

func (b *binder) unbind(key string) error {
	if err := b.ch.QueueUnbind(b.queue, key, b.exchange, nil); err != nil {
		return fmt.Errorf("unbinding %q from the tail's queue: %w", key, err)
	}
	b.mu.Lock()
	delete(b.known, key)
	b.mu.Unlock()
	return nil
}

// run binds the ids learned sends, and surveys the space every
// watchSurveyEvery, until ctx ends (nil) or the broker fails it.
func (b *binder) run(ctx context.Context, a *agency.Agent, learned <-chan string) error {
	tick := time.NewTicker(watchSurveyEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case id := <-learned:
			if err := b.bind(id); err != nil {
				return b.failed(ctx, err)
			}
		case <-tick.C:
			if err := b.resurvey(ctx, a); err != nil {
				return b.failed(ctx, err)
			}
		}
	}
}

func (b *binder) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// resurvey binds every agent that answers a survey from a, and unbinds
// the ids it knew whose queues have gone.
func (b *binder) resurvey(ctx context.Context, a *agency.Agent) error {
	sctx, cancel := context.WithTimeout(ctx, watchSurveyTimeout)
	answers, _ := agency.Survey(sctx, a) // what answered, whatever else went wrong
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	for id := range answers {
		if err := b.bind(id); err != nil {
			return err
		}
	}
	b.mu.Lock()
	var silent []string
	for id := range b.known {
		if _, ok := answers[id]; !ok && id != broadcastKey && !strings.HasPrefix(id, cliPrefix) && id != a.ID() {
			silent = append(silent, id)
		}
	}
	b.mu.Unlock()
	// An agent busy with an action answers later: only the one whose
	// queue the broker no longer has is gone.
	for _, id := range silent {
		gone, err := b.gone(id)
		if err != nil {
			return err
		}
		if gone {
			if err := b.unbind(id); err != nil {
				return err
			}
		}
	}
	return nil
}

// gone reports whether the broker has no queue id.
func (b *binder) gone(id string) (bool, error) {
	if b.check == nil || b.check.IsClosed() {
		ch, err := b.conn.Channel()
		if err != nil {
			return false, err
		}
		b.check = ch
	}
	_, err := b.check.QueueDeclarePassive(id, true, false, false, false, nil)
	if err == nil {
		return false, nil
	}
	b.check = nil // the broker closed it
	var ae *amqp.Error
	switch {
	case b.conn.IsClosed():
		return false, err
	case errors.As(err, &ae) && ae.Code == amqp.NotFound:
		return true, nil
	default:
		// Locked by its owner, or not ours to see: it is there, or
		// cannot be told gone.
		return false, nil
	}
}

// header is what a watcher reads of a message as it passes: who sent it
// to whom, and its ids, in either wire shape (interop.md).
type header struct {
	To     string `json:"to"`
	From   string `json:"from"`
	Action struct {
		Meta metaIDs `json:"__meta__"`
	} `json:"action"`
	Meta metaIDs `json:"meta"` // operand/agency's shape
}

type metaIDs struct {
	ID       string `json:"id"`
	ParentID string `json:"parent_id"`
}

func peek(body []byte) header {
	var h header
	_ = json.Unmarshal(body, &h) // a malformed message is shown as it is
	return h
}

// commandSurvey reports whether the message is the help broadcast of a
// survey by an agency command, or an answer to one: the surveys the
// watchers make again and again, which would drown what a person watches.
func (h header) commandSurvey() bool {
	id, parent := h.Action.Meta.ID, h.Action.Meta.ParentID
	if id == "" {
		id, parent = h.Meta.ID, h.Meta.ParentID
	}
	switch {
	case strings.HasPrefix(h.From, cliPrefix) && h.To == agency.Broadcast:
		return strings.HasSuffix(id, surveySuffix)
	case strings.HasPrefix(h.To, cliPrefix):
		return strings.HasSuffix(parent, surveySuffix)
	}
	return false
}
