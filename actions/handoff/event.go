package handoff

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// EventKind is the kind of an Event.
type EventKind string

// The kinds of Event.
const (
	EventHandoff        EventKind = "handoff"         // an agent handed the conversation on (committed; the message goes out next)
	EventRefused        EventKind = "handoff_refused" // a handoff was not made, or not taken over: Err says why
	EventAccepted       EventKind = "handoff_accepted"
	EventReturned       EventKind = "handoff_returned" // the receiver refused a committed handoff: its sender holds the conversation again, and the user is told
	EventCondition      EventKind = "condition"        // an OnContext rule fired
	EventConditionError EventKind = "condition_error"  // a condition could not be evaluated: the rule did not fire
	EventAfterWork      EventKind = "after_work"       // what happened after the model answered in text
	EventLoopLimit      EventKind = "loop_limit"       // the hop budget or ping-pong detection stopped a handoff
	EventVars           EventKind = "vars"             // a tool's Reply set variables
	EventDispatch       EventKind = "dispatch"         // the model changed a dispatcher's handoffs
	EventDropped        EventKind = "handoff_dropped"  // a dispatcher's handoff was neither offered nor made: its target is no longer authorized
)

// Event is one transition of a conversation.
type Event struct {
	Kind         EventKind
	Time         time.Time
	Conversation string
	Agent        string // the agent where it happened
	From, To     string // of a handoff
	Name         string // the handoff, the rule's condition, the dispatcher tool
	Message      string // the handoff's message
	Hops         int
	Path         []string
	Version      int64 // of the conversation, after the transition
	Vars         Vars  // of a handoff: the variables it carries; of a vars event: those the tool set
	// Err says why, for a refusal, a loop limit, a handoff given back or
	// dropped (it wraps a Reason: errors.Is(e.Err, ErrNoRecipient)), and a
	// condition that could not be evaluated.
	Err error
}

// Observer receives the events of the agents whose Policy (or Team) it is
// given to. Event is called on the goroutine of the turn or handler where
// the transition happens, so it must not block for long; events of
// different conversations come concurrently.
type Observer interface {
	Event(ctx context.Context, e Event)
}

// ObserverFunc is a function as an Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Event calls f.
func (f ObserverFunc) Event(ctx context.Context, e Event) { f(ctx, e) }

// events delivers events to an observer and a logger.
type events struct {
	obs    Observer
	logger *slog.Logger
}

func (ev events) emit(ctx context.Context, e Event) {
	e.Time = time.Now()
	if ev.obs != nil {
		ev.obs.Event(ctx, e)
	}
	level := slog.LevelInfo
	switch e.Kind {
	case EventRefused, EventReturned, EventConditionError, EventLoopLimit, EventDropped:
		level = slog.LevelWarn
	}
	logged := ev.logger.Enabled(ctx, level)
	if !logged && !agency.Recording(ctx) {
		return
	}
	attrs := []slog.Attr{slog.String("conversation", e.Conversation), slog.String("agent", e.Agent)}
	if e.From != "" || e.To != "" {
		attrs = append(attrs, slog.String("from", e.From), slog.String("to", e.To))
	}
	if e.Name != "" {
		attrs = append(attrs, slog.String("name", e.Name))
	}
	if e.Hops > 0 {
		attrs = append(attrs, slog.Int("hops", e.Hops), slog.Any("path", e.Path))
	}
	if e.Version > 0 {
		attrs = append(attrs, slog.Int64("version", e.Version))
	}
	if len(e.Vars) > 0 {
		// Their names only: values may be personal (a passport number).
		attrs = append(attrs, slog.Any("vars", slices.Sorted(maps.Keys(e.Vars))))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("reason", e.Err.Error()))
	}
	// On the span of the handling or model call under way, when the
	// agent has an agency.EventRecorder (a tracing instrumentation).
	agency.RecordEvent(ctx, "handoff."+string(e.Kind), attrs...)
	if logged {
		ev.logger.LogAttrs(ctx, level, "handoff: "+string(e.Kind), attrs...)
	}
}
