package agency

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
)

// Approve has f decide each call of the action whose access is Requested.
// f runs after the arguments have been decoded and validated (a call with
// bad arguments is invalid_args and never reaches it), with the typed
// arguments the handler would get, and with the incoming message in ctx:
// MessageFrom(ctx).From is the caller. It returns true to let the handler
// run, false to refuse (permission_denied). An error refuses too: an
// *ActionError (PermissionDeniedf, ActionFailedf, …) reaches the caller as it
// is, any other error as permission_denied with its text. A panic in f
// refuses.
//
// f runs on the agent's goroutine and may take as long as a human needs
// (ask one through another agent with Call: responses never wait behind the
// agent's queue). It should give up when ctx is done.
//
// Without an access option, Approve makes the action's access Requested for
// every caller. With one (AccessBySender, AccessFunc), f decides the calls
// that the policy says are Requested. Register fails when the policy can
// never ask (AccessForAll(Permitted), say) or when f's argument type is not
// the action's.
//
// The order, for a call whose access is Requested: the action's approver if
// it has one, otherwise the agent's PermissionRequester hooks (which see the
// message before its arguments are decoded), otherwise it is denied.
func Approve[A any](f func(ctx context.Context, args A) (bool, error)) ActionOption {
	return func(c *actionConfig) error {
		if c.approver != nil {
			return fmt.Errorf("%w: Approve given twice", ErrInvalidOption)
		}
		if f == nil {
			return fmt.Errorf("%w: Approve(nil)", ErrInvalidOption)
		}
		c.approver = approverOf[A]{f}
		return nil
	}
}

// approverOf holds an approver with its argument type, for Register to
// check against the action's.
type approverOf[A any] struct {
	f func(context.Context, A) (bool, error)
}

func (approverOf[A]) argType() reflect.Type { return reflect.TypeFor[A]() }

// approval decodes and validates an incoming call's arguments, asks the
// action's approver and returns the handler's call, or the error its caller
// gets instead.
type approval func(ctx context.Context, m *Message) (run func() (any, error), ae *ActionError)

// setUpApproval checks act's access against the ways the agent has to
// approve a requested call, and makes act's approval when it has an
// approver. It is called by Register, which knows A and R.
func setUpApproval[A, R any](a *Agent, act *action, h func(context.Context, A) (R, error)) error {
	switch ap := act.cfg.approver.(type) {
	case nil:
		if act.cfg.policy.requests() == always && !a.hooks.hasPermission() {
			return errors.New("its access is Requested but nothing approves a call: give agency.Approve, or a PermissionRequester with agency.Hooks")
		}
		return nil
	case approverOf[A]:
		if !act.cfg.policySet {
			act.cfg.policy, act.cfg.policySet = policy{static: Requested}, true
		} else if act.cfg.policy.requests() == never {
			return errors.New("Approve is given but the access policy never asks for approval")
		}
		act.cfg.approve = approvalFor(a, act, ap.f, h)
		return nil
	default:
		return fmt.Errorf("Approve takes %v, but the action's arguments are %v", act.cfg.approver.argType(), reflect.TypeFor[A]())
	}
}

func approvalFor[A, R any](a *Agent, act *action, approve func(context.Context, A) (bool, error), h func(context.Context, A) (R, error)) approval {
	return func(ctx context.Context, m *Message) (run func() (any, error), ae *ActionError) {
		var args A
		if err := decodeArgs(act.args, m.Args, &args); err != nil {
			return nil, invalidArgsError(a, act.name, err)
		}
		denied := func(cause error, detail string) *ActionError {
			return newActionError(TypePermissionDenied, cause, "%q not permitted for %q%s", a.id+"."+act.name, m.From, detail)
		}
		ok, err := func() (ok bool, err error) {
			defer func() {
				if p := recover(); p != nil {
					a.logger.Error("agency: approver panicked", "agent", a.id, "action", act.name, "panic", p, "stack", string(debug.Stack()))
					ok, err = false, nil
				}
			}()
			return approve(ctx, args)
		}()
		switch {
		case err != nil:
			var typed *ActionError
			if errors.As(err, &typed) {
				return nil, typed
			}
			return nil, denied(err, ": "+err.Error())
		case !ok:
			return nil, denied(nil, "")
		}
		return func() (any, error) { return h(ctx, args) }, nil
	}
}

// How often an access policy answers Requested.
const (
	never = iota
	sometimes
	always // for some caller, surely
)

// requests tells whether p can answer Requested: always means for some
// caller it surely does; an AccessFunc may or may not.
func (p *policy) requests() int {
	switch {
	case p.fn != nil:
		return sometimes
	case p.static == Requested:
		return always
	}
	for _, a := range p.bySender {
		if a == Requested {
			return always
		}
	}
	for _, r := range p.patterns {
		if r.access == Requested {
			return always
		}
	}
	return never
}
