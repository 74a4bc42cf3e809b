package amqpspace

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency/driver"
)

var (
	_ driver.RecipientWatcher = router{}
	_ driver.NativeRouter     = router{}
)

// Native reports whether every agent on the exchange speaks agency-go's
// wire: true unless the space shares it with agents of another library
// (Config.Interop), which a stream's caller then tells to stop only after
// a part has come from them (see driver.NativeRouter).
func (r router) Native(string) bool { return r.mem.s.py == nil }

// watchEvery is how often a stream's caller looks whether the agent
// streaming to it still consumes its queue, and watchMisses how many looks
// in a row must find it gone: a peer that reconnects is away for a moment.
const (
	watchEvery  = 100 * time.Millisecond
	watchMisses = 2
)

// WatchRecipient watches, while a stream's caller reads it, whether the
// agent with id still consumes its queue: an agent whose process was
// killed, or lost its connection, leaves its queue without a consumer (the
// broker sees the connection go at once), and its caller hears so within
// a few tenths of a second (an error matching ErrDisconnected), not at its
// deadline. An agent of this process is not watched: it leaves through
// the space. The streams of a process to one agent share one look every
// watchEvery. The channel is closed once ctx has ended, or after the
// error.
func (r router) WatchRecipient(ctx context.Context, id string) <-chan error {
	return r.mem.s.watchers.add(ctx, r.mem.s, id)
}

// watchers are the looks under way, one per watched agent, each shared by
// the streams that read from that agent.
type watchers struct {
	mu   sync.Mutex
	byID map[string]*watcher
}

// watcher looks at one agent's queue for the streams in subs.
type watcher struct {
	subs map[chan error]struct{}
	stop context.CancelFunc
}

// add registers a stream reading from id until ctx ends, starting the
// look at id if none is under way.
func (ws *watchers) add(ctx context.Context, s *Space, id string) <-chan error {
	ch := make(chan error, 1)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byID == nil {
		ws.byID = make(map[string]*watcher)
	}
	w := ws.byID[id]
	if w == nil {
		wctx, stop := context.WithCancel(context.Background())
		w = &watcher{subs: make(map[chan error]struct{}), stop: stop}
		ws.byID[id] = w
		go ws.run(wctx, s, id, w)
	}
	w.subs[ch] = struct{}{}
	context.AfterFunc(ctx, func() { ws.remove(id, w, ch) })
	return ch
}

// remove lets go of one stream's watch; the look ends with its last.
func (ws *watchers) remove(id string, w *watcher, ch chan error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if _, ok := w.subs[ch]; !ok {
		return // told already, and closed
	}
	delete(w.subs, ch)
	close(ch)
	if len(w.subs) == 0 {
		w.stop()
		if ws.byID[id] == w {
			delete(ws.byID, id)
		}
	}
}

// run looks at id until w is stopped, and tells every stream if id is
// gone.
func (ws *watchers) run(ctx context.Context, s *Space, id string, w *watcher) {
	err := s.watch(ctx, id)
	if err == nil {
		return // stopped: its streams are done
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for ch := range w.subs {
		ch <- err
		close(ch)
		delete(w.subs, ch)
	}
	if ws.byID[id] == w {
		delete(ws.byID, id)
	}
	w.stop()
}

// watch returns when ctx ends (nil), or once the agent id has had no
// consumer watchMisses looks in a row.
func (s *Space) watch(ctx context.Context, id string) error {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if s.local(id) {
			continue
		}
		sess := s.sess.Load()
		if sess == nil {
			continue // the session's loss fails the wait by itself
		}
		gone, err := sess.unconsumed(id)
		switch {
		case err != nil:
			continue // no answer is not an answer
		case gone:
			misses++
		default:
			misses = 0
		}
		if misses >= watchMisses {
			return fmt.Errorf("%w: %q no longer consumes its queue: its process is gone or has lost its connection", ErrDisconnected, id)
		}
	}
}

// unconsumed reports whether queue id is gone or has no consumer.
func (sess *session) unconsumed(id string) (bool, error) {
	sess.subMu.Lock()
	if len(sess.subs) == 0 {
		sess.subMu.Unlock()
		return false, ErrDisconnected
	}
	cc := sess.subs[0]
	sess.subMu.Unlock()
	var gone bool
	err := cc.op(func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(id, true, false, false, false, nil)
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			gone = true
			return nil
		}
		if err != nil {
			return err
		}
		gone = q.Consumers == 0
		return nil
	})
	return gone, err
}
