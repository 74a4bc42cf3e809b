package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// newRelay returns the relay that sends a's messages from the store's
// outbox: a store.Relay whose Send waits for each handoff's receiver to
// answer (see deliver); the Policy's other messages (the say that tells
// the user of a handoff given back) go out as store.Relay sends them.
func (p *Policy) newRelay(a *agency.Agent) *store.Relay {
	cfg := p.cfg.relay
	// A person waits for the receiver's answer: a receiver that joins late
	// (after a restart) gets the handoff within seconds, not store.Relay's
	// half minute.
	if cfg.Backoff <= 0 {
		cfg.Backoff = defaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = defaultMaxBackoff
	}
	lease := cfg.Lease
	if lease <= 0 {
		lease = defaultLease
	}
	cfg.Send = func(ctx context.Context, a *agency.Agent, m *agency.Message) error {
		if m.Action != Action {
			_, err := a.Forward(ctx, m)
			return err
		}
		return p.deliver(ctx, a, m, lease/2)
	}
	if cfg.Logger == nil {
		cfg.Logger = p.cfg.logger
	}
	return store.NewRelay(p.cfg.store, a, cfg)
}

// The relay's defaults that differ from store.RelayConfig's, and its
// default Lease.
const (
	defaultBackoff    = 100 * time.Millisecond
	defaultMaxBackoff = 5 * time.Second
	defaultLease      = 10 * time.Second
)

// deliver sends the handoff message m and waits, at most ack, for the
// receiver's answer (the handoff action answers as soon as the receiver
// has taken the conversation over, before it runs its turn): a handoff
// counts as delivered when the receiver answered. The wait is bounded by
// cancelling, not by a deadline: a deadline would travel with the message
// and end the receiver's turn with it.
//
// A receiver that is not in the space (after a restart it may join after
// the sender) is agency.ErrNoRecipient: the relay keeps the handoff and
// tries again with backoff. No answer in time is another error: the relay
// keeps the handoff and sends it again on its next pass, and the receiver
// tells the resent message by its version. Both count toward the same
// bounded wait, from the first failure: once a handoff has been neither
// taken nor refused for AbsentWait, it goes back to its maker (see
// giveBack) with a no_recipient reason, so that a receiver that is there
// but never answers (stuck, or a space that cannot tell absence) holds no
// conversation for ever. A refusal is final:
// the handoff counts as delivered, and when the conversation is still
// where the handoff left it (the receiver did not take it, and nobody else
// did meanwhile), the sender holds it again (see giveBack).
func (p *Policy) deliver(ctx context.Context, a *agency.Agent, m *agency.Message, ack time.Duration) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(ack, cancel)
	defer timer.Stop()
	_, err := a.RequestMessage(rctx, m)
	absent := errors.Is(err, agency.ErrNoRecipient)
	unanswered := !absent && err != nil && ctx.Err() == nil &&
		(errors.Is(err, agency.ErrTimeout) || rctx.Err() != nil)
	if absent || unanswered {
		since := p.absentSince(m.ID)
		if time.Since(since) < p.cfg.absent {
			return err // the relay tries again
		}
		p.present(m.ID)
		tr, ok := p.transferOf(m)
		if ok {
			why := fmt.Errorf("%w: %s is not in the space (waited %v)", ErrNoRecipient, m.To, p.cfg.absent)
			if !absent {
				why = fmt.Errorf("%w: %s did not take the handoff (no answer for %v)", ErrNoRecipient, m.To, p.cfg.absent)
			}
			p.giveBack(ctx, m.To, tr, why)
		}
		return nil
	}
	p.present(m.ID)
	var ae *agency.ActionError
	if err == nil || !errors.As(err, &ae) || errors.Is(err, agency.ErrTimeout) {
		return err
	}
	tr, ok := p.transferOf(m)
	if !ok {
		return nil
	}
	if r, ok := reasonIn(ae.Text); ok && r == ErrMovedOn {
		// The receiver's store knows the conversation went on without
		// this handoff (a resent message, or another agent took it).
		p.cfg.logger.Warn("handoff: a stale handoff was refused", "conversation", tr.Conversation, "agent", p.self, "to", m.To, "error", err)
		return nil
	}
	p.giveBack(ctx, m.To, tr, fmt.Errorf("%w: %w", ErrRefused, err))
	return nil
}

