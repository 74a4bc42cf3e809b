package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// SayArgs are the arguments of say.
type SayArgs struct {
	Content string `json:"content" validate:"min=1" jsonschema:"description=what to say"`
}

// The __meta__ keys the agent reads and writes.
const (
	// metaConversation keys the history: every message the agent sends
	// while serving a conversation carries it.
	metaConversation = "conversation"
	// metaReply marks a say as the answer to the message with the given
	// id. A say that carries it is answered only as the action's value,
	// never with a say back, so two LLM agents cannot keep answering each
	// other for ever.
	metaReply = "in_reply_to"
	// metaToolCall is the __meta__ key of a request made for a model's
	// tool call, holding the call's id. A say that carries it (one LLM
	// agent calling another's say as a tool) is answered only as the
	// action's value: the caller reads it as the tool's result, and a say
	// back would start a turn of its own that nobody reads.
	metaToolCall = "tool_call_id"
	// metaThoughts carries the text the model wrote beside its tool calls.
	metaThoughts = "thoughts"
	// MetaOnBehalfOf is the __meta__ key through which an agent named a
	// trusted relay ([Relays]) says whom it speaks for: the owner of the
	// conversation it names. From any other agent a say that carries it is
	// refused (permission_denied).
	MetaOnBehalfOf = "on_behalf_of"
	// MetaConversationOwner is the __meta__ key of the owner of the
	// conversation a message is sent for: every request the agent makes
	// while serving a conversation carries it beside the conversation's
	// id. A receiver that keeps conversations by their sender and id
	// keeps the conversations the sender serves for different owners
	// apart by it: an Agent keeps a say from S with conversation c and
	// conversation_owner X (not S) as S's conversation ConversationKey(X,
	// c). It is no claim to be trusted (unlike on_behalf_of): it only
	// splits the sender's own conversations.
	MetaConversationOwner = "conversation_owner"
)

// conversationOf returns the conversation a message belongs to: its
// __meta__.conversation, or its sender's id; served for another owner
// than its sender (__meta__.conversation_owner), the conversation's key
// for that owner, so that a sender serving two owners that name one id
// has two conversations here.
func conversationOf(m *agency.Message) string {
	c, ok := m.Meta[metaConversation].(string)
	if !ok || c == "" {
		c = m.From
	}
	if _, relayed := m.Meta[MetaOnBehalfOf]; relayed {
		return c
	}
	if o, ok := m.Meta[MetaConversationOwner].(string); ok && o != m.From && agency.ValidateID(o) == nil {
		return ConversationKey(o, c)
	}
	return c
}

// ConversationKey is the key under which an agent keeps a conversation:
// its owner, a space, and its id. A conversation belongs to the agent
// that started it (the sender of its first say): another sender that
// names the same conversation id gets a conversation of its own, with
// another key, and never sees or changes the first one's turns, memory or
// usage. Memory implementations get this key, never the bare id. (An
// owner is an agent id, which holds no white space, so the first space
// ends it.)
func ConversationKey(owner, conversation string) string { return owner + " " + conversation }

// ownerOf returns who owns the conversation a say names: its sender, or,
// for a say from a trusted relay that carries __meta__.on_behalf_of,
// the one the relay speaks for. A say from another agent that carries
// on_behalf_of is refused.
func (a *Agent) ownerOf(m *agency.Message) (string, error) {
	v, ok := m.Meta[MetaOnBehalfOf]
	if !ok {
		return m.From, nil
	}
	if !slices.Contains(a.relays, m.From) {
		return "", agency.PermissionDeniedf("%s does not take %s from %s: only the agents named with openai.Relays may speak for others; say without it to talk in a conversation of your own",
			a.agent.ID(), MetaOnBehalfOf, m.From)
	}
	owner, _ := v.(string)
	if err := agency.ValidateID(owner); err != nil {
		return "", agency.InvalidArgsf("%s: %v", MetaOnBehalfOf, err)
	}
	return owner, nil
}

