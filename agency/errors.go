package agency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors callers branch on. An [error] received from another agent turns back
// into the matching sentinel: errors.Is(err, ErrPermissionDenied) holds for an
// *ActionError of type "permission_denied".
var (
	ErrNotFound         = errors.New("agency: action not found")
	ErrPermissionDenied = errors.New("agency: permission denied")
	ErrInvalidArgs      = errors.New("agency: invalid arguments")
	ErrActionFailed     = errors.New("agency: action failed")
	ErrTimeout          = errors.New("agency: request timed out")
	// ErrResponseTooLarge is the error of a request whose response was over
	// the space's message size limit: the caller gets it at once, its text
	// naming the response's size and the limit, instead of waiting for a
	// response that cannot be sent.
	ErrResponseTooLarge = errors.New("agency: response too large")

	// ErrMessageTooLarge is returned by a space for a message whose
	// encoding is over its size limit (amqpspace's Config.MaxMessageSize,
	// space.Local's MaxMessageSize): the message is not sent, and the
	// error's text names its size and the limit.
	ErrMessageTooLarge = errors.New("agency: message exceeds the size limit")

	// ErrNoRecipient is returned by Request when the space can tell that no
	// agent has the recipient id. Send never returns it.
	ErrNoRecipient = errors.New("agency: no such recipient")
	// ErrForgedSender is returned when a message's From names another agent.
	ErrForgedSender = errors.New("agency: message from another agent's id")
	// ErrNotAdded is returned by an agent's messaging methods while it is in
	// no space.
	ErrNotAdded = errors.New("agency: agent is not in a space")
	// ErrAlreadyAdded is returned by driver.Connect for an agent that is in a space.
	ErrAlreadyAdded = errors.New("agency: agent is already in a space")

	ErrInvalidID         = errors.New("agency: invalid agent id")
	ErrInvalidActionName = errors.New("agency: invalid action name")
	ErrMalformedMessage  = errors.New("agency: malformed message")
	ErrInvalidOption     = errors.New("agency: invalid option")
)

// ErrorType is the "type" of an [error] message.
type ErrorType string

// The error types of the wire format, the values of ActionError.Type. Each
// matches, under errors.Is, the sentinel of the same name after Err:
// TypeNotFound matches ErrNotFound.
const (
	TypeNotFound         ErrorType = "not_found"
	TypePermissionDenied ErrorType = "permission_denied"
	TypeInvalidArgs      ErrorType = "invalid_args"
	TypeActionFailed     ErrorType = "action_failed"
	TypeTimeout          ErrorType = "timeout"
	TypeResponseTooLarge ErrorType = "response_too_large"
)

func (t ErrorType) sentinel() error {
	switch t {
	case TypeNotFound:
		return ErrNotFound
	case TypePermissionDenied:
		return ErrPermissionDenied
	case TypeInvalidArgs:
		return ErrInvalidArgs
	case TypeTimeout:
		return ErrTimeout
	case TypeResponseTooLarge:
		return ErrResponseTooLarge
	default:
		return ErrActionFailed
	}
}

// ActionError is the error an action's caller receives: the payload of an
// [error] message. It matches the sentinel of its type under errors.Is, and
// unwraps to the local cause where there is one (a context error for a
// timeout, the handler's error on the agent that ran it). The text the
// framework sends is at most 4 KiB, cut if need be; about bad input it
// names at most the first 10 problems, and how many more there are.
type ActionError struct {
	Type ErrorType // one of the Type* constants
	Text string    // what went wrong and how to call correctly

	cause error
}

// Error returns the text, prefixed with its type.
func (e *ActionError) Error() string {
	return string(e.Type) + ": " + e.Text
}

// Is reports whether target is the sentinel for e's type.
func (e *ActionError) Is(target error) bool {
	return target == e.Type.sentinel()
}

// Unwrap returns the local cause, if any.
func (e *ActionError) Unwrap() error { return e.cause }

func newActionError(t ErrorType, cause error, format string, args ...any) *ActionError {
	return &ActionError{Type: t, Text: fmt.Sprintf(format, args...), cause: cause}
}

// asActionError turns what a handler returned into the error its caller sees.
// A handler may return an *ActionError (or wrap one) to choose the type;
// anything else is action_failed.
func asActionError(err error) *ActionError {
	var ae *ActionError
	if errors.As(err, &ae) {
		return ae
	}
	for _, t := range []ErrorType{TypeNotFound, TypePermissionDenied, TypeInvalidArgs, TypeTimeout, TypeResponseTooLarge} {
		if errors.Is(err, t.sentinel()) {
			return &ActionError{Type: t, Text: trimSentinel(t, err), cause: err}
		}
	}
	return &ActionError{Type: TypeActionFailed, Text: trimSentinel(TypeActionFailed, err), cause: err}
}

// requestError maps a context's end to the error Request returns: a deadline
// is a timeout, a cancellation is the context's own error.
func requestError(ctx context.Context, to, action string) error {
	err := ctx.Err()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		// nil: the deadline has passed, and the context's timer has yet
		// to say so.
		return newActionError(TypeTimeout, context.DeadlineExceeded, "no response from %q to %q before the deadline", to, action)
	}
	return err
}

// expired reports whether ctx has ended or its deadline has passed, even
// when the context's own timer has not fired yet.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) <= 0 // Until reads only the monotonic clock when dl has it
}