// transferOf decodes the Transfer of a handoff message the relay read
// from the outbox; one that does not decode is logged and dropped.
func (p *Policy) transferOf(m *agency.Message) (Transfer, bool) {
	var tr Transfer
	raw, _ := m.Args.(json.RawMessage) // the relay decoded m from its JSON
	if err := json.Unmarshal(raw, &tr); err != nil {
		p.cfg.logger.Error("handoff: a handoff does not decode; dropped", "agent", p.self, "to", m.To, "error", err)
		return tr, false
	}
	return tr, true
}

// absentSince returns when the receiver of the handoff message id was
// first found absent, now for the first time.
func (p *Policy) absentSince(id string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.absent == nil {
		p.absent = map[string]time.Time{}
	}
	t, ok := p.absent[id]
	if !ok {
		t = time.Now()
		p.absent[id] = t
	}
	return t
}

// present forgets that the receiver of the handoff message id was absent.
func (p *Policy) present(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.absent, id)
}

// giveBack makes the Policy's agent hold again a conversation whose
// handoff to the agent to was refused (not permitted, no handoff action,
// a bad Transfer), when the store still holds it as the handoff left it:
// in one Apply the conversation goes back to it, with the hops and path of
// before the handoff, a say that tells the user why is queued in the
// outbox, and, when the agent keeps its histories in the Policy's store
// (Memory, as Team has it), the same text ends the agent's history, so
// that its model reads it on the next turn. The event is EventReturned;
// when the conversation went on meanwhile, nothing changes and the event
// is EventRefused.
func (p *Policy) giveBack(ctx context.Context, to string, tr Transfer, refusal error) {
	text := fmt.Sprintf("Sorry, I could not hand this conversation to %s: %v. I am still here.", to, refusal)
	back := false
	conv, err := updateConv(ctx, p.cfg.store, tr.owner(), tr.Conversation, func(c *Conversation, exists bool) (store.Changes, error) {
		back = exists && c.Active == to && c.Version == tr.Version
		if !back {
			return store.Changes{}, errUnchanged
		}
		c.Active, c.Status = p.self, StatusActive
		c.Hops = max(c.Hops-1, 0)
		if n := len(c.Path); n > 0 && c.Path[n-1] == p.self {
			c.Path = slices.Clone(c.Path[:n-1])
		}
		c.Version++
		user := c.User
		if user == "" {
			user = tr.User
		}
		out, err := store.NewOutgoing(p.self, &agency.Message{To: user, Action: "say", Args: openai.SayArgs{Content: text},
			Meta: map[string]any{metaConversation: tr.Conversation}})
		if err != nil {
			return store.Changes{}, err
		}
		ch := store.Changes{Send: []store.Outgoing{out}}
		if p.memory != nil {
			note := openai.Message{Role: openai.RoleAssistant, Name: p.self, Content: text}
			doc, err := p.memory.appended(ctx, openai.ConversationKey(tr.owner(), tr.Conversation), note)
			if err != nil {
				return store.Changes{}, err
			}
			ch.Put = append(ch.Put, doc)
		}
		return ch, nil
	})
	ev := Event{Conversation: tr.Conversation, Agent: p.self, From: p.self, To: to, Name: tr.Name,
		Hops: conv.Hops, Path: conv.Path, Version: conv.Version, Err: refusal}
	switch {
	case err != nil:
		ev.Kind = EventRefused
		ev.Err = fmt.Errorf("%w (and it could not be given back: %v)", refusal, err)
	case !back:
		ev.Kind = EventRefused
		ev.Err = fmt.Errorf("%w (the conversation went on meanwhile: it stays where it is)", refusal)
	default:
		ev.Kind = EventReturned
	}
	p.ev.emit(ctx, ev)
}
