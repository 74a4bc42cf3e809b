package spacetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/seed72275b23/agency-go/agency"
)

// Send to an id no agent has returns no error, and the sender's
// ErrorHandler receives a not_found [error] answering the message, which
// matches agency.ErrNoRecipient.
func testSendToAbsentAgentReported(e *env) {
	in := &inbox{}
	sender := e.newAgent("Sender", agency.Hooks(in))
	e.add(sender)
	ghost := e.id("Ghost")

	id := e.send(sender, ghost, "ping", nil)
	r := in.repliesTo(e.t, id, 1)[0]
	ae := wantActionError(e.t, r.err, agency.ErrNotFound, agency.TypeNotFound)
	if !errors.Is(r.err, agency.ErrNoRecipient) {
		e.t.Errorf("error %v: errors.Is(err, ErrNoRecipient) is false", r.err)
	}
	mustContain(e.t, "error text", ae.Text, ghost, "ping")
	if r.msg.From != ghost || r.msg.To != sender.ID() {
		e.t.Errorf("the [error] is %v, want one from %s to %s", r.msg, ghost, sender.ID())
	}
}

// A handler's InvalidArgsf, PermissionDeniedf and ActionFailedf reach the
// caller with their type and exactly their text; so does a sentinel
// wrapped with fmt.Errorf, without the sentinel's own words; a bare
// sentinel reads as its own words.
func testHandlerErrorText(e *env) {
	target := e.newAgent("Target")
	agency.Handle(target, "check", func(_ context.Context, args numArgs) (bool, error) {
		switch args.N {
		case 1:
			return false, agency.InvalidArgsf("n must be even, not %d", args.N)
		case 2:
			return false, agency.PermissionDeniedf("not for you")
		case 3:
			return false, agency.ActionFailedf("out of paper")
		case 4:
			return false, fmt.Errorf("%w: n must be below 4", agency.ErrInvalidArgs)
		case 5:
			return false, fmt.Errorf("%w: not on fives", agency.ErrPermissionDenied)
		}
		return false, errors.Join(agency.ErrInvalidArgs) // the sentinel alone
	})
	caller := e.newAgent("Caller")
	e.add(target, caller)

	for _, tc := range []struct {
		n        int
		sentinel error
		typ      agency.ErrorType
		text     string
	}{
		{1, agency.ErrInvalidArgs, agency.TypeInvalidArgs, "n must be even, not 1"},
		{2, agency.ErrPermissionDenied, agency.TypePermissionDenied, "not for you"},
		{3, agency.ErrActionFailed, agency.TypeActionFailed, "out of paper"},
		{4, agency.ErrInvalidArgs, agency.TypeInvalidArgs, "n must be below 4"},
		{5, agency.ErrPermissionDenied, agency.TypePermissionDenied, "not on fives"},
		{6, agency.ErrInvalidArgs, agency.TypeInvalidArgs, agency.ErrInvalidArgs.Error()},
	} {
		_, err := e.request(caller, target.ID(), "check", numArgs{N: tc.n})
		if ae := wantActionError(e.t, err, tc.sentinel, tc.typ); ae.Text != tc.text {
			e.t.Errorf("n=%d: text %q, want %q", tc.n, ae.Text, tc.text)
		}
	}
}

// shaped is a value whose Go type the receiving side must not see through
// an interface.
type shaped struct {
	N    int      `json:"n"`
	Tags []string `json:"tags"`
}

type anyArgs struct {
	Data any `json:"data"`
}

// Call[any], Call[map[string]any] and an argument field of type any get
// the JSON shapes (map[string]any, []any, float64), in every space: a
// program does not change behaviour when it moves to another space.
// Concrete types still get their own values.
func testAnyIsJSONShaped(e *env) {
	var got record[any]
	target := e.newAgent("Target")
	agency.Handle(target, "get", func(context.Context, empty) (shaped, error) {
		return shaped{N: 1, Tags: []string{"a"}}, nil
	})
	agency.Handle(target, "nested", func(context.Context, empty) (map[string]any, error) {
		return map[string]any{"inner": shaped{N: 2}}, nil
	})
	agency.Handle(target, "take", func(_ context.Context, args anyArgs) (bool, error) {
		got.add(args.Data)
		return true, nil
	})
	caller := e.newAgent("Caller")
	e.add(target, caller)

	want := map[string]any{"n": float64(1), "tags": []any{"a"}}
	if v := call[any](e, caller, target.ID(), "get", nil); !reflect.DeepEqual(v, want) {
		e.t.Errorf("Call[any] = %#v, want %#v", v, want)
	}
	if v := call[shaped](e, caller, target.ID(), "get", nil); !reflect.DeepEqual(v, shaped{N: 1, Tags: []string{"a"}}) {
		e.t.Errorf("Call[shaped] = %#v", v)
	}
	wantNested := map[string]any{"inner": map[string]any{"n": float64(2), "tags": nil}}
	if v := call[map[string]any](e, caller, target.ID(), "nested", nil); !reflect.DeepEqual(v, wantNested) {
		e.t.Errorf("Call[map[string]any] = %#v, want %#v", v, wantNested)
	}
	call[bool](e, caller, target.ID(), "take", anyArgs{Data: shaped{N: 3}})
	if v := got.waitLen(e.t, "the argument", 1)[0]; !reflect.DeepEqual(v, map[string]any{"n": float64(3), "tags": nil}) {
		e.t.Errorf("an argument of type any holds %#v, want the JSON shape", v)
	}
}

// A traceparent given to the sender's context travels in __meta__, the
// handler reads it with agency.Traceparent, and messages the handler sends
// carry it on (a trace goes through agents that know nothing of tracing).
func testTraceparent(e *env) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var seen record[string]
	last := e.newAgent("Last")
	agency.Handle(last, "ping", func(ctx context.Context, _ empty) (string, error) {
		seen.add("last " + agency.Traceparent(ctx))
		return "pong", nil
	})
	middle := e.newAgent("Middle")
	agency.Handle(middle, "relay", func(ctx context.Context, _ empty) (string, error) {
		seen.add("middle " + agency.Traceparent(ctx))
		return agency.Call[string](ctx, agency.AgentFrom(ctx), last.ID(), "ping", nil)
	})
	caller := e.newAgent("Caller")
	e.add(last, middle, caller)

	ctx := agency.WithTraceparent(e.ctx(), tp)
	if v, err := agency.Call[string](ctx, caller, middle.ID(), "relay", nil); err != nil || v != "pong" {
		e.t.Fatalf("relay: %q, %v", v, err)
	}
	if got := seen.all(); !reflect.DeepEqual(got, []string{"middle " + tp, "last " + tp}) {
		e.t.Errorf("the handlers saw %q, want the traceparent at both", got)
	}
	// Without one, nothing is invented.
	if v := call[string](e, caller, last.ID(), "ping", nil); v != "pong" {
		e.t.Fatal(v)
	}
	if got := seen.waitLen(e.t, "the third call", 3)[2]; got != "last " {
		e.t.Errorf("without a trace, the handler saw %q", got)
	}
}