// say runs one turn of the sender's conversation: model calls and tool
// calls until the model answers in text. It says the answer back to the
// sender and returns it; when the model cannot be used it says and returns
// an error text that starts with "Sorry, ".
func (a *Agent) say(ctx context.Context, args SayArgs) (string, error) {
	m := agency.MessageFrom(ctx)
	partner, conv := m.From, conversationOf(m)
	owner, err := a.ownerOf(m)
	if err != nil {
		return "", err
	}
	unlock, err := a.convs.lock(ctx, ConversationKey(owner, conv))
	if err != nil {
		return "", err
	}
	defer unlock()
	a.notice(ctx, partner, conv)
	_, answered := m.Meta[metaReply]
	_, asTool := m.Meta[metaToolCall]
	replyTo := m.ID
	if answered || asTool {
		replyTo = "" // the value is the answer; no say back
	}
	user := &Message{Role: RoleUser, Name: partner, Content: args.Content}
	return a.serve(ctx, owner, conv, partner, user, replyTo, !answered && !asTool, nil, m.ID, nil)
}

// serve runs a turn of the conversation conv of owner, whose lock the
// caller holds, after appending user (if any) to its history. Each answer is said to
// partner when sayBack is set, with __meta__.in_reply_to replyTo (if any).
// data is the turn's Data, id the id of the message that asked. With a
// Journal for memory, the turn is written ahead (see Journal); resumed is
// the pending turn a resume takes up again, nil for a new turn. It returns
// the last answer.
func (a *Agent) serve(ctx context.Context, owner, conv, partner string, user *Message, replyTo string, sayBack bool, data any, id string, resumed *PendingTurn) (string, error) {
	select {
	case a.turns <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-a.turns }()

	var tooLarge error // an answer the space could not carry
	deliver := func(text string, extra map[string]any) {
		if !sayBack {
			return
		}
		meta := make(map[string]any, len(extra)+2)
		maps.Copy(meta, extra)
		meta[metaConversation] = conv
		if replyTo != "" {
			meta[metaReply] = replyTo
		}
		r := &agency.Message{To: partner, Meta: meta, Action: "say", Args: SayArgs{Content: text}}
		if _, err := a.agent.SendMessage(ctx, r); err != nil {
			a.logger.Warn("openai: answer not sent", "to", partner, "conversation", conv, "error", err)
			if errors.Is(err, agency.ErrMessageTooLarge) && tooLarge == nil {
				tooLarge = err
			}
		}
	}

	if id == "" {
		id = agency.NewID()
	}
	key := ConversationKey(owner, conv)
	t := &Turn{Conversation: conv, Owner: owner, Partner: partner, Data: data, agent: a.agent, llm: a, id: id}
	j, _ := a.memory.(Journal)
	history, err := a.memory.Load(ctx, key)
	switch {
	case err != nil:
	case j != nil && resumed != nil:
		t.pending, t.resumed = resumed, true
	case j != nil:
		p := PendingTurn{ID: id, Key: key, Owner: owner, Conversation: conv, Partner: partner, ReplyTo: replyTo,
			SayBack: sayBack, Started: time.Now().UTC()}
		if data != nil {
			p.Data, _ = json.Marshal(data)
		}
		var msgs []Message
		if user != nil {
			msgs = append(msgs, *user)
		}
		err = j.Begin(ctx, p, msgs...)
		switch {
		case err == nil:
			history = append(history, msgs...)
			t.pending = &p
		case errors.Is(err, ErrTurnPending) && user == nil:
			// A Continue whose caller wrote the turn ahead itself, with
			// the conversation it took over (a handoff does).
			err, t.pending = nil, &p
		case errors.Is(err, ErrTurnPending):
			// The message came again: the pending turn answers it.
			a.logger.Warn("openai: a message that asked again is answered by its pending turn", "agent", a.agent.ID(), "conversation", conv, "turn", id)
			return "", nil
		}
	case user != nil:
		if err = a.memory.Append(ctx, key, *user); err == nil {
			history = append(history, *user)
		}
	}
	if err != nil {
		err = fmt.Errorf("openai: the memory of conversation %q: %w", conv, err)
	}
	t.History = history
	var answer string
	var used Usage
	if err == nil {
		answer, used, err = a.turn(ctx, t, deliver)
		if err == nil && tooLarge != nil {
			err = tooLarge // the turn ends with the error, not in silence
		}
	}
	a.account(ctx, owner, conv, used)
	if err != nil && ctx.Err() != nil {
		return "", err // the agent is being taken out of its space (a pending turn stays so), or the caller gave up
	}
	if err != nil {
		a.logger.Error("openai: turn failed", "agent", a.agent.ID(), "conversation", conv, "partner", partner, "error", err)
		text := sorry(err)
		deliver(text, nil)
		a.forget(ctx, t)
		if errors.Is(err, agency.ErrMessageTooLarge) {
			return "", &agency.ActionError{Type: agency.TypeResponseTooLarge, Text: text}
		}
		return "", errors.New(text)
	}
	a.forget(ctx, t)
	return answer, nil
}

