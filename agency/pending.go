package agency

import (
	"fmt"
	"slices"
)

// pendingRequest is a Request waiting for its first response.
type pendingRequest struct {
	id   string      // the request's message id
	from string      // the recipient: only its response answers the request
	ch   chan answer // buffered for exactly one answer
	st   *stream     // for a Stream, where its parts go; nil for a Request
}

// pendingSet is the Requests of an agent waiting for their first
// response, one per request id: a short list for the few an agent has at a
// time (cheaper than a map's hashing, three times per Request), and a map
// while there are many.
type pendingSet struct {
	list []pendingRequest
	byID map[string]pendingRequest

	// The streams the agent serves and has stopped, made by the first:
	// kept here, with the requests, so that an agent that never streams
	// (or never requests) holds no room for them.
	streams *streams
}

// pendingMapAt is the number of waiting Requests from which they are kept
// in the map.
const pendingMapAt = 16

// put adds p, in place of a request with the same id, if any.
func (s *pendingSet) put(p pendingRequest) {
	if s.byID != nil {
		s.byID[p.id] = p
		return
	}
	for i := range s.list {
		if s.list[i].id == p.id {
			s.list[i] = p
			return
		}
	}
	if len(s.list) < pendingMapAt {
		s.list = append(s.list, p)
		return
	}
	s.byID = make(map[string]pendingRequest, 2*pendingMapAt)
	for _, q := range s.list {
		s.byID[q.id] = q
	}
	clear(s.list)
	s.list = s.list[:0]
	s.byID[p.id] = p
}

// take removes the request with the given id and returns its channel,
// unless it was sent to another agent than from, or waits on another
// channel than ch (an empty from, a nil ch: any); nil when none is taken.
// Its frame, and answer's, are kept small: they are the deepest of a
// delivery goroutine that answers a request in process, which starts on a
// small stack (see handle).
func (s *pendingSet) take(id, from string, ch chan answer) chan answer {
	if s == nil {
		return nil
	}
	if s.byID != nil {
		return s.takeMapped(id, from, ch)
	}
	for i := range s.list {
		p := &s.list[i]
		if p.id != id {
			continue
		}
		if (from != "" && p.from != from) || (ch != nil && p.ch != ch) {
			return nil
		}
		got := p.ch
		last := len(s.list) - 1
		s.list[i] = s.list[last]
		s.list[last] = pendingRequest{}
		s.list = s.list[:last]
		return got
	}
	return nil
}

// takeMapped is take while the requests are in the map.
//
//go:noinline
func (s *pendingSet) takeMapped(id, from string, ch chan answer) chan answer {
	p, ok := s.byID[id]
	if !ok || (from != "" && p.from != from) || (ch != nil && p.ch != ch) {
		return nil
	}
	delete(s.byID, id)
	if len(s.byID) == 0 {
		s.byID = nil // back to the list
	}
	return p.ch
}

// find returns the request with the given id sent to the agent from,
// leaving it in place.
func (s *pendingSet) find(id, from string) (pendingRequest, bool) {
	if s == nil {
		return pendingRequest{}, false
	}
	if s.byID != nil {
		p, ok := s.byID[id]
		return p, ok && p.from == from
	}
	for _, p := range s.list {
		if p.id == id {
			return p, p.from == from
		}
	}
	return pendingRequest{}, false
}

// drain removes every request, calling f for each.
func (s *pendingSet) drain(f func(pendingRequest)) {
	if s == nil {
		return
	}
	for _, p := range s.list {
		f(p)
	}
	clear(s.list)
	s.list = s.list[:0]
	for _, p := range s.byID {
		f(p)
	}
	s.byID = nil
}

// drainTo removes every request sent to the agent with id to, calling f
// for each.
func (s *pendingSet) drainTo(to string, f func(pendingRequest)) {
	if s == nil {
		return
	}
	s.list = slices.DeleteFunc(s.list, func(p pendingRequest) bool {
		if p.from != to {
			return false
		}
		f(p)
		return true
	})
	for id, p := range s.byID {
		if p.from == to {
			f(p)
			delete(s.byID, id)
		}
	}
	if s.byID != nil && len(s.byID) == 0 {
		s.byID = nil // back to the list
	}
}

// answer ends a pending Request: its first response, or the error that
// came instead (see FailRequests).
type answer struct {
	m   *Message
	err error
}

// await registers a request id, sent to the agent with id from, whose first
// response the caller will read from the returned channel; or the error
// that ends the wait instead (see FailRequests, and finish: once the agent
// has left the space, at once). A Stream's parts go to st; a Request's st
// is nil.
func (c *conn) await(id, from string, st *stream) chan answer {
	c.mu.Lock()
	x := c.extraLocked()
	ch := x.spare
	x.spare = nil
	if ch == nil {
		ch = make(chan answer, 1)
	}
	if c.hasLeft() {
		// The agent has left: no answer can come (see finish).
		ch <- answer{err: removedWhileWaiting(from)}
		c.mu.Unlock()
		return ch
	}
	x.pending.put(pendingRequest{id: id, from: from, ch: ch, st: st})
	c.mu.Unlock()
	// The response may come behind messages a space holds back until the
	// agent takes them: take them all now, and all that come until forget.
	x.waiting.Add(1)
	c.releaseHeld()
	return ch
}

// forget removes the request that await registered with ch, unless a later
// request with the same id has taken its place.
func (c *conn) forget(id string, ch chan answer) {
	x := c.extra.Load() // made by await
	x.waiting.Add(-1)
	c.mu.Lock()
	x.pending.take(id, "", ch)
	// Nothing can reach ch any more (answer and FailRequests send under
	// mu, to pending requests): keep it for the next Request, empty.
	select {
	case <-ch:
	default:
	}
	x.spare = ch
	c.mu.Unlock()
}

// removedWhileWaiting is the error of a Request whose agent left the
// space before the answer from the agent with id to came.
//
//go:noinline
func removedWhileWaiting(to string) error {
	return fmt.Errorf("%w: removed while waiting for %q", ErrNotAdded, to)
}

// FailRequests makes every Request of the agent that is waiting for its
// response return err at once. A space calls it when the way those
// responses come has broken (a wire space's connection was lost), rather
// than let each caller wait out its deadline for an answer that may never
// come. Requests made afterwards are not affected. Safe for concurrent use.
func (c *conn) FailRequests(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pendingLocked().drain(func(p pendingRequest) {
		p.ch <- answer{err: err} // still pending, so nothing was sent on ch
	})
}

// FailRequestsTo is FailRequests for the Requests sent to the agent with
// id to alone.
func (c *conn) FailRequestsTo(to string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pendingLocked().drainTo(to, func(p pendingRequest) {
		p.ch <- answer{err: err} // still pending, so nothing was sent on ch
	})
}

// answer hands the response m to the Request waiting for it, if any: one
// waiting for a response to m.ParentID from the agent m comes from. A
// response from any other agent answers nothing: no agent can slip its own
// answer into another's Request. It sends under mu, so that once forget
// has removed a request nothing more reaches its channel.
func (c *conn) answer(m *Message) bool {
	if m.ParentID == "" {
		return false
	}
	c.mu.Lock()
	ch := c.pendingLocked().take(m.ParentID, m.From, nil)
	if ch != nil {
		ch <- answer{m: m} // buffered for exactly this one answer
	}
	c.mu.Unlock()
	return ch != nil
}
