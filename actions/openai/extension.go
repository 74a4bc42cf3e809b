package openai

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/seed72275b23/agency-go/agency"
)

// Extension steers the turns of an agent from outside it: handoffs, plans
// and guards are written as extensions rather than inside the agent. Every
// field is optional; the agent calls the ones set, for every turn, in the
// order the extensions were given to [Extend]. The hooks of one turn run
// one after the other on the turn's goroutine; those of different
// conversations run concurrently. A hook that returns an error ends the
// turn as a failed one (the partner hears "Sorry, …").
type Extension struct {
	// Before runs before every model call of a turn. It may change the
	// call (its system prompt, the extension's own tools, the parameters,
	// the meta of the tool requests its reply will make), or end the turn
	// with t.End, and then the model is not called.
	Before func(ctx context.Context, t *Turn, r *Request) error

	// Call runs a call of one of the tools this extension's Before added.
	// Its result is what the model reads; an error reads "error: " and the
	// error's text. It may end the turn with t.End: the other calls of the
	// same reply still get their results, and then the turn ends.
	Call func(ctx context.Context, t *Turn, c ToolCall) (string, error)

	// Result sees the result of every call of a catalog tool (an action of
	// another agent) before the model reads it. It may change r.Content,
	// and end the turn with t.End.
	Result func(ctx context.Context, t *Turn, r *Result) error

	// Answer sees the model's text answer before it is said to the
	// partner. It may change the text, add __meta__ keys to the say, have
	// the model called again after it is said, or end the turn with t.End
	// to run a function once it is said (a handoff after the answer).
	Answer func(ctx context.Context, t *Turn, a *Answer) error

	// Added runs when the agent has joined a space, before it handles any
	// message (see agency.AfterAdder): the place to start what the
	// extension runs beside the agent.
	Added func(ctx context.Context)

	// Removing runs when the agent is about to leave its space, while it
	// can still send and before the turns under way are drained (see
	// agency.BeforeRemover): the place to stop what Added started.
	Removing func(ctx context.Context)
}

// Turn is what the hooks of an [Extension] see of the turn being run. Its
// fields are read-only for them.
type Turn struct {
	// Conversation is the id of the conversation: the say's
	// __meta__.conversation, or its sender's id when it has none.
	Conversation string
	// Owner is who the conversation belongs to: the agent that started it
	// (the sender of its first say), or the one a trusted relay spoke for
	// (see [Relays]). The agent keeps the conversation under
	// [ConversationKey](Owner, Conversation).
	Owner string
	// Partner is the agent that gets the answer.
	Partner string
	// History is the conversation as the next model call sends it (but the
	// system prompt): what the memory held when the turn started, and what
	// the turn added since.
	History []Message
	// Step is the number of model calls made so far in the turn.
	Step int
	// Data is the Continuation's Data for a turn that Agent.Continue runs
	// (what came with a conversation handed over); nil for a say's turn.
	Data any

	agent *agency.Agent
	llm   *Agent // nil for a Turn made outside an Agent
	// id is the id of the message that asked: the turn's tool calls'
	// idempotency keys start with it.
	id string
	// pending is the turn as its Journal holds it (nil without one);
	// resumed is set until a resumed turn's first step.
	pending *PendingTurn
	resumed bool
	ended   bool
	spoke   bool // a reply's text was given to the caller as parts
	then    []func(context.Context, *Turn)
}

// End ends the turn once the current step is done: no further model call
// is made, and no answer is said unless the step was the answer itself.
// then, if not nil, runs after the step's messages are in the history and
// the memory (and, for an answer, after it is said), with the turn: the
// place to hand the conversation on. End may be called more than once;
// each then runs, in order.
func (t *Turn) End(then func(ctx context.Context, t *Turn)) {
	t.ended = true
	if then != nil {
		t.then = append(t.then, then)
	}
}

// Ended reports whether a hook has ended the turn: a second handoff in
// one reply is refused by looking here.
func (t *Turn) Ended() bool { return t.ended }

// Agent returns the agent running the turn, for sending messages.
func (t *Turn) Agent() *agency.Agent { return t.agent }

// Record adds msgs at the end of the conversation's history, in the
// agent's Memory and in t.History: for a function given to End that tells
// the partner something itself (a tool's result said to the user as the
// answer), so that the model reads it on the next turn as what it said.
// It fails for a Turn that no Agent runs.
func (t *Turn) Record(ctx context.Context, msgs ...Message) error {
	if t.llm == nil {
		return errors.New("openai: Record on a turn that no Agent runs")
	}
	return t.llm.record(ctx, t, msgs...)
}

