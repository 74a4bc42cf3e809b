package agency

import (
	"fmt"
	"sync"
)

// Sequence keeps the arrival order of related messages in an agent that
// runs several actions at once ([Concurrency]). key names the sequence a
// message belongs to (a conversation, an order, a customer): messages with
// the same non-empty key run one after another, in the order they arrived,
// while messages with different keys, or with the key "", run side by side
// as before. Responses are never held back.
//
// A message waiting behind an earlier one of its sequence counts as not yet
// taken, for a space that paces delivery (amqpspace; see DeliverFunc of
// Conn in package agency/driver), until the agent waits for a response:
// what an agent holds stays bounded, but
// a long run of one key's messages behind a slow one can fill the space's
// window (amqpspace's prefetch or bytes) and hold back the other keys'
// messages until the run moves on. Without Concurrency, or with
// Concurrency(1), the agent already handles everything in arrival order,
// and Sequence changes nothing.
//
// key runs on the agent's delivery goroutine for every incoming message:
// it must be quick and must not block.
func Sequence(key func(*Message) string) Option {
	return func(c *agentConfig) error {
		if c.sequence != nil {
			return fmt.Errorf("%w: Sequence given twice", ErrInvalidOption)
		}
		if key == nil {
			return fmt.Errorf("%w: Sequence(nil)", ErrInvalidOption)
		}
		c.sequence = key
		return nil
	}
}

// sequencer holds the messages that wait behind an earlier message of
// their sequence, per key. A key is present while one of its messages runs.
type sequencer struct {
	mu      sync.Mutex
	waiting map[string][]item
}

// park queues it behind the running message of its key and reports true,
// or marks the key as running and reports false when none runs.
func (s *sequencer) park(key string, it item) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting == nil {
		s.waiting = make(map[string][]item)
	}
	q, running := s.waiting[key]
	if !running {
		s.waiting[key] = nil
		return false
	}
	s.waiting[key] = append(q, it)
	return true
}

// next returns the message that waits first behind key's running one, or
// false, having marked the key as idle, when none does.
func (s *sequencer) next(key string) (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.waiting[key]
	if len(q) == 0 {
		delete(s.waiting, key)
		return item{}, false
	}
	it := q[0]
	q[0] = item{}
	s.waiting[key] = q[1:]
	return it, true
}

// release fires the takers of every waiting message (see mailbox.release).
func (s *sequencer) release() {
	s.mu.Lock()
	var fire []*taker
	for _, q := range s.waiting {
		for _, it := range q {
			if it.taken != nil && !it.taken.done.Load() {
				fire = append(fire, it.taken)
			}
		}
	}
	s.mu.Unlock()
	for _, t := range fire {
		t.fire()
	}
}
