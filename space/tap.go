package space

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/seed72275b23/agency-go/agency"
)

// taps are the functions Tap registered on a Local, replaced as a whole
// on each change so that Route reads them without a lock.
type taps struct {
	mu   sync.Mutex // serialises changes; readers load list
	list atomic.Pointer[[]*func(*agency.Message)]
}

// Tap has f called with every message an agent of the space sends, once
// per message (a broadcast too), before the space delivers it, so that a
// tool (a timeline, a trace) sees the space's traffic as a broker's
// wildcard binding would show it. The returned function stops the calls;
// it may be called more than once.
//
// f runs on the sender's goroutine, possibly on many at once, for every
// message: it must be quick and must not block, send or change the
// message (it is the one the recipients get). A message the space refuses
// (a forged sender) is not shown; one to an absent recipient is.
func (s *Local) Tap(f func(m *agency.Message)) (untap func()) {
	p := &f
	s.taps.mu.Lock()
	var next []*func(*agency.Message)
	if cur := s.taps.list.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, p)
	s.taps.list.Store(&next)
	s.taps.mu.Unlock()
	return func() {
		s.taps.mu.Lock()
		defer s.taps.mu.Unlock()
		cur := s.taps.list.Load()
		if cur == nil {
			return
		}
		next := slices.DeleteFunc(slices.Clone(*cur), func(q *func(*agency.Message)) bool { return q == p })
		if len(next) == 0 {
			s.taps.list.Store(nil)
			return
		}
		s.taps.list.Store(&next)
	}
}

// observe shows m to the taps, if any.
func (s *Local) observe(m *agency.Message) {
	if l := s.taps.list.Load(); l != nil {
		for _, f := range *l {
			(*f)(m)
		}
	}
}