// Request is a model call about to be made, as an extension's Before may
// change it.
type Request struct {
	// System is the call's system prompt ("" sends none). It starts as
	// the agent's SystemPrompt and a line that names the partner.
	System string
	// Tools are the extensions' own tools, offered after the actions of
	// the catalog. Before appends its own; each is called through the Call
	// hook of the extension that added it.
	Tools []Tool
	// Params starts as the agent's parameters.
	Params Params
	// Meta holds extra __meta__ keys for every tool request of the reply
	// to this call (the agent's own keys, conversation and tool_call_id,
	// win over them).
	Meta map[string]any
}

// Tool is a function tool that an extension offers the model.
type Tool struct {
	// Name matches ^[a-zA-Z0-9_-]{1,64}$ and holds no "__", which the
	// names of catalog tools do: the two never clash.
	Name        string
	Description string
	// Parameters is a JSON Schema object; nil means no arguments.
	Parameters json.RawMessage
}

// Result is the result of a call of a catalog tool.
type Result struct {
	Call          ToolCall
	Agent, Action string // the action called
	// Response is the [response] that answered the call; nil when the call
	// failed, and then Err says why (an *agency.ActionError for an [error]).
	Response *agency.Message
	Err      error
	// Content is what the model reads; a hook may change it.
	Content string
}

// Answer is the model's text answer, before it is said.
type Answer struct {
	Text string         // what the partner is told; kept in the history
	Meta map[string]any // extra __meta__ keys of the say, such as "final": true
	// Again has the model called again once the answer is said, in the
	// same turn (it counts against MaxSteps).
	Again bool
}

// Params are the parameters of a model call. A zero field is left out of
// the request, so the server's default applies.
type Params struct {
	Temperature *float64
	TopP        *float64
	MaxTokens   int // sent as max_tokens
	Seed        *int
	// ToolChoice is "auto", "none", "required", or the name of a tool the
	// model must call.
	ToolChoice        string
	ParallelToolCalls *bool
	ResponseFormat    *ResponseFormat
}

// ResponseFormat asks the model for a JSON answer.
type ResponseFormat struct {
	// Name names the schema (required with a Schema).
	Name string
	// Schema is a JSON Schema object the answer must match; nil asks for
	// any JSON object.
	Schema json.RawMessage
	// Strict asks the server to enforce the schema exactly.
	Strict bool
}

// Chunk is a piece of a model's reply as it streams in (see [Stream]).
type Chunk struct {
	Conversation string
	Step         int    // the model call of the turn, from 1
	Text         string // the next piece of the reply's text
	// Done marks the end of the reply (Text is then empty); Answer says
	// whether the reply is the turn's answer rather than a step with tool
	// calls, whose text travels with them as thoughts.
	Done   bool
	Answer bool
	// Err, on a Done chunk, says that the reply failed part-way (the
	// stream broke, or the turn was cancelled) and why: the text given so
	// far is abandoned. It is not the answer and not in the history; the
	// request is not tried again, and the turn fails (its partner is told
	// "Sorry, …"). Every reply that gave text ends with a Done chunk.
	Err error
}

// Usage counts the model calls of a turn or of a conversation, and the
// tokens the server reported for them.
type Usage struct {
	Calls            int
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
}

func (u Usage) plus(v Usage) Usage {
	return Usage{u.Calls + v.Calls, u.PromptTokens + v.PromptTokens, u.CompletionTokens + v.CompletionTokens, u.TotalTokens + v.TotalTokens}
}

// Continuation is a turn that an agent runs on a conversation handed over
// by another agent (see [Agent.Continue]).
type Continuation struct {
	Conversation string
	// Owner is who the conversation belongs to (default Partner): see
	// [Turn].
	Owner string
	// Partner is the agent that gets the answer: the one that speaks for
	// the user.
	Partner string
	// ReplyTo is the id of the message the answer answers, sent as
	// __meta__.in_reply_to (default: the message being handled): a handoff
	// passes the user's say, so that the user agent knows the answer for
	// its own.
	ReplyTo string
	// History replaces what the agent's memory holds of the conversation;
	// nil keeps it.
	History []Message
	// Data is handed to the extensions' hooks as Turn.Data: what the
	// handler that calls Continue tells them about the turn (a handoff
	// passes what was handed over with the conversation).
	Data any
}
