package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// Journal is a Memory that also writes turns ahead, so that a turn cut
// short by a crash is taken up again when the agent is built again on the
// same journal and joins its space. An agent whose Memory is a Journal
// (handoff.Memory is one) records, before it acts:
//
//   - the asker's message, with the turn as pending ([PendingTurn]), in
//     one write, before the model is called;
//   - each model reply that makes tool calls, before the calls are sent;
//     a call's idempotency key ([IdempotencyKey]) is made of the turn's
//     id and the call's id, so it is the same whenever the call is sent;
//   - the results of a reply's calls, all together, once every call has
//     returned;
//   - the answer, with the turn marked answered, before it is said;
//
// and forgets the pending turn once its answer (or its error) is said.
//
// When the agent joins a space it resumes every pending turn of its own,
// those of one conversation in the order they began, before any new say
// of that conversation runs. A resumed turn sends again the calls whose
// results are not recorded, with the same idempotency key and the same
// __meta__.tool_call_id, never a call whose result is recorded; calls the
// model again where no reply was recorded (a model call has no effect);
// and says a recorded answer that may not have been said. The answer goes
// to the asker as a say with __meta__.conversation and
// __meta__.in_reply_to the id of the message that asked, whether or not
// that request still waits. A turn is resumed at most DefaultMaxResumes
// times, and not at all once older than DefaultMaxTurnAge (see
// [Resumes]): the asker is then told, and the turn dropped.
//
// So the effect of a tool whose handler runs once per idempotency key
// (plan.Idempotent, with its effect written by plan.Effect) is exactly
// once under a crash at any instant; a tool that ignores the key runs at
// least once. The answer is said at least once: a crash after it is said
// and before the turn is forgotten says it again, with the same
// in_reply_to.
//
// A Journal's methods are called for one conversation at a time, like a
// Memory's.
type Journal interface {
	Memory
	// Begin records p as pending and appends msgs to the history of its
	// conversation (p.Key), in one write. It returns an error wrapping
	// ErrTurnPending when a turn with p's id is pending already (a
	// message that came twice).
	Begin(ctx context.Context, p PendingTurn, msgs ...Message) error
	// Record appends msgs to the history of p's conversation and writes p
	// as given (its Resumes, Answered, Answer), in one write.
	Record(ctx context.Context, p PendingTurn, msgs ...Message) error
	// Finish forgets the pending turn p; one it does not know is no error.
	Finish(ctx context.Context, p PendingTurn) error
	// Pending returns the pending turns, oldest first.
	Pending(ctx context.Context) ([]PendingTurn, error)
}

// ErrTurnPending is what Journal.Begin wraps when the turn is pending
// already.
var ErrTurnPending = errors.New("openai: the turn is pending already")

// IdempotencyKey is the __meta__ key of a tool request's idempotency key:
// the same key as plan.IdempotencyKey, so that a tool wrapped in
// plan.Idempotent runs once per call of a model too.
const IdempotencyKey = "idempotency_key"

// PendingTurn is a turn written ahead in a [Journal]: begun, not yet
// answered to its asker.
type PendingTurn struct {
	// ID is the id of the message that asked (the say, or the handoff that
	// handed the conversation over); the idempotency keys of the turn's
	// tool calls are made from it.
	ID string `json:"id"`
	// Key is the conversation's [ConversationKey].
	Key          string `json:"key"`
	Owner        string `json:"owner"`
	Conversation string `json:"conversation"`
	// Partner gets the answer, with __meta__.in_reply_to ReplyTo.
	Partner string `json:"partner"`
	ReplyTo string `json:"reply_to,omitempty"`
	// SayBack says whether the answer is said to Partner (a say that
	// asked as a tool, or with in_reply_to, is answered only as its
	// value, until a resume: then the value has nobody to go to, and the
	// answer is said).
	SayBack bool `json:"say_back"`
	// Data is the Continuation's Data, as JSON.
	Data json.RawMessage `json:"data,omitempty"`
	// Started is when the turn began; Resumes how often it was resumed.
	Started time.Time `json:"started"`
	Resumes int       `json:"resumes,omitempty"`
	// Answered is set once the answer is in the history; Answer and
	// AnswerMeta are what is said.
	Answered   bool           `json:"answered,omitempty"`
	Answer     string         `json:"answer,omitempty"`
	AnswerMeta map[string]any `json:"answer_meta,omitempty"`
}

// The bounds of resumed turns (see [Resumes]).
const (
	DefaultMaxResumes = 3
	DefaultMaxTurnAge = 15 * time.Minute
)

// Resumes bounds the resumption of pending turns when the agent's Memory
// is a [Journal]: a turn is resumed at most n times (default
// DefaultMaxResumes: a turn that kills its process each time is not
// tried for ever), and a turn older than maxAge (default
// DefaultMaxTurnAge) is not resumed at all. Either way its asker is told
// that the question was dropped, and the turn is forgotten.
func Resumes(n int, maxAge time.Duration) Option {
	return func(c *config) error {
		if c.resumesSet {
			return invalidf("Resumes given twice")
		}
		if n < 0 || maxAge <= 0 {
			return invalidf("Resumes(%d, %v): want n >= 0 and a positive age", n, maxAge)
		}
		c.resumesSet, c.maxResumes, c.maxTurnAge = true, n, maxAge
		return nil
	}
}

// callKey returns the idempotency key of the tool call tc of the turn t.
func (t *Turn) callKey(tc ToolCall) string { return t.id + " " + tc.ID }

