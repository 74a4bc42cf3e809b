package agency_test

import (
	"context"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

const (
	tpRoot  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tpOther = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// fixedTrace injects tp whatever the context, and records what it is asked
// to extract.
type fixedTrace struct {
	tp        string
	extracted chan string
}

func (f fixedTrace) ExtractTrace(ctx context.Context, tp string) context.Context {
	if f.extracted != nil {
		f.extracted <- tp
	}
	return ctx
}

func (f fixedTrace) InjectTrace(context.Context) string { return f.tp }

// brokenTrace panics in both methods, or returns what it must not.
type brokenTrace struct{ panics bool }

func (b brokenTrace) ExtractTrace(context.Context, string) context.Context {
	if b.panics {
		panic("tracer bug")
	}
	return nil // what a buggy propagator may do
}

func (b brokenTrace) InjectTrace(context.Context) string {
	if b.panics {
		panic("tracer bug")
	}
	return "not a traceparent"
}

// traceSeen returns an agent whose action "see" answers with the
// traceparent of the message it handles.
func traceSeen(t *testing.T, opts ...agency.Option) *agency.Agent {
	a := agency.MustNewAgent("Seer", opts...)
	agency.Handle(a, "see", func(ctx context.Context, _ struct{}) (string, error) {
		if ctx.Err() != nil {
			t.Errorf("the handler's context has ended: %v", ctx.Err())
		}
		tp, _ := agency.MessageFrom(ctx).Meta[agency.TraceparentKey].(string)
		return tp, nil
	})
	return a
}

// What a message carries: the traceparent in its Meta, else the one
// WithTraceparent gave the context, else the propagator's, else none.
func TestTracePropagatorPrecedence(t *testing.T) {
	seer := traceSeen(t)
	sender := agency.MustNewAgent("Sender", agency.Hooks(fixedTrace{tp: tpRoot}))
	joinLocal(t, seer, sender)
	see := func(ctx context.Context, meta map[string]any) string {
		t.Helper()
		r, err := sender.RequestMessage(ctx, &agency.Message{To: "Seer", Action: "see", Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := agency.Value[string](r)
		return v
	}
	ctx := callCtx(t)
	if got := see(ctx, nil); got != tpRoot {
		t.Errorf("from the propagator: %q", got)
	}
	if got := see(agency.WithTraceparent(ctx, tpOther), nil); got != tpOther {
		t.Errorf("WithTraceparent and a propagator: %q, want WithTraceparent's", got)
	}
	if got := see(ctx, map[string]any{agency.TraceparentKey: tpOther}); got != tpOther {
		t.Errorf("Meta and a propagator: %q, want Meta's", got)
	}
}

// A propagator that panics or returns nonsense neither stops the agent nor
// puts nonsense on the wire; with several, the first valid injection
// decides and every one extracts.
func TestTracePropagatorFaults(t *testing.T) {
	extracted := make(chan string, 2)
	seer := traceSeen(t, agency.Hooks(brokenTrace{panics: true}), agency.Hooks(fixedTrace{extracted: extracted}))
	quiet := agency.MustNewAgent("Quiet", agency.Hooks(brokenTrace{}))
	loud := agency.MustNewAgent("Loud", agency.Hooks(brokenTrace{panics: true}))
	both := agency.MustNewAgent("Both", agency.Hooks(brokenTrace{}), agency.Hooks(fixedTrace{tp: tpRoot}))
	joinLocal(t, seer, quiet, loud, both)
	ctx := callCtx(t)
	for _, tc := range []struct {
		from *agency.Agent
		want string
	}{{quiet, ""}, {loud, ""}, {both, tpRoot}} {
		got, err := agency.Call[string](ctx, tc.from, "Seer", "see", nil)
		if err != nil || got != tc.want {
			t.Errorf("from %s: %q, %v; want %q", tc.from.ID(), got, err, tc.want)
		}
	}
	// Seer's second propagator still extracted, after the first panicked,
	// for the one message that had a traceparent.
	select {
	case got := <-extracted:
		if got != tpRoot {
			t.Errorf("extracted %q", got)
		}
	default: // Seer has answered, so it has extracted by now
		t.Error("the second propagator did not extract after the first panicked")
	}
	// A nil context from ExtractTrace leaves the handler the agent's.
	broken := traceSeen(t, agency.Hooks(brokenTrace{}))
	sender := agency.MustNewAgent("Sender", agency.Hooks(fixedTrace{tp: tpRoot}))
	joinLocal(t, broken, sender)
	if got, err := agency.Call[string](ctx, sender, "Seer", "see", nil); err != nil || got != tpRoot {
		t.Errorf("an ExtractTrace that returns nil: %q, %v", got, err)
	}
}
