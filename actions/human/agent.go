package human

import (
	"context"
	"errors"

	"github.com/seed72275b23/agency-go/agency"
)

// SayArgs are the arguments of say: the shape of every say in the space.
type SayArgs struct {
	Content string `json:"content" validate:"min=1" jsonschema:"description=what to say"`
}

// The __meta__ keys a say reads and writes, as the LLM agents of
// actions/openai do.
const (
	metaConversation = "conversation" // the conversation a message belongs to
	metaReply        = "in_reply_to"  // a say that answers the message with this id: answered only by value
	metaToolCall     = "tool_call_id" // a say made for a model's tool call: answered only by value
	metaFinal        = "final"        // the last answer of a conversation
	metaHandedTo     = "handed_to"    // an answer after which another agent holds the conversation, and answers next
)

// conversationOf returns the conversation a message belongs to: its
// __meta__.conversation, or its sender's id.
func conversationOf(m *agency.Message) string {
	if c, ok := m.Meta[metaConversation].(string); ok && c != "" {
		return c
	}
	return m.From
}

// Agent is a person as an agent. Its action say shows the person what
// another agent says, as a question, and answers with what the person
// replies: with a say back to the sender (carrying the conversation and
// __meta__.in_reply_to), and as the action's value. A say that carries
// __meta__.in_reply_to or __meta__.tool_call_id is answered only as the
// value, as an LLM agent's is, so that a model can call a person as a
// tool.
//
// The agent handles one message at a time, as a person does.
type Agent struct {
	agent *agency.Agent
	front Front
}

// New returns the agent of the person that f reaches, with the given id and
// agent options, not yet in a space.
func New(id string, f Front, opts ...agency.Option) (*Agent, error) {
	if f == nil {
		return nil, errors.New("human: New needs a Front")
	}
	ag, err := agency.NewAgent(id, opts...)
	if err != nil {
		return nil, err
	}
	a := &Agent{agent: ag, front: f}
	if err := agency.Register(ag, "say", a.say,
		agency.Describe("Say something to "+id+", a person, who reads it and answers; the answer is said back to you and returned."),
		agency.Returns("what the person answered"),
		agency.Example(SayArgs{Content: "Could you take over this customer?"}),
	); err != nil {
		return nil, err
	}
	return a, nil
}

// Agent returns the agent to add to a space.
func (a *Agent) Agent() *agency.Agent { return a.agent }

func (a *Agent) say(ctx context.Context, args SayArgs) (string, error) {
	m := agency.MessageFrom(ctx)
	conv := conversationOf(m)
	answer, err := a.front.Ask(ctx, Line{Conversation: conv, Owner: m.From, From: m.From, Text: args.Content})
	if err != nil {
		return "", err
	}
	_, answered := m.Meta[metaReply]
	_, asTool := m.Meta[metaToolCall]
	if !answered && !asTool {
		// The answer is the action's value too: a sender that cannot be
		// told any more is gone, and nobody reads the value either.
		_ = a.tell(ctx, m.From, conv, m.ID, answer)
	}
	return answer, nil
}

// tell says text to the agent to in a conversation.
func (a *Agent) tell(ctx context.Context, to, conv, replyTo, text string) error {
	meta := map[string]any{metaConversation: conv}
	if replyTo != "" {
		meta[metaReply] = replyTo
	}
	_, err := a.agent.SendMessage(ctx, &agency.Message{To: to, Meta: meta, Action: "say", Args: SayArgs{Content: text}})
	return err
}

// Handover is a conversation handed to a person (see [Agent.Take]).
type Handover struct {
	Conversation string
	// Owner is who the conversation belongs to (default User).
	Owner string
	// User is the agent that speaks for the user: the answer goes to it.
	User string
	// ReplyTo is the id of the user's message the answer answers, sent
	// as __meta__.in_reply_to (default: the message being handled): a
	// [User] takes an answer to its own message as the word of the
	// conversation's new holder.
	ReplyTo string
	// History is what the person is shown first.
	History []Line
}

// Take hands a conversation to the person: it shows them h.History, asks
// for their answer, and says that to h.User in the conversation. It
// returns the answer. A handoff that reaches a person ends here; the
// user's next lines come to the say action.
func (a *Agent) Take(ctx context.Context, h Handover) (string, error) {
	if h.Conversation == "" || h.User == "" {
		return "", errors.New("human: Take needs a conversation and a user")
	}
	owner := h.Owner
	if owner == "" {
		owner = h.User
	}
	for _, l := range h.History {
		l.Conversation, l.Owner = h.Conversation, owner
		if err := a.front.Show(ctx, l); err != nil {
			return "", err
		}
	}
	answer, err := a.front.Ask(ctx, Line{Conversation: h.Conversation, Owner: owner, From: h.User})
	if err != nil {
		return "", err
	}
	replyTo := h.ReplyTo
	if m := agency.MessageFrom(ctx); m != nil && replyTo == "" {
		replyTo = m.ID
	}
	return answer, a.tell(ctx, h.User, h.Conversation, replyTo, answer)
}