// forget ends the turn t in the Journal: its answer, or its error, is
// said.
func (a *Agent) forget(ctx context.Context, t *Turn) {
	j, _ := a.memory.(Journal)
	if j == nil || t.pending == nil {
		return
	}
	if err := j.Finish(context.WithoutCancel(ctx), *t.pending); err != nil {
		a.logger.Error("openai: a finished turn could not be forgotten; it will be said again after a restart", "agent", a.agent.ID(), "conversation", t.Conversation, "error", err)
	}
}

// account adds a turn's usage to its conversation's and reports both.
func (a *Agent) account(ctx context.Context, owner, conv string, turn Usage) {
	key := ConversationKey(owner, conv)
	a.usageMu.Lock()
	sum, _ := a.usage.Get(key)
	sum = sum.plus(turn)
	a.usage.Add(key, sum)
	a.usageMu.Unlock()
	if a.onUsage != nil {
		a.onUsage(ctx, owner, conv, turn, sum)
	}
}

// turn calls the model until it answers in text, running the tool calls of
// each reply in between and the extensions' hooks around them. Each answer
// goes to deliver; turn returns the last one ("" when an extension ended
// the turn before any) and what the model calls used.
func (a *Agent) turn(ctx context.Context, t *Turn, deliver func(string, map[string]any)) (answer string, used Usage, err error) {
	for t.Step < a.maxSteps {
		req, owner, err := a.prepare(ctx, t)
		if err != nil {
			return answer, used, err
		}
		if t.ended {
			a.finish(ctx, t)
			return answer, used, nil
		}
		if t.Step == 0 {
			a.rediscover(ctx, t.Conversation)
		}
		ts, err := newToolSet(a.catalog.snapshot(a.allow, a.deny), req.Tools, owner)
		if err != nil {
			return answer, used, err
		}
		reply, sent := unanswered(t.History)
		if !t.resumed || !sent {
			t.Step++
			var u Usage
			reply, u, err = a.complete(ctx, t, a.chatRequest(t, &req, ts))
			used = used.plus(u)
			if err != nil {
				return answer, used, err
			}
			reply.Name = a.agent.ID()
			if len(reply.ToolCalls) > 0 {
				// Written ahead: the calls are in the history before they
				// are sent, so that none is hidden after a crash.
				if err := a.record(ctx, t, reply); err != nil {
					return answer, used, err
				}
			}
		}
		// A resumed turn whose last reply's calls have no results sends
		// them again, with the same keys; that is done once.
		t.resumed = false

		if len(reply.ToolCalls) == 0 {
			ans := &Answer{Text: reply.Content}
			for _, x := range a.exts {
				if x.Answer != nil {
					if err := x.Answer(ctx, t, ans); err != nil {
						return answer, used, hookError("Answer", err)
					}
				}
			}
			reply.Content = ans.Text
			if t.pending != nil && !(ans.Again && t.Step < a.maxSteps && !t.ended) {
				p := *t.pending
				p.Answered, p.Answer, p.AnswerMeta = true, ans.Text, ans.Meta
				t.pending = &p
			}
			if err := a.record(ctx, t, reply); err != nil {
				return answer, used, err
			}
			answer = ans.Text
			deliver(ans.Text, ans.Meta)
			if t.ended {
				a.finish(ctx, t)
				return answer, used, nil
			}
			if ans.Again && t.Step < a.maxSteps {
				continue
			}
			return answer, used, nil
		}

		results, err := a.runCalls(ctx, t, ts, reply, req.Meta)
		if err != nil {
			return answer, used, err
		}
		if err := a.record(ctx, t, results...); err != nil {
			return answer, used, err
		}
		if t.ended {
			a.finish(ctx, t)
			return answer, used, nil
		}
	}
	note := fmt.Sprintf("Sorry, I reached my limit of %d steps before I had an answer. Ask me to go on if you want me to continue.", a.maxSteps)
	if t.pending != nil {
		p := *t.pending
		p.Answered, p.Answer, p.AnswerMeta = true, note, nil
		t.pending = &p
	}
	if err := a.record(ctx, t, Message{Role: RoleAssistant, Name: a.agent.ID(), Content: note}); err != nil {
		return answer, used, err
	}
	deliver(note, nil)
	return note, used, nil
}

