package spacetest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/seed72275b23/agency-go/agency"
)

// launchArgs are the arguments of the approval tests' action.
type launchArgs struct {
	Target string `json:"target" validate:"oneof=moon mars"`
}

// approval is what an approver saw.
type approval struct {
	from string
	args launchArgs
}

// agency.Approve: the approver gets the decoded, validated arguments and
// the caller in ctx; it decides each call. Arguments that fail validation
// are invalid_args and never reach it; an approver's refusal is
// permission_denied, its typed error reaches the caller as it is.
func testApprove(e *env) {
	var ran atomic.Int32
	var seen record[approval]
	target := e.newAgent("Target")
	agency.Handle(target, "launch", func(_ context.Context, args launchArgs) (string, error) {
		ran.Add(1)
		return "launched to " + args.Target, nil
	}, agency.Approve(func(ctx context.Context, args launchArgs) (bool, error) {
		from := agency.MessageFrom(ctx).From
		seen.add(approval{from: from, args: args})
		if args.Target == "mars" {
			return false, agency.PermissionDeniedf("mars is closed today, %s", from)
		}
		return from != "", nil
	}))
	caller := e.newAgent("Caller")
	e.add(target, caller)

	if v := call[string](e, caller, target.ID(), "launch", launchArgs{Target: "moon"}); v != "launched to moon" {
		e.t.Errorf("approved launch = %q", v)
	}
	_, err := e.request(caller, target.ID(), "launch", map[string]any{"target": "mars"})
	ae := wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	if want := "mars is closed today, " + caller.ID(); ae.Text != want {
		e.t.Errorf("refusal text %q, want %q", ae.Text, want)
	}
	_, err = e.request(caller, target.ID(), "launch", map[string]any{"target": "venus"})
	wantActionError(e.t, err, agency.ErrInvalidArgs, agency.TypeInvalidArgs)

	want := []approval{{caller.ID(), launchArgs{"moon"}}, {caller.ID(), launchArgs{"mars"}}}
	if got := seen.all(); !slices.Equal(got, want) {
		e.t.Errorf("the approver saw %v, want %v (never invalid arguments)", got, want)
	}
	if n := ran.Load(); n != 1 {
		e.t.Errorf("handler ran %d times, want 1", n)
	}
	h := call[helpMap](e, caller, target.ID(), agency.HelpAction, nil)
	if h["launch"].Access != "requested" {
		e.t.Errorf("help shows launch as %q, want requested", h["launch"].Access)
	}
}

// An approver may ask a human through another agent and wait for the
// answer, which does not queue behind its own agent's inbox; an error on
// the way (here: the human's agent refuses to be asked) refuses the call.
func testApproveAsksAnotherAgent(e *env) {
	var ran atomic.Int32
	human := e.newAgent("Human")
	agency.Handle(human, "approve", func(_ context.Context, q approveArgs) (bool, error) {
		if q.Action == "forbidden" {
			return false, errors.New("not to be asked about that")
		}
		return q.Action == "launch", nil
	})
	target := e.newAgent("Target")
	for _, name := range []string{"launch", "land", "forbidden"} {
		agency.Handle(target, name, func(context.Context, launchArgs) (string, error) {
			ran.Add(1)
			return "ok", nil
		}, agency.Approve(func(ctx context.Context, args launchArgs) (bool, error) {
			return agency.Call[bool](ctx, agency.AgentFrom(ctx), human.ID(), "approve",
				approveArgs{Action: name, From: agency.MessageFrom(ctx).From})
		}))
	}
	caller := e.newAgent("Caller")
	e.add(human, target, caller)

	if v := call[string](e, caller, target.ID(), "launch", launchArgs{Target: "moon"}); v != "ok" {
		e.t.Errorf("launch = %q", v)
	}
	_, err := e.request(caller, target.ID(), "land", launchArgs{Target: "moon"})
	wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	_, err = e.request(caller, target.ID(), "forbidden", launchArgs{Target: "moon"})
	wantActionError(e.t, err, agency.ErrActionFailed, agency.TypeActionFailed)
	if n := ran.Load(); n != 1 {
		e.t.Errorf("handlers ran %d times, want 1", n)
	}
}

// The order for a requested call: the action's approver decides, and the
// agent's PermissionRequester is asked only about actions without one.
func testApproveBeforePermissionRequester(e *env) {
	var ran atomic.Int32
	g := &gate{decide: func(context.Context, *agency.Message) bool { return true }}
	target := e.newAgent("Target", agency.Hooks(g))
	counted(target, "hooked", &ran, agency.AccessForAll(agency.Requested))
	agency.Handle(target, "approved", func(context.Context, empty) (string, error) {
		ran.Add(1)
		return "ok", nil
	}, agency.Approve(func(context.Context, empty) (bool, error) { return false, nil }))
	caller := e.newAgent("Caller")
	e.add(target, caller)

	if v := call[string](e, caller, target.ID(), "hooked", nil); v != "ok" {
		e.t.Errorf("hooked = %q", v)
	}
	_, err := e.request(caller, target.ID(), "approved", nil)
	wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	asked := g.asked.all()
	if len(asked) != 1 || asked[0].Action != "hooked" {
		e.t.Errorf("the PermissionRequester was asked about %v, want hooked only", asked)
	}
	if n := ran.Load(); n != 1 {
		e.t.Errorf("handlers ran %d times, want 1", n)
	}
}

// AccessBySender with a "Prefix*" key: agents whose ids have random
// suffixes are named by their prefix; an exact id, then the longest
// prefix, wins.
func testAccessBySenderPrefix(e *env) {
	var ran atomic.Int32
	target := e.newAgent("Target")
	// e.newAgent gives ids as base-<random hex>.
	w1, w2, boss := e.newAgent("Worker"), e.newAgent("Worker"), e.newAgent("Worker-boss")
	stranger := e.newAgent("Stranger")
	counted(target, "op", &ran, agency.AccessBySender(map[string]agency.Access{
		"Worker-*":      agency.Permitted,
		"Worker-boss-*": agency.Denied,
		w2.ID():         agency.Denied,
	}, agency.Denied))
	e.add(target, w1, w2, boss, stranger)

	if v := call[string](e, w1, target.ID(), "op", nil); v != "ok" {
		e.t.Errorf("op for %s = %q, want ok", w1.ID(), v)
	}
	for _, a := range []*agency.Agent{w2, boss, stranger} {
		_, err := e.request(a, target.ID(), "op", nil)
		wantActionError(e.t, err, agency.ErrPermissionDenied, agency.TypePermissionDenied)
	}
	if names := helpNames(call[helpMap](e, w1, target.ID(), agency.HelpAction, nil)); !slices.Equal(names, []string{"op"}) {
		e.t.Errorf("%s's help lists %v, want [op]", w1.ID(), names)
	}
	if names := helpNames(call[helpMap](e, boss, target.ID(), agency.HelpAction, nil)); len(names) != 0 {
		e.t.Errorf("%s's help lists %v, want nothing", boss.ID(), names)
	}
	if n := ran.Load(); n != 1 {
		e.t.Errorf("handler ran %d times, want 1", n)
	}
}
