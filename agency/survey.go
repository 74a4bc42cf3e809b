package agency

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"
)

// DefaultSurveyQuiet is how long Survey waits, in a space that cannot tell
// who a broadcast reached, after the last answer (or the broadcast) for
// another before it takes the list as complete.
const DefaultSurveyQuiet = 500 * time.Millisecond

// DefaultSurveyTimeout bounds a Survey whose context has no deadline. An
// agent busy with a long action (one that waits for a person, say) answers
// help only after it, and one taken out of the space with a context that
// ran out drops the help it had queued and never answers: without a bound,
// a survey in a space that knows who it asked would wait for them for
// ever. Give ctx a deadline to wait longer, or less.
const DefaultSurveyTimeout = 10 * time.Second

// surveyTimeout is DefaultSurveyTimeout, but for tests.
var surveyTimeout = DefaultSurveyTimeout

// SurveyOption configures [Survey]. One with a wrong value makes Survey
// return an error matching ErrInvalidOption, before it sends anything.
type SurveyOption func(*surveyConfig) error

type surveyConfig struct {
	quiet time.Duration
	meta  map[string]any
}

// SurveyQuiet sets how long Survey waits for another answer, in a space
// that cannot tell who a broadcast reached (amqpspace); see
// DefaultSurveyQuiet. An agent busy with a long action answers help only
// after it, so a short quiet period may miss it. d must be positive.
func SurveyQuiet(d time.Duration) SurveyOption {
	return func(c *surveyConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: SurveyQuiet(%v): the quiet period must be positive", ErrInvalidOption, d)
		}
		c.quiet = d
		return nil
	}
}

// SurveyMeta adds meta keys to the help broadcast Survey sends, as
// Message.Meta does for SendMessage: an agent that surveys the space while
// it serves a conversation passes {"conversation": id}, so that the
// broadcast belongs to the conversation as every message sent for it does.
// The framework's own keys (id, parent_id, deadline, no_reply) are refused,
// as in SendMessage. Given several times, the maps are merged, later keys
// winning; meta is copied, not kept.
func SurveyMeta(meta map[string]any) SurveyOption {
	return func(c *surveyConfig) error {
		if len(meta) == 0 {
			return nil
		}
		if c.meta == nil {
			c.meta = make(map[string]any, len(meta))
		}
		maps.Copy(c.meta, meta)
		return nil
	}
}

// surveySuffix ends the id of every help broadcast Survey sends: an answer
// that comes after its survey is over is dropped, where it would otherwise
// reach the agent's ValueHandler as an answer to nothing it sent.
const surveySuffix = ".survey"