// prepare builds the next model call: the agent's system prompt and
// parameters, then each extension's Before. owner[i] is the index of the
// extension that added req.Tools[i].
func (a *Agent) prepare(ctx context.Context, t *Turn) (req Request, owner []int, err error) {
	req = Request{Params: a.params.clone()}
	if a.prompt != "" {
		req.System = a.prompt + fmt.Sprintf("\n\nYou are talking with the agent %q.", t.Partner)
	}
	for i, x := range a.exts {
		if x.Before == nil {
			continue
		}
		n := len(req.Tools)
		if err := x.Before(ctx, t, &req); err != nil {
			return req, nil, hookError("Before", err)
		}
		if len(req.Tools) < n {
			return req, nil, errors.New("openai: an extension's Before removed tools it did not add")
		}
		for range req.Tools[n:] {
			owner = append(owner, i)
		}
		if t.ended {
			break
		}
	}
	return req, owner, nil
}

// record appends msgs to the turn's history and to the memory; with a
// Journal, it writes the pending turn as it stands too, in the same write.
func (a *Agent) record(ctx context.Context, t *Turn, msgs ...Message) error {
	var err error
	if j, ok := a.memory.(Journal); ok && t.pending != nil {
		err = j.Record(ctx, *t.pending, msgs...)
	} else {
		err = a.memory.Append(ctx, ConversationKey(t.Owner, t.Conversation), msgs...)
	}
	if err != nil {
		return fmt.Errorf("openai: the memory of conversation %q: %w", t.Conversation, err)
	}
	t.History = append(t.History, msgs...)
	return nil
}

// finish runs what the hooks that ended the turn asked to run then.
func (a *Agent) finish(ctx context.Context, t *Turn) {
	for _, f := range t.then {
		f(ctx, t)
	}
	t.then = nil
}

// hookError marks an error that an extension's hook returned.
func hookError(hook string, err error) error { return &extError{hook: hook, err: err} }

type extError struct {
	hook string
	err  error
}

func (e *extError) Error() string { return fmt.Sprintf("openai: extension hook %s: %v", e.hook, e.err) }
func (e *extError) Unwrap() error { return e.err }

// callResult is how a call of a catalog tool ended.
type callResult struct {
	resp    *agency.Message
	err     error
	content string
}

