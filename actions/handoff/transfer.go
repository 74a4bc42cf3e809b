package handoff

import (
	"context"
	"fmt"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
)

// Action is the name of the action through which an agent takes over a
// conversation. Its argument is a Transfer.
const Action = "handoff"

// Transfer is the argument of the handoff action: what moves with a
// conversation from one agent to the next. It is JSON on the wire, so a
// handoff crosses processes on a broker unchanged.
type Transfer struct {
	Conversation string `json:"conversation" validate:"required" jsonschema:"description=the conversation handed over"`
	User         string `json:"user" validate:"required" jsonschema:"description=the agent that speaks for the user: answers go to it"`
	// Owner is who the conversation belongs to, when not User (a trusted
	// relay's user): the receiver keeps it under
	// openai.ConversationKey(Owner, Conversation).
	Owner string `json:"owner,omitempty" jsonschema:"description=who the conversation belongs to, when not user"`
	// ReplyTo is the id of the user's message that the receiver's answer
	// answers (its __meta__.in_reply_to): a user agent takes an answer to
	// its own message as the word of the conversation's new holder.
	ReplyTo string `json:"reply_to,omitempty" jsonschema:"description=the user's message the answer answers"`
	// Name is the handoff that fired: a transfer tool's name, or the kind
	// of rule (on_context, after_work, reply).
	Name string `json:"name,omitempty" jsonschema:"description=the handoff that fired"`
	// Message is the handoff's message: what the transfer tool's caller
	// read as its result, and what a person who takes over is told.
	Message string `json:"message,omitempty" validate:"max=4096" jsonschema:"description=the handoff's message"`
	// Call is the id of the tool call that made the handoff, when a model
	// made it: the receiver keeps that call in its history.
	Call string `json:"call,omitempty" jsonschema:"description=the tool call that made the handoff"`
	// Vars are the conversation's variables, Version the version of the
	// conversation they belong to.
	Vars    Vars  `json:"vars,omitempty" jsonschema:"description=the context variables"`
	Version int64 `json:"version,omitempty" validate:"min=0" jsonschema:"description=the version of the conversation at the handoff"`
	// Hops counts the handoffs since the user's last message, and Path
	// names the agents that made them, oldest first.
	Hops int      `json:"hops,omitempty" validate:"min=0" jsonschema:"description=handoffs since the user's last message"`
	Path []string `json:"path,omitempty" jsonschema:"description=the agents that handed the conversation on since the user's last message"`
	// History is the conversation as the agent that handed it over had it.
	History []openai.Message `json:"history,omitempty" jsonschema:"description=the conversation so far"`
}

// owner returns who the conversation belongs to.
func (t Transfer) owner() string {
	if t.Owner != "" {
		return t.Owner
	}
	return t.User
}

// Accept registers the handoff action on a, which must not be in a space
// yet: run is called with each Transfer that reaches it, once the sender
// has been answered that the handoff arrived. Only the agents
// named in from may call it (agency.AccessBySender, every other sender
// Denied), so help hides the action from every other agent, and a model
// never sees a target it may not use. An error from run is the caller's
// action_failed.
//
// Accept is the bare primitive, for an agent of your own; an LLM agent
// takes handoffs through Policy.Serve, a person through Team.Human, which
// also keep one holder per conversation.
func Accept(a *agency.Agent, run func(ctx context.Context, t Transfer) error, from ...string) error {
	if len(from) == 0 {
		return fmt.Errorf("handoff: Accept on %q: name the agents that may hand over to it", a.ID())
	}
	policy := make(map[string]agency.Access, len(from))
	for _, id := range from {
		policy[id] = agency.Permitted
	}
	return accept(a, nil, run, agency.AccessBySender(policy, agency.Denied))
}

// accept registers the handoff action: check (if any) decides whether a
// takes the conversation over; then the sender is answered at once (its
// relay waits for that), and run runs.
func accept(a *agency.Agent, check, run func(ctx context.Context, t Transfer) error, access agency.ActionOption) error {
	return agency.Register(a, Action, func(ctx context.Context, t Transfer) (string, error) {
		if check != nil {
			if err := check(ctx, t); err != nil {
				return "", err
			}
		}
		accepted := "accepted by " + a.ID()
		if err := agency.Respond(ctx, accepted); err != nil {
			return "", err
		}
		if err := run(ctx, t); err != nil {
			return "", err
		}
		return accepted, nil
	}, access,
		agency.Describe("Hand the conversation over to "+a.ID()+": it takes over and answers the user."),
		agency.Returns("that the conversation was taken over"))
}
