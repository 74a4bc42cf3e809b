package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// logRecorder is a slog handler that keeps each record's level, message
// and attributes as text.
type logRecorder struct {
	mu      sync.Mutex
	records []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, b.String())
	l.mu.Unlock()
	return nil
}

// Every event reaches the observer and the log: transitions at Info,
// refusals and failures at Warn, with the conversation and the agents, and
// of the variables only their names.
func TestEventsLogged(t *testing.T) {
	rec := &logRecorder{}
	var seen []Event
	ev := events{obs: ObserverFunc(func(_ context.Context, e Event) { seen = append(seen, e) }), logger: slog.New(rec)}
	ctx := context.Background()
	ev.emit(ctx, Event{Kind: EventHandoff, Conversation: "c1", Agent: "Triage", From: "Triage", To: "Refunds", Name: "transfer_to_refunds", Hops: 1, Path: []string{"Triage"}, Version: 3, Vars: Vars{"passport_number": "P123"}})
	ev.emit(ctx, Event{Kind: EventRefused, Conversation: "c1", Agent: "Triage", From: "Triage", To: "Nobody", Err: errors.New("not permitted")})
	ev.emit(ctx, Event{Kind: EventLoopLimit, Conversation: "c2", Agent: "Sales", Err: fmt.Errorf("%w: hop budget 8 spent", ErrLoopLimit)})
	want := []string{
		"INFO handoff: handoff conversation=c1 agent=Triage from=Triage to=Refunds name=transfer_to_refunds hops=1 path=[Triage] version=3 vars=[passport_number]",
		"WARN handoff: handoff_refused conversation=c1 agent=Triage from=Triage to=Nobody reason=not permitted",
		"WARN handoff: loop_limit conversation=c2 agent=Sales reason=loop_limit: hop budget 8 spent",
	}
	if len(rec.records) != len(want) {
		t.Fatalf("logged %q", rec.records)
	}
	for i := range want {
		if rec.records[i] != want[i] {
			t.Errorf("record %d:\n got %s\nwant %s", i, rec.records[i], want[i])
		}
	}
	if strings.Contains(strings.Join(rec.records, "\n"), "P123") {
		t.Error("a variable's value was logged")
	}
	if len(seen) != 3 || seen[0].Time.IsZero() || seen[0].Vars["passport_number"] != "P123" {
		t.Errorf("the observer saw %+v", seen)
	}
}