// runCalls runs the tool calls of one reply and returns their results as
// tool messages, in the order of the calls. The calls of catalog tools run
// at once, each as a Request; then, in the order of the calls, the
// extensions' own tools are called and the catalog results shown to the
// Result hooks, so that a hook sees what the calls before it decided.
func (a *Agent) runCalls(ctx context.Context, t *Turn, ts toolSet, reply Message, meta map[string]any) ([]Message, error) {
	done := make([]chan callResult, len(reply.ToolCalls))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, tc := range reply.ToolCalls {
		k, ok := ts.byName[tc.Name]
		if !ok {
			continue
		}
		done[i] = make(chan callResult, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			done[i] <- a.call(ctx, t.Owner, t.Conversation, k, tc, t.callKey(tc), reply.Content, meta)
		}()
	}
	out := make([]Message, len(reply.ToolCalls))
	var hookErr error
	for i, tc := range reply.ToolCalls {
		var content string
		switch x, isExt := ts.ext[tc.Name]; {
		case done[i] != nil:
			r := <-done[i]
			if hookErr != nil {
				continue
			}
			k := ts.byName[tc.Name]
			res := &Result{Call: tc, Agent: k.Agent, Action: k.Action, Response: r.resp, Err: r.err, Content: r.content}
			for _, x := range a.exts {
				if x.Result == nil {
					continue
				}
				if err := x.Result(ctx, t, res); err != nil {
					hookErr = hookError("Result", err)
					break
				}
			}
			content = res.Content
		case isExt:
			if hookErr != nil {
				continue
			}
			content = a.callExtension(ctx, t, a.exts[x], tc)
		default:
			content = fmt.Sprintf("error: not_found: there is no tool named %q; call one of the tools you have", tc.Name)
		}
		out[i] = Message{Role: RoleTool, ToolCallID: tc.ID, Content: content}
	}
	if hookErr != nil {
		return nil, hookErr
	}
	return out, ctx.Err()
}

// callExtension runs a call of an extension's own tool.
func (a *Agent) callExtension(ctx context.Context, t *Turn, x Extension, tc ToolCall) string {
	if x.Call == nil {
		return fmt.Sprintf("error: not_found: the tool %q has no handler", tc.Name)
	}
	content, err := x.Call(ctx, t, tc)
	if err != nil {
		return "error: " + err.Error()
	}
	return content
}

// callTool runs one call of a catalog tool as a Request and returns the
// response and the tool's result: the JSON of the value, or a text that
// starts with "error: " and the error's type.
func (a *Agent) callTool(ctx context.Context, owner, conv string, k toolKey, tc ToolCall, key, thoughts string, extra map[string]any) callResult {
	args := json.RawMessage(strings.TrimSpace(tc.Arguments))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !isObject(args) {
		text := fmt.Sprintf("the arguments of %s must be a JSON object, not %s", tc.Name, clip(string(args), 200))
		return callResult{err: &agency.ActionError{Type: agency.TypeInvalidArgs, Text: text}, content: "error: invalid_args: " + text}
	}
	meta := make(map[string]any, len(extra)+4)
	maps.Copy(meta, extra)
	meta[metaToolCall] = tc.ID
	meta[IdempotencyKey] = key
	meta[metaConversation] = conv
	if owner != "" {
		meta[MetaConversationOwner] = owner
	}
	if thoughts != "" {
		meta[metaThoughts] = thoughts
	}
	m := &agency.Message{To: k.Agent, Action: k.Action, Args: args, Meta: meta}
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	r, err := a.agent.RequestMessage(cctx, m)
	if err != nil {
		return callResult{err: err, content: a.callError(ctx, conv, k, err)}
	}
	return callResult{resp: r, content: result(r.Args)}
}

// callError turns a failed call into the text the model reads, and updates
// the catalog: an agent that is gone is dropped, an agent that lacks the
// action is asked for help again.
func (a *Agent) callError(ctx context.Context, conv string, k toolKey, err error) string {
	switch {
	case errors.Is(err, agency.ErrNoRecipient):
		a.catalog.drop(k.Agent)
		return fmt.Sprintf("error: no_recipient: the agent %q has left the space; its tools are withdrawn", k.Agent)
	case errors.Is(err, agency.ErrNotFound):
		a.refresh(ctx, k.Agent, conv, a.callTimeout)
	}
	return "error: " + err.Error() // an *agency.ActionError reads "type: text"
}

// result is the JSON of an action's value.
func result(v any) string {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return "null"
		}
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "error: action_failed: the result does not encode as JSON: " + err.Error()
	}
	return string(b)
}
