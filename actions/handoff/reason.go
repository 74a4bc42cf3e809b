package handoff

import (
	"errors"
	"strings"
)

// Reason is why a handoff was not made, not taken over, given back or
// dropped. It is an error: what a Policy refuses with, and an Event's Err,
// wrap one, so errors.Is(err, handoff.ErrLoopLimit) tells them apart and
// errors.As(err, &r) reads it. Its text starts the refusal's, which is
// what a model reads ("loop_limit: …; answer the user instead").
type Reason string

func (r Reason) Error() string { return string(r) }

// The reasons.
const (
	// ErrLoopLimit: the hop budget or ping-pong detection stopped the
	// handoff.
	ErrLoopLimit Reason = "loop_limit"
	// ErrNotHolder: the agent does not hold the conversation (any more),
	// or it is the target itself.
	ErrNotHolder Reason = "not_holder"
	// ErrMovedOn: the receiver's store knows the conversation went on
	// without this handoff (it is stale, or another agent took it): the
	// sender does not take it back.
	ErrMovedOn Reason = "moved_on"
	// ErrRefused: the receiver refused the handoff for good (its access
	// policy, no handoff action, a bad Transfer): the sender holds the
	// conversation again.
	ErrRefused Reason = "refused"
	// ErrNoRecipient: the receiver was not in the space for AbsentWait:
	// the sender holds the conversation again.
	ErrNoRecipient Reason = "no_recipient"
	// ErrRevoked: a dispatcher's handoff whose target the dispatcher no
	// longer authorizes.
	ErrRevoked Reason = "revoked"
	// ErrNoTarget: the target cannot be resolved (Back with nobody to go
	// back to, a kind that hands nothing over).
	ErrNoTarget Reason = "no_target"
)

var reasons = []Reason{ErrLoopLimit, ErrNotHolder, ErrMovedOn, ErrRefused, ErrNoRecipient, ErrRevoked, ErrNoTarget}

// reasonIn reads the Reason that starts an error's text: how a refusal
// that crossed the wire (an [error]'s text) is told apart again.
func reasonIn(text string) (Reason, bool) {
	for _, r := range reasons {
		if strings.HasPrefix(text, string(r)+": ") {
			return r, true
		}
	}
	return "", false
}

// reasonOf returns the Reason an error wraps, or "".
func reasonOf(err error) Reason {
	var r Reason
	if errors.As(err, &r) {
		return r
	}
	return ""
}
