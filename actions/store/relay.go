package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// RelayConfig configures a Relay. The zero value is the defaults.
type RelayConfig struct {
	// Poll is how often the relay looks for entries when nobody wakes it:
	// entries queued by another process, and entries whose claim ended
	// because the relay that held them died. Default 5s.
	Poll time.Duration
	// Lease is how long a claim holds the entries being sent: after that
	// another relay may send them again. It is also how long the entries a
	// relay held wait after its process died before they are sent again.
	// Default 10s; it should exceed the time a batch takes to send, or a
	// slow batch may go out twice.
	Lease time.Duration
	// Batch is how many entries one claim takes at most. Default 100.
	Batch int
	// Backoff is how long an entry whose recipient is absent waits before
	// it is tried again, the first time; the wait doubles with each
	// attempt, up to MaxBackoff. Default 1s.
	Backoff time.Duration
	// MaxBackoff bounds that wait, and so how late an entry may go out
	// once its recipient is back. Default 30s.
	MaxBackoff time.Duration
	// Logger receives what the relay cannot send. Default: nothing is
	// logged.
	Logger *slog.Logger
	// Send, when set, sends each entry's message in place of the agent's
	// Forward, and says what became of it: nil, sent (the entry is marked
	// sent); an error matching agency.ErrNoRecipient, the recipient is
	// absent (the entry waits, with Backoff, and the entries behind it to
	// the same recipient wait with it); any other error, not sent (the
	// entry and the rest of its batch go back to the outbox at once, as
	// when Forward fails). A Send that waits for the receiver's answer
	// (with the agent's RequestMessage) makes "sent" mean "the receiver
	// answered"; it must bound that wait itself, well within Lease, and
	// may return nil for an answer that refuses the message for good.
	// Send is called from one goroutine at a time per relay.
	Send func(ctx context.Context, a *agency.Agent, m *agency.Message) error
}

