package handoff

import (
	"encoding/json"
	"fmt"
)

// Target is where a conversation goes next: to an agent, back to the
// agent that handed it over, to the user, nowhere (the agent goes on), or
// to its end. Make one with To, Back, RevertToUser, Stay or Terminate.
type Target struct {
	Kind  TargetKind `json:"kind"`            // one of the Kind constants
	Agent string     `json:"agent,omitempty"` // for KindAgent
}

// TargetKind is the kind of a Target.
type TargetKind string

// The kinds of Target.
const (
	KindAgent     TargetKind = "agent"     // hand the conversation to Target.Agent
	KindBack      TargetKind = "back"      // hand it back to the agent that handed it over last
	KindUser      TargetKind = "user"      // answer the user; the agent keeps the conversation
	KindStay      TargetKind = "stay"      // call the model again
	KindTerminate TargetKind = "terminate" // answer the user with __meta__.final and close the conversation
)

// To hands the conversation to the agent with the given id.
func To(agent string) Target { return Target{Kind: KindAgent, Agent: agent} }

// Back hands the conversation back to the agent that handed it over last
// since the user's last message: return to the caller.
func Back() Target { return Target{Kind: KindBack} }

// RevertToUser has the answer go to the user, and the agent keep the
// conversation: the user's next message comes to it. It is the default
// after-work.
func RevertToUser() Target { return Target{Kind: KindUser} }

// Stay has the model called again at once, after the answer is said
// (it counts against the agent's MaxSteps).
func Stay() Target { return Target{Kind: KindStay} }

// Terminate has the answer go to the user with __meta__.final: true, and
// closes the conversation.
func Terminate() Target { return Target{Kind: KindTerminate} }

// IsZero reports whether t is the zero Target, which means "not set".
func (t Target) IsZero() bool { return t == Target{} }

// String returns the target as it reads in events and errors: the agent's
// id, or the kind.
func (t Target) String() string {
	if t.Kind == KindAgent {
		return t.Agent
	}
	return string(t.Kind)
}

// valid reports what is wrong with t.
func (t Target) valid() error {
	switch t.Kind {
	case KindAgent:
		if t.Agent == "" {
			return fmt.Errorf("handoff: To(\"\"): name an agent")
		}
	case KindBack, KindUser, KindStay, KindTerminate:
		if t.Agent != "" {
			return fmt.Errorf("handoff: a %s target names no agent", t.Kind)
		}
	default:
		return fmt.Errorf("handoff: unknown target kind %q", t.Kind)
	}
	return nil
}

// moves reports whether t hands the conversation to another agent.
func (t Target) moves() bool { return t.Kind == KindAgent || t.Kind == KindBack }

// Reply is what a tool returns to steer the conversation, as AG2's
// ReplyResult and Swarm's Result do: Value is what the model reads as the
// tool's result, Set changes context variables (the conversation's version
// grows by one), and Goto, when set, says where the conversation goes once
// the tool's result is recorded.
//
//	return handoff.Reply{Value: "verified", Goto: handoff.To("CustomerServiceRep"),
//		Set: handoff.Vars{"passport_number": p.Number, "logged_in": true}}, nil
//
// An action returns it as its value; an LLM agent with a Policy reads it
// from the response, in this process or across a broker (it travels as
// JSON with "$kind": "handoff.reply"). With Goto, RevertToUser and
// Terminate the Value (a string as it is, anything else as JSON) is said
// to the user as the answer.
type Reply struct {
	Value any
	Goto  Target
	Set   Vars
}

// replyKind marks a Reply on the wire.
const replyKind = "handoff.reply"

type replyJSON struct {
	Kind  string          `json:"$kind"`
	Value json.RawMessage `json:"value"`
	Goto  *Target         `json:"goto,omitempty"`
	Set   Vars            `json:"set,omitempty"`
}

// MarshalJSON encodes r as {"$kind": "handoff.reply", "value": …,
// "goto": …, "set": …}.
func (r Reply) MarshalJSON() ([]byte, error) {
	v, err := json.Marshal(r.Value)
	if err != nil {
		return nil, err
	}
	out := replyJSON{Kind: replyKind, Value: v, Set: r.Set}
	if !r.Goto.IsZero() {
		g := r.Goto
		out.Goto = &g
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes what MarshalJSON encodes; Value becomes what JSON
// decodes into an any.
func (r *Reply) UnmarshalJSON(b []byte) error {
	var in replyJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	if in.Kind != replyKind {
		return fmt.Errorf("handoff: not a reply: $kind %q", in.Kind)
	}
	*r = Reply{Set: in.Set}
	if in.Goto != nil {
		r.Goto = *in.Goto
	}
	if len(in.Value) > 0 {
		if err := json.Unmarshal(in.Value, &r.Value); err != nil {
			return err
		}
	}
	return nil
}

// parseReply reads a tool's result as a Reply; ok is false for any other
// result.
func parseReply(content string) (r replyJSON, ok bool) {
	if len(content) < 2 || content[0] != '{' {
		return r, false
	}
	if json.Unmarshal([]byte(content), &r) != nil || r.Kind != replyKind {
		return r, false
	}
	return r, true
}

// text is a value as the user reads it: a string as it is, else its JSON.
func text(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
