package planhttp

import (
	"context"
	"errors"

	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/internal/front"
	"github.com/seed72275b23/agency-go/agency"
)

// Errors of the calls the coordinator refused; the error's text says why.
var (
	errNotFound = errors.New("planhttp: not found") // no such plan, session or step for this user
	errConflict = errors.New("planhttp: conflict")  // the plan or step is not in a state that allows it
	errBusy     = errors.New("planhttp: busy")      // the coordinator serves as many watches as it may
)

// refusal is the error of a request the coordinator refused.
type refusal struct{ r front.Receipt }

func (e *refusal) Error() string { return e.r.Status }

// Is makes a refusal match errNotFound, errConflict or errBusy.
func (e *refusal) Is(target error) bool {
	switch target {
	case errNotFound:
		return e.r.Refused == front.RefusedNotFound
	case errConflict:
		return e.r.Refused == front.RefusedConflict
	case errBusy:
		return e.r.Refused == front.RefusedBusy
	}
	return false
}

// client calls the coordinator's front actions through the gateway agent,
// an approver. Errors of the space come back as they are:
// agency.ErrNoRecipient when the coordinator is not in the space, a
// timeout when it does not answer in time.
type client struct {
	from        *agency.Agent
	coordinator string
}

// call calls action with args and returns its value, or for a receipt
// that says the coordinator refused, a refusal.
func call[R any](ctx context.Context, c client, action string, args any) (R, error) {
	v, err := agency.Call[R](ctx, c.from, c.coordinator, action, args)
	if r, ok := any(v).(front.Receipt); ok && err == nil && r.Refused != "" {
		return v, &refusal{r}
	}
	return v, err
}

// messages returns the log of the user's session, oldest first, or
// errNotFound when the user has no plan in that session.
func (c client) messages(ctx context.Context, q front.MessageQuery) ([]plan.Message, error) {
	// The coordinator's answer: found, and the messages.
	l, err := call[struct {
		Found    bool           `json:"found"`
		Messages []plan.Message `json:"messages"`
	}](ctx, c, "agent_messages", q)
	if err == nil && !l.Found {
		return nil, &refusal{front.Receipt{Status: "Session not found", Refused: front.RefusedNotFound}}
	}
	return l.Messages, err
}