// Survey lists the agents in a's space and the actions each offers a: it
// broadcasts help from a and returns the answers by agent id (a itself is
// not listed; it knows its own actions). An action denied to a is not
// listed, as in help.
//
// When the survey is complete: in a space whose router is a
// driver.BroadcastRouter (space.Local), once every agent the broadcast reached
// has answered; in any other (amqpspace, where no process knows who else
// is on the broker), once no new answer has come for a quiet period (see
// SurveyQuiet) after the last one. If ctx ends first, Survey returns the
// answers that came, with an error that matches ErrTimeout (a deadline) or
// ctx's error. A ctx without a deadline gets one DefaultSurveyTimeout
// away, so that an agent that never answers cannot hold Survey for ever.
// Answers that come after Survey returns are dropped.
//
// Survey may be called from an action: the answers do not wait behind the
// agent's queue. An agent busy with an action answers after it.
//
// The help broadcast carries ctx's traceparent (see [Traceparent]) and the
// meta keys given with SurveyMeta.
func Survey(ctx context.Context, a *Agent, opts ...SurveyOption) (map[string]map[string]ActionHelp, error) {
	cfg := surveyConfig{quiet: DefaultSurveyQuiet}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	bounded := ""
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, surveyTimeout)
		defer cancel()
		bounded = fmt.Sprintf(" (a context without a deadline waits %v at most)", surveyTimeout)
	}
	m := &Message{To: Broadcast, Action: HelpAction, ID: NewID() + surveySuffix, Meta: cfg.meta}
	c, err := a.prepare(m)
	if err != nil {
		return nil, err
	}
	a.carryTrace(ctx, m)
	col := &collector{wake: make(chan struct{}, 1)}
	c.mu.Lock()
	x := c.extraLocked()
	if x.surveys == nil {
		x.surveys = make(map[string]*collector)
	}
	x.surveys[m.ID] = col
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(x.surveys, m.ID)
		c.mu.Unlock()
	}()
	x.waiting.Add(1) // a pacing space holds nothing back meanwhile
	c.releaseHeld()
	defer x.waiting.Add(-1)

	var expect map[string]bool // nil: the space cannot tell
	if br, ok := c.router.(broadcastRouter); ok {
		reached, err := br.RouteBroadcast(ctx, m)
		if err != nil {
			return nil, err
		}
		expect = make(map[string]bool, len(reached))
		for _, id := range reached {
			if id != a.id {
				expect[id] = true
			}
		}
	} else if err := c.router.Route(ctx, m); err != nil {
		return nil, err
	}

	out := map[string]map[string]ActionHelp{}
	answered := map[string]bool{}
	quiet := time.NewTimer(cfg.quiet)
	defer quiet.Stop()
	for {
		for _, r := range col.drain() {
			if r.From == a.id || answered[r.From] {
				continue
			}
			answered[r.From] = true
			delete(expect, r.From)
			if r.Action == ResponseAction {
				out[r.From] = decodeHelp(r)
			}
			if expect == nil {
				quiet.Reset(cfg.quiet)
			}
		}
		if expect != nil && len(expect) == 0 {
			return out, nil
		}
		var timeUp <-chan time.Time
		if expect == nil {
			timeUp = quiet.C
		}
		select {
		case <-col.wake:
		case <-timeUp:
			return out, nil
		case <-ctx.Done():
			return out, fmt.Errorf("agency: survey ended with %d answers%s: %w", len(out), bounded, requestError(ctx, Broadcast, HelpAction))
		case <-c.goneChan():
			return out, fmt.Errorf("%w: removed while surveying the space", ErrNotAdded)
		}
	}
}

// decodeHelp reads a help answer leniently: every action is listed, with
// as much of its entry as reads as an ActionHelp (an entry made with
// CustomHelp may have any shape).
func decodeHelp(r *Message) map[string]ActionHelp {
	entries, err := Value[map[string]json.RawMessage](r)
	if err != nil {
		return map[string]ActionHelp{}
	}
	help := make(map[string]ActionHelp, len(entries))
	for name, raw := range entries {
		var h ActionHelp
		_ = json.Unmarshal(raw, &h)
		help[name] = h
	}
	return help
}

// collector gathers the answers to one survey; Deliver adds to it without
// blocking.
type collector struct {
	mu   sync.Mutex
	got  []*Message
	wake chan struct{} // capacity 1: "got may have grown"
}

func (col *collector) add(m *Message) {
	col.mu.Lock()
	col.got = append(col.got, m)
	col.mu.Unlock()
	select {
	case col.wake <- struct{}{}:
	default:
	}
}

func (col *collector) drain() []*Message {
	col.mu.Lock()
	defer col.mu.Unlock()
	got := col.got
	col.got = nil
	return got
}

// collect takes an answer to a survey: to the survey, while it runs, or
// away, once it is over. It reports whether m was one.
func (c *conn) collect(m *Message) bool {
	if !strings.HasSuffix(m.ParentID, surveySuffix) {
		return false
	}
	var col *collector
	c.mu.Lock()
	if x := c.extra.Load(); x != nil {
		col = x.surveys[m.ParentID]
	}
	c.mu.Unlock()
	if col != nil {
		col.add(m)
	}
	return true
}