// Relay sends the outbox entries of one agent through that agent
// ([agency.Agent.Forward], or RelayConfig.Send), and marks them sent. Its
// owner creates it, starts it once the agent is in a space (AfterAdd is
// the place), wakes it after each Apply that queued messages, and stops it
// before the agent leaves (BeforeRemove).
//
// Sending is at least once: an entry sent but not yet marked when the
// process dies is sent again after a restart, or by another relay once its
// claim ends. Every resend carries the same __meta__.id, so a receiver can
// tell a duplicate.
//
// Order is kept per recipient: the entries of one agent to one recipient
// go out in the order Apply queued them, after failed sends and restarts
// too, and with several relays for one agent (replicas sharing a
// database), since Claim hands out no entry while an older one to the
// same recipient is held. Entries to different recipients are
// independent. When the space says a recipient is absent
// ([agency.ErrNoRecipient]: it has not joined yet, or it left), the entry
// stays queued and is tried again after Backoff, doubling up to
// MaxBackoff, for as long as the recipient stays away; the entries behind
// it to that recipient wait with it, and entries to everyone else go on.
// When a send fails for another reason (the agent is in no space, the
// broker is unreachable, Stop cancelled it), the pass stops there and
// gives that entry and the rest of its batch back to the outbox at once,
// where the next pass, of this relay or another, finds them first. The
// order can break only when a lease ends while its relay is still
// sending (see Lease).
//
// A Relay's methods are safe for concurrent use.
type Relay struct {
	st    Store
	agent *agency.Agent
	cfg   RelayConfig

	pass sync.Mutex // one pass at a time
	due  time.Time  // under pass: the soonest an entry this relay put off is due
	wake chan struct{}

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewRelay returns a relay for agent a's entries in st. It does nothing
// until Start or Flush.
func NewRelay(st Store, a *agency.Agent, cfg RelayConfig) *Relay {
	if cfg.Poll <= 0 {
		cfg.Poll = 5 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 10 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.Backoff)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Send == nil {
		cfg.Send = forward
	}
	return &Relay{st: st, agent: a, cfg: cfg, wake: make(chan struct{}, 1)}
}

// forward is the default RelayConfig.Send.
func forward(ctx context.Context, a *agency.Agent, m *agency.Message) error {
	_, err := a.Forward(ctx, m)
	return err
}

// pass is what one Flush has learnt so far.
type pass struct {
	tried  map[int64]bool           // entries handled in this pass
	absent map[string]time.Duration // recipients found absent, and how long their entries wait
	again  []Outgoing               // tried, due again already: held until the pass ends
}

// absentErr reports the recipients found absent, if any.
func (p *pass) absentErr() error {
	if len(p.absent) == 0 {
		return nil
	}
	to := slices.Sorted(maps.Keys(p.absent))
	return fmt.Errorf("store: %w: %s; the entries to them wait and are tried again",
		agency.ErrNoRecipient, strings.Join(to, ", "))
}

// Flush sends the agent's entries that no other relay holds and that are
// not waiting for an absent recipient, until none is left, and returns how
// many it sent. Entries to a recipient the space says is absent stay
// queued, and so do the entries behind them to that recipient; the others
// go on, and Flush then returns an error matching agency.ErrNoRecipient
// that names the absent recipients. Flush stops at the first entry the
// agent cannot send for another reason, gives it and the rest of its batch
// back to the outbox, and returns that error; the next pass starts with
// them, so that they still go out in order.
func (r *Relay) Flush(ctx context.Context) (int, error) {
	r.pass.Lock()
	defer r.pass.Unlock()
	if !r.due.After(time.Now()) {
		r.due = time.Time{}
	}
	p := &pass{tried: make(map[int64]bool), absent: make(map[string]time.Duration)}
	defer r.giveBack(ctx, p)
	total := 0
	for {
		batch, err := r.st.Claim(ctx, r.agent.ID(), r.cfg.Batch, r.cfg.Lease)
		if err != nil {
			return total, err
		}
		if len(batch) == 0 {
			return total, p.absentErr()
		}
		n, err := r.send(ctx, batch, p)
		total += n
		if err != nil {
			return total, err
		}
	}
}

// giveBack releases, as the pass ends, the entries it held so as not to
// try them twice: they are due, and the next pass tries them.
func (r *Relay) giveBack(ctx context.Context, p *pass) {
	if len(p.again) == 0 {
		return
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.st.Release(mctx, 0, p.again...); err != nil {
		r.cfg.Logger.Warn("store: cannot give back outbox entries; they wait for their lease to end",
			"agent", r.agent.ID(), "entries", len(p.again), "error", err)
		return
	}
	r.due = time.Now()
}

// send sends the batch in order, marks what went out and gives back what
// did not; it returns how many were sent, and why it stopped early.
func (r *Relay) send(ctx context.Context, batch []Outgoing, p *pass) (sent int, err error) {
	var done []int64                            // sent, or dropped
	later := make(map[time.Duration][]Outgoing) // waiting for an absent recipient
	var back []Outgoing                         // given back at once
	var sendErr error
	for i, o := range batch {
		if p.tried[o.ID] {
			// Put off earlier in this pass and due already: held, and so
			// are the entries behind it, until the pass ends, rather than
			// tried again and again in this one.
			p.again = append(p.again, o)
			continue
		}
		p.tried[o.ID] = true
		m, err := agency.DecodeMessage(o.Message)
		if err != nil {
			// Apply refuses such entries; one written behind the store's
			// back would block the rest forever. Drop it, loudly.
			r.cfg.Logger.Error("store: dropping an outbox entry that does not decode",
				"agent", r.agent.ID(), "entry", o.ID, "error", err)
			done = append(done, o.ID)
			continue
		}
		if wait, ok := p.absent[m.To]; ok {
			// Behind an entry whose recipient is absent: it waits with it.
			later[wait] = append(later[wait], o)
			continue
		}
		err = r.cfg.Send(ctx, r.agent, m)
		if err == nil {
			done = append(done, o.ID)
			sent++
			continue
		}
		if errors.Is(err, agency.ErrNoRecipient) {
			wait := r.backoff(o.Attempts)
			r.cfg.Logger.Warn("store: the recipient of an outbox entry is absent; the entry waits and is tried again",
				"agent", r.agent.ID(), "entry", o.ID, "to", m.To, "action", m.Action,
				"attempts", o.Attempts, "retry_in", wait)
			p.absent[m.To] = wait
			later[wait] = append(later[wait], o)
			continue
		}
		r.cfg.Logger.Warn("store: cannot send an outbox entry; it stays queued",
			"agent", r.agent.ID(), "entry", o.ID, "to", m.To, "action", m.Action,
			"attempts", o.Attempts, "error", err)
		sendErr = err
		back = append(back, batch[i:]...)
		break
	}
	// Mark and give back even when ctx has just ended: what went out must
	// not go out again if it can be helped, and what did not should not
	// wait for its lease.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	if len(done) > 0 {
		if err := r.st.Sent(mctx, done...); err != nil {
			r.cfg.Logger.Warn("store: cannot mark outbox entries sent; they will be sent again",
				"agent", r.agent.ID(), "entries", len(done), "error", err)
			errs = append(errs, err)
		}
	}
	for wait, entries := range later {
		if err := r.st.Release(mctx, wait, entries...); err != nil {
			r.cfg.Logger.Warn("store: cannot put off outbox entries; they wait for their lease to end",
				"agent", r.agent.ID(), "entries", len(entries), "error", err)
			errs = append(errs, err)
			continue
		}
		if due := time.Now().Add(wait); r.due.IsZero() || due.Before(r.due) {
			r.due = due
		}
	}
	if len(back) > 0 {
		if err := r.st.Release(mctx, 0, back...); err != nil {
			r.cfg.Logger.Warn("store: cannot give back outbox entries; they wait for their lease to end",
				"agent", r.agent.ID(), "entries", len(back), "error", err)
			errs = append(errs, err)
		}
	}
	return sent, errors.Join(append([]error{sendErr}, errs...)...)
}

// backoff is how long an entry whose recipient is absent waits, at its
// given attempt.
func (r *Relay) backoff(attempts int) time.Duration {
	wait := r.cfg.Backoff
	for i := 1; i < attempts && wait < r.cfg.MaxBackoff; i++ {
		wait *= 2
	}
	return min(wait, r.cfg.MaxBackoff)
}

// next is how long the relay's goroutine waits for the next pass when
// nobody wakes it.
func (r *Relay) next() time.Duration {
	r.pass.Lock()
	defer r.pass.Unlock()
	if r.due.IsZero() {
		return r.cfg.Poll
	}
	return max(min(time.Until(r.due), r.cfg.Poll), 0)
}

// Start starts the relay's goroutine, which flushes at once, on each Wake,
// every Poll, and when an entry put off for an absent recipient is due. Stop stops it. Start after Start or Stop does nothing.
func (r *Relay) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	r.started = true
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan struct{})
	go r.run(ctx)
}

func (r *Relay) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-t.C:
		}
		_, err := r.Flush(ctx)
		switch {
		case errors.Is(err, ErrClosed):
			r.cfg.Logger.Warn("store: the store is closed; the relay stops", "agent", r.agent.ID())
			return
		case errors.Is(err, agency.ErrNoRecipient):
			// Logged entry by entry already.
		case err != nil && ctx.Err() == nil:
			r.cfg.Logger.Warn("store: relay pass failed", "agent", r.agent.ID(), "error", err)
		}
		t.Reset(r.next())
	}
}

// Wake makes a started relay flush now rather than at its next poll; call
// it after an Apply that queued messages. It never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Stop stops the relay's goroutine and waits for it: a send under way is
// cancelled, and its entry is sent again later. Stop is idempotent.
func (r *Relay) Stop() {
	r.mu.Lock()
	r.started = true // a Start after Stop does nothing
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
