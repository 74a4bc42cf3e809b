package plan

import (
	"context"
	"errors"

	"github.com/seed72275b23/agency-go/agency"
)

// Errors a Client's calls return for a request the coordinator refused;
// test with errors.Is. The error's text says why.
var (
	// ErrNotFound: no such plan, session or step for this user.
	ErrNotFound = errors.New("plan: not found")
	// ErrConflict: the plan or step is not in a state that allows it.
	ErrConflict = errors.New("plan: conflict")
)

// Refusal is the error of a request the coordinator refused.
type Refusal struct {
	Receipt Receipt
}

func (r *Refusal) Error() string { return r.Receipt.Status }

// Is makes a Refusal match ErrNotFound or ErrConflict.
func (r *Refusal) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return r.Receipt.Refused == RefusedNotFound
	case ErrConflict:
		return r.Receipt.Refused == RefusedConflict
	}
	return false
}

// Client calls a coordinator's front actions from an agent that speaks for
// people (an approver: see Approver), such as an HTTP gateway. Errors of
// the space come back as they are: agency.ErrNoRecipient when the
// coordinator is not in the space, a timeout when it does not answer in
// time (the context's deadline bounds each call).
type Client struct {
	From        *agency.Agent // an approver, in the coordinator's space
	Coordinator string        // the coordinator's id
}

func call[R any](ctx context.Context, c Client, action string, args any) (R, error) {
	return agency.Call[R](ctx, c.From, c.Coordinator, action, args)
}

func refused(r Receipt, err error) (Receipt, error) {
	if err == nil && r.Refused != "" {
		return r, &Refusal{Receipt: r}
	}
	return r, err
}

// InputTask asks for a plan for a task.
func (c Client) InputTask(ctx context.Context, t InputTask) (Receipt, error) {
	return refused(call[Receipt](ctx, c, "input_task", t))
}

// HumanFeedback approves or rejects one step.
func (c Client) HumanFeedback(ctx context.Context, f Feedback) (Receipt, error) {
	return refused(call[Receipt](ctx, c, "human_feedback", f))
}

// Approve approves or rejects one step, or every step that has not run.
func (c Client) Approve(ctx context.Context, f Feedback) (Receipt, error) {
	return refused(call[Receipt](ctx, c, "approve_step_or_steps", f))
}

// Clarify answers the planner's question.
func (c Client) Clarify(ctx context.Context, q Clarification) (Receipt, error) {
	return refused(call[Receipt](ctx, c, "human_clarification_on_plan", q))
}

// Plans returns the user's plans that q selects, newest first; none is an
// empty list.
func (c Client) Plans(ctx context.Context, q PlanQuery) ([]View, error) {
	return call[[]View](ctx, c, "plans", q)
}

// Messages returns the log of the user's session, oldest first, or
// ErrNotFound when the user has no plan in that session.
func (c Client) Messages(ctx context.Context, q MessageQuery) ([]Message, error) {
	l, err := call[MessageList](ctx, c, "agent_messages", q)
	if err == nil && !l.Found {
		return nil, &Refusal{Receipt{Status: "Session not found", Refused: RefusedNotFound}}
	}
	return l.Messages, err
}

// Documents returns every document of the user.
func (c Client) Documents(ctx context.Context, user string) (Documents, error) {
	return call[Documents](ctx, c, "documents", UserQuery{UserID: user})
}

// Delete deletes every document of the user.
func (c Client) Delete(ctx context.Context, user string) (Deleted, error) {
	return call[Deleted](ctx, c, "delete_documents", UserQuery{UserID: user})
}

// Tools returns the actions steps may use.
func (c Client) Tools(ctx context.Context, user string) ([]Tool, error) {
	return call[[]Tool](ctx, c, "agent_tools", UserQuery{UserID: user})
}