// unanswered returns the last message of h when it is a reply with tool
// calls whose results are not recorded: its calls were sent, or were
// about to be, when the process stopped.
func unanswered(h []Message) (Message, bool) {
	if n := len(h); n > 0 && h[n-1].Role == RoleAssistant && len(h[n-1].ToolCalls) > 0 {
		return h[n-1], true
	}
	return Message{}, false
}

// resumer runs the pending turns of an agent that joined a space.
type resumer struct {
	mu   sync.Mutex
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// resumePending takes up the agent's pending turns: it locks each of
// their conversations now, before the agent handles any message, and
// runs their turns, in order per conversation, beside the agent.
func (a *Agent) resumePending(ctx context.Context) {
	j, ok := a.memory.(Journal)
	if !ok {
		return
	}
	ps, err := j.Pending(ctx)
	if err != nil {
		a.logger.Error("openai: the pending turns could not be read; none is resumed", "agent", a.agent.ID(), "error", err)
		return
	}
	if len(ps) == 0 {
		return
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.resume.mu.Lock()
	a.resume.stop = stop
	a.resume.mu.Unlock()
	var order []string
	byKey := map[string][]PendingTurn{}
	for _, p := range ps {
		if _, seen := byKey[p.Key]; !seen {
			order = append(order, p.Key)
		}
		byKey[p.Key] = append(byKey[p.Key], p)
	}
	for _, key := range order {
		unlock, err := a.convs.lock(rctx, key)
		if err != nil {
			return
		}
		a.resume.wg.Add(1)
		go func() {
			defer a.resume.wg.Done()
			defer unlock()
			for _, p := range byKey[key] {
				if rctx.Err() != nil {
					return
				}
				a.resumeTurn(rctx, j, p)
			}
		}()
	}
}

// stopResuming ends the resumed turns under way (they stay pending) and
// waits for them.
func (a *Agent) stopResuming() {
	a.resume.mu.Lock()
	stop := a.resume.stop
	a.resume.stop = nil
	a.resume.mu.Unlock()
	if stop != nil {
		stop()
	}
	a.resume.wg.Wait()
}

// resumeTurn runs the pending turn p again, whose conversation's lock the
// caller holds, or drops it when it is out of bounds.
func (a *Agent) resumeTurn(ctx context.Context, j Journal, p PendingTurn) {
	log := a.logger.With("agent", a.agent.ID(), "conversation", p.Conversation, "turn", p.ID, "resumes", p.Resumes)
	var drop string
	switch age := time.Since(p.Started); {
	case p.Resumes >= a.maxResumes:
		drop = fmt.Sprintf("Sorry, I could not answer your message: I stopped %d times while answering it, and gave up. Please ask again.", p.Resumes+1)
	case age > a.maxTurnAge:
		drop = fmt.Sprintf("Sorry, I could not answer your message: I stopped while answering it, and it is too old (%v) to take up again. Please ask again.", age.Round(time.Second))
	}
	if drop != "" {
		log.Warn("openai: a pending turn is dropped", "reason", drop)
		a.sayTo(ctx, p, drop, nil)
		if err := j.Finish(context.WithoutCancel(ctx), p); err != nil {
			log.Error("openai: a dropped turn could not be forgotten", "error", err)
		}
		return
	}
	p.Resumes++
	if err := j.Record(ctx, p); err != nil {
		log.Error("openai: a pending turn could not be resumed", "error", err)
		return
	}
	log.Info("openai: resuming a pending turn")
	p.SayBack = true // the asker's request, if any, went with the process
	if p.ReplyTo == "" {
		p.ReplyTo = p.ID
	}
	if p.Answered {
		a.sayTo(ctx, p, p.Answer, p.AnswerMeta)
		if err := j.Finish(context.WithoutCancel(ctx), p); err != nil {
			log.Error("openai: an answered turn could not be forgotten", "error", err)
		}
		return
	}
	var data any
	if len(p.Data) > 0 {
		data = p.Data
	}
	if _, err := a.serve(ctx, p.Owner, p.Conversation, p.Partner, nil, p.ReplyTo, true, data, p.ID, &p); err != nil && ctx.Err() == nil {
		log.Warn("openai: a resumed turn failed", "error", err)
	}
}

// sayTo says text to the asker of p.
func (a *Agent) sayTo(ctx context.Context, p PendingTurn, text string, extra map[string]any) {
	meta := make(map[string]any, len(extra)+2)
	for k, v := range extra {
		meta[k] = v
	}
	meta[metaConversation] = p.Conversation
	meta[metaReply] = p.ReplyTo
	if meta[metaReply] == "" {
		meta[metaReply] = p.ID
	}
	r := &agency.Message{To: p.Partner, Meta: meta, Action: "say", Args: SayArgs{Content: text}}
	if _, err := a.agent.SendMessage(ctx, r); err != nil {
		a.logger.Warn("openai: answer not sent", "to", p.Partner, "conversation", p.Conversation, "error", err)
	}
}

// Pending returns the turn as the agent's Journal holds it, and whether
// it does (it does not without a Journal). An extension that ends a turn
// with a write of its own (a handoff) may forget the pending turn in that
// write, so that a crash right after it does not resume a turn that has
// handed its conversation on.
func (t *Turn) Pending() (PendingTurn, bool) {
	if t.pending == nil {
		return PendingTurn{}, false
	}
	return *t.pending, true
}
