package agency

import (
	"errors"
	"fmt"
)

// What a handler returns to fail a call with a given error type: each
// constructor is named after the sentinel errors.Is matches. The text is
// exactly what the caller reads in ActionError.Text (its Error() puts the
// type in front: "invalid_args: quantity must be at least 1"), up to the
// bound on every error's text: 4 KiB, past which the caller reads the
// text's start, ending in "…" (the handler's side, an AfterAction hook
// included, keeps it whole). The framework's own errors about bad input
// also name at most 10 problems; a handler's text is its own to keep
// short. errors.Is matches the type's sentinel, on the handler's side and
// on the caller's, in any space:
//
//	if args.Quantity < 1 {
//		return 0, agency.InvalidArgsf("quantity must be at least 1, not %d", args.Quantity)
//	}
//
// The format and its arguments are those of fmt.Errorf: an error given with
// %w stays reachable through errors.Is and errors.As where the handler
// runs (the caller, possibly in another process, gets the text only).

// InvalidArgsf returns an invalid_args error (errors.Is matches
// ErrInvalidArgs): the arguments were well-formed but the handler cannot
// accept them. Say which argument and what would be accepted, within 4 KiB
// (the caller reads no more).
func InvalidArgsf(format string, args ...any) error {
	return handlerError(TypeInvalidArgs, fmt.Errorf(format, args...))
}

// PermissionDeniedf returns a permission_denied error (errors.Is matches
// ErrPermissionDenied): the caller may not do this, for a reason the
// handler found. The caller reads at most 4 KiB of the text.
func PermissionDeniedf(format string, args ...any) error {
	return handlerError(TypePermissionDenied, fmt.Errorf(format, args...))
}

// ActionFailedf returns an action_failed error (errors.Is matches
// ErrActionFailed): the action could not be done. Any other error a handler
// returns is action_failed too; ActionFailedf lets the text be exactly what
// the caller should read, up to 4 KiB.
func ActionFailedf(format string, args ...any) error {
	return handlerError(TypeActionFailed, fmt.Errorf(format, args...))
}

// handlerError makes err, built by fmt.Errorf in the caller (so that go vet
// checks the format of each constructor's call), the error of type t.
func handlerError(t ErrorType, err error) error {
	ae := &ActionError{Type: t, Text: err.Error()}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		ae.cause = err // the %w operands, for errors.Is on this side
	}
	return ae
}

// trimSentinel removes the text of t's sentinel from the front of the text
// of err, which wraps it: fmt.Errorf("%w: no such order", ErrInvalidArgs)
// reads "no such order" to the caller, not "agency: invalid arguments: no
// such order" behind the type.
func trimSentinel(t ErrorType, err error) string {
	text := err.Error()
	prefix := t.sentinel().Error() + ": "
	if len(text) > len(prefix) && text[:len(prefix)] == prefix && errors.Is(err, t.sentinel()) {
		return text[len(prefix):]
	}
	return text
}
