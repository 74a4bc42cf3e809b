package agency_test

import (
	"context"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// stateTrace is a TraceStatePropagator that records the tracestate it is
// asked to extract and injects a fixed pair.
type stateTrace struct {
	fixedTrace
	ts        string
	extracted chan string
}

func (s stateTrace) ExtractTraceState(ctx context.Context, tp, ts string) context.Context {
	s.extracted <- ts
	return ctx
}

func (s stateTrace) InjectTraceState(context.Context) (string, string) { return s.tp, s.ts }

// A vendor entry set at the root reaches the handler two agents on,
// through an agent that knows nothing of tracing.
func TestTracestateTravels(t *testing.T) {
	const ts = "vendor=opaque-value,other=1"
	last := agency.MustNewAgent("Last")
	agency.Handle(last, "see", func(ctx context.Context, _ struct{}) ([2]string, error) {
		m := agency.MessageFrom(ctx)
		tp, _ := m.Meta[agency.TraceparentKey].(string)
		got, _ := m.Meta[agency.TracestateKey].(string)
		return [2]string{tp, got}, nil
	})
	middle := agency.MustNewAgent("Middle")
	agency.Handle(middle, "relay", func(ctx context.Context, _ struct{}) ([2]string, error) {
		if got := agency.Tracestate(ctx); got != ts {
			t.Errorf("Tracestate in the middle = %q, want %q", got, ts)
		}
		return agency.Call[[2]string](ctx, agency.AgentFrom(ctx), "Last", "see", nil)
	})
	caller := agency.MustNewAgent("Caller")
	joinLocal(t, last, middle, caller)

	m := &agency.Message{To: "Middle", Action: "relay", Meta: map[string]any{
		agency.TraceparentKey: tpRoot, agency.TracestateKey: ts,
	}}
	r, err := caller.RequestMessage(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := agency.Value[[2]string](r)
	if err != nil {
		t.Fatal(err)
	}
	if got != [2]string{tpRoot, ts} {
		t.Errorf("the last handler saw %q, want traceparent %q and tracestate %q", got, tpRoot, ts)
	}
}

// A TraceStatePropagator gets the message's tracestate, and what it
// injects is sent; an invalid tracestate is neither extracted nor sent.
func TestTraceStatePropagator(t *testing.T) {
	const ts = "vendor=abc"
	extracted := make(chan string, 4)
	seer := traceSeen(t, agency.Hooks(stateTrace{fixedTrace: fixedTrace{tp: tpOther}, ts: "x=1", extracted: extracted}))
	agency.Handle(seer, "state", func(ctx context.Context, _ struct{}) (string, error) {
		return agency.Tracestate(ctx), nil
	})
	caller := agency.MustNewAgent("Caller", agency.Hooks(stateTrace{fixedTrace: fixedTrace{tp: tpRoot}, ts: ts, extracted: make(chan string, 4)}))
	joinLocal(t, seer, caller)

	r, err := caller.Request(context.Background(), "Seer", "state", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-extracted; got != ts {
		t.Errorf("extracted tracestate %q, want %q", got, ts)
	}
	if v, _ := agency.Value[string](r); v != "x=1" {
		t.Errorf("the handler's propagator injects tracestate %q, want %q", v, "x=1")
	}

	bad := &agency.Message{To: "Seer", Action: "see", Meta: map[string]any{
		agency.TraceparentKey: tpRoot, agency.TracestateKey: "bad\nvalue",
	}}
	if _, err := caller.RequestMessage(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if got := <-extracted; got != "" {
		t.Errorf("extracted tracestate %q from an invalid one, want none", got)
	}
}
