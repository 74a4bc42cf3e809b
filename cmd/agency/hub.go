package main

import (
	"sync"
)

// backlogSize is how many of the latest events Studio keeps for a page
// that opens (or reconnects) later.
const backlogSize = 1000

// subscriberBuffer bounds the events that wait for one page; a page that
// falls further behind is disconnected, and its browser reconnects and
// catches up from the backlog.
const subscriberBuffer = 1024

// hub fans events out to Studio's pages. It is safe for concurrent use.
type hub struct {
	mu      sync.Mutex
	backlog []event // a ring, oldest at start once full
	start   int
	subs    map[chan event]struct{}
}

func newHub() *hub {
	return &hub{subs: make(map[chan event]struct{})}
}

// publish records ev and hands it to every page.
func (h *hub) publish(ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.backlog) < backlogSize {
		h.backlog = append(h.backlog, ev)
	} else {
		h.backlog[h.start] = ev
		h.start = (h.start + 1) % backlogSize
	}
	for ch := range h.subs {
		select {
		case ch <- ev:
		default: // too slow: let it go, it will catch up from the backlog
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// publishConversation hands the news of a conversation to every page.
// It is not kept: a page reads the conversations when it connects.
func (h *hub) publishConversation(c conversation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- event{conversation: &c}:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// subscribe returns the events after seq that the backlog holds, and a
// channel of those to come, closed by unsubscribe or when the page falls
// behind.
func (h *hub) subscribe(after int64) ([]event, chan event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var past []event
	for i := range h.backlog {
		ev := h.backlog[(h.start+i)%len(h.backlog)]
		if ev.Seq > after {
			past = append(past, ev)
		}
	}
	ch := make(chan event, subscriberBuffer)
	h.subs[ch] = struct{}{}
	return past, ch
}

// unsubscribe stops the events of ch.
func (h *hub) unsubscribe(ch chan event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
}
