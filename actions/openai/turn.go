package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	gopenai "github.com/sashabaranov/go-openai"

	"github.com/seed72275b23/agency-go/agency"
)

// SayArgs are the arguments of say.
type SayArgs struct {
	Content string `json:"content" validate:"min=1" jsonschema:"description=what to say"`
}

// replyMeta is the __meta__ key that marks a say as the answer to the
// message with the given id. A say that carries it is answered only as the
// action's value, never with a say back, so two LLM agents cannot keep
// answering each other for ever.
const replyMeta = "in_reply_to"

// toolCallMeta is the __meta__ key of a request made for a model's tool
// call, holding the call's id. A say that carries it (one LLM agent calling
// another's say as a tool) is answered only as the action's value: the
// caller reads it as the tool's result, and a say back would start a turn
// of its own that nobody reads.
const toolCallMeta = "tool_call_id"

type chatMessage = gopenai.ChatCompletionMessage

// say runs one turn of the conversation with the sender: model calls and
// tool calls until the model answers in text. It says the answer back to
// the sender and returns it; when the model cannot be used it says and
// returns an error text that starts with "Sorry, ".
func (a *Agent) say(ctx context.Context, args SayArgs) (string, error) {
	m := agency.MessageFrom(ctx)
	partner := m.From
	a.notice(ctx, partner)

	conv := append(a.conversation(partner), chatMessage{Role: gopenai.ChatMessageRoleUser, Content: args.Content})
	answer, conv, err := a.turn(ctx, partner, conv)
	a.keep(partner, conv)
	if err != nil && ctx.Err() != nil {
		return "", err // the agent is being taken out of its space
	}
	if err != nil {
		a.logger.Error("openai: model call failed", "agent", a.agent.ID(), "partner", partner, "error", err)
		answer = sorry(err)
	}
	_, answered := m.Meta[replyMeta]
	_, asTool := m.Meta[toolCallMeta]
	if !answered && !asTool {
		r := &agency.Message{To: partner, Meta: map[string]any{replyMeta: m.ID}, Action: "say", Args: SayArgs{Content: answer}}
		if _, err := a.agent.SendMessage(ctx, r); err != nil {
			a.logger.Warn("openai: answer not sent", "to", partner, "error", err)
		}
	}
	if err != nil {
		return "", errors.New(answer)
	}
	return answer, nil
}

// turn calls the model with conv until it answers in text, running the
// tool calls of each reply in between. It returns the answer and conv with
// everything the turn added.
func (a *Agent) turn(ctx context.Context, partner string, conv []chatMessage) (string, []chatMessage, error) {
	for range a.maxSteps {
		ts := newToolSet(a.catalog.snapshot())
		req := gopenai.ChatCompletionRequest{Model: a.model, Messages: a.withPrompt(partner, conv), Tools: ts.tools}
		resp, err := a.complete(ctx, req)
		if err != nil {
			return "", conv, err
		}
		if len(resp.Choices) == 0 {
			return "", conv, errNoChoice
		}
		reply := resp.Choices[0].Message
		reply.Role = gopenai.ChatMessageRoleAssistant
		reply.FunctionCall = nil
		reply.ReasoningContent = "" // servers that send it (DeepSeek) refuse it back
		for i := range reply.ToolCalls {
			tc := &reply.ToolCalls[i]
			tc.Index = nil
			if tc.ID == "" { // some local servers leave it out; the tool results need one
				tc.ID = "call_" + agency.NewID()
			}
			if tc.Type == "" {
				tc.Type = gopenai.ToolTypeFunction
			}
		}
		if len(reply.ToolCalls) == 0 {
			answer := reply.Content
			if answer == "" {
				answer = reply.Refusal
			}
			if answer == "" {
				return "", conv, errEmptyAnswer
			}
			return answer, append(conv, reply), nil
		}
		results, err := a.runCalls(ctx, ts, reply)
		if err != nil {
			return "", conv, err
		}
		conv = append(append(conv, reply), results...)
	}
	note := fmt.Sprintf("Sorry, I reached my limit of %d steps before I had an answer. Ask me to go on if you want me to continue.", a.maxSteps)
	return note, append(conv, chatMessage{Role: gopenai.ChatMessageRoleAssistant, Content: note}), nil
}

var (
	errNoChoice    = errors.New("openai: the model's reply has no choices")
	errEmptyAnswer = errors.New("openai: the model's reply is empty")
)

// withPrompt prepends the system message.
func (a *Agent) withPrompt(partner string, conv []chatMessage) []chatMessage {
	if a.prompt == "" {
		return conv
	}
	sys := chatMessage{Role: gopenai.ChatMessageRoleSystem,
		Content: a.prompt + fmt.Sprintf("\n\nYou are talking with the agent %q.", partner)}
	return append([]chatMessage{sys}, conv...)
}

// runCalls runs the tool calls of one reply concurrently and returns their
// results as tool messages, in the order of the calls. The reply's text
// travels with each call as __meta__.thoughts.
func (a *Agent) runCalls(ctx context.Context, ts toolSet, reply chatMessage) ([]chatMessage, error) {
	out := make([]chatMessage, len(reply.ToolCalls))
	var wg sync.WaitGroup
	for i, tc := range reply.ToolCalls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = chatMessage{Role: gopenai.ChatMessageRoleTool, ToolCallID: tc.ID, Content: a.call(ctx, ts, tc, reply.Content)}
		}()
	}
	wg.Wait()
	return out, ctx.Err()
}

// call runs one tool call as a Request and returns the tool's result: the
// JSON of the value, or a text that starts with "error: " and the error's
// type.
func (a *Agent) call(ctx context.Context, ts toolSet, tc gopenai.ToolCall, thoughts string) string {
	k, ok := ts.byName[tc.Function.Name]
	if !ok {
		return fmt.Sprintf("error: not_found: there is no tool named %q; call one of the tools you have", tc.Function.Name)
	}
	args := json.RawMessage(strings.TrimSpace(tc.Function.Arguments))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !isObject(args) {
		return fmt.Sprintf("error: invalid_args: the arguments of %s must be a JSON object, not %s", tc.Function.Name, clip(string(args), 200))
	}
	m := &agency.Message{To: k.Agent, Action: k.Action, Args: args, Meta: map[string]any{toolCallMeta: tc.ID}}
	if thoughts != "" {
		m.Meta["thoughts"] = thoughts
	}
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	r, err := a.agent.RequestMessage(cctx, m)
	if err != nil {
		return a.callError(ctx, k, err)
	}
	return result(r.Args)
}

// callError turns a failed call into the text the model reads, and updates
// the catalog: an agent that is gone is dropped, an agent that lacks the
// action is asked for help again.
func (a *Agent) callError(ctx context.Context, k toolKey, err error) string {
	switch {
	case errors.Is(err, agency.ErrNoRecipient):
		a.catalog.drop(k.Agent)
		return fmt.Sprintf("error: no_recipient: the agent %q has left the space; its tools are withdrawn", k.Agent)
	case errors.Is(err, agency.ErrNotFound):
		a.refresh(ctx, k.Agent)
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

// complete calls the model, retrying on HTTP 429 and 5xx with a doubling
// backoff.
func (a *Agent) complete(ctx context.Context, req gopenai.ChatCompletionRequest) (gopenai.ChatCompletionResponse, error) {
	wait := a.backoff
	for attempt := 1; ; attempt++ {
		resp, err := a.client.CreateChatCompletion(ctx, req)
		if err == nil {
			return resp, nil
		}
		if !retryable(err) {
			return resp, err
		}
		if attempt > a.retries {
			return resp, &retriesError{attempts: attempt, err: err}
		}
		a.logger.Warn("openai: model call failed; retrying", "agent", a.agent.ID(), "attempt", attempt, "wait", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, ctx.Err()
		case <-t.C:
		}
		wait *= 2
	}
}

// retriesError is a retryable error that outlasted the retries.
type retriesError struct {
	attempts int
	err      error
}

func (e *retriesError) Error() string {
	return fmt.Sprintf("%v (gave up after %d attempts)", e.err, e.attempts)
}

func (e *retriesError) Unwrap() error { return e.err }

func retryable(err error) bool {
	s := httpStatus(err)
	return s == 429 || s >= 500
}

// httpStatus returns the HTTP status of a failed API call, or 0.
func httpStatus(err error) int {
	var ae *gopenai.APIError
	if errors.As(err, &ae) {
		return ae.HTTPStatusCode
	}
	var re *gopenai.RequestError
	if errors.As(err, &re) {
		return re.HTTPStatusCode
	}
	return 0
}

// sorry is the text the user reads when a turn fails.
func sorry(err error) string {
	status := httpStatus(err)
	var detail string
	var ae *gopenai.APIError
	var re *gopenai.RequestError
	switch {
	case errors.As(err, &ae):
		detail = fmt.Sprintf("HTTP %d: %s", status, ae.Message)
	case errors.As(err, &re):
		detail = fmt.Sprintf("HTTP %d: %s", status, clip(strings.TrimSpace(string(re.Body)), 300))
	}
	var gaveUp *retriesError
	switch {
	case errors.Is(err, errNoChoice), errors.Is(err, errEmptyAnswer):
		return "Sorry, the language model returned no answer. Please try again."
	case status == 401 || status == 403:
		return fmt.Sprintf("Sorry, the language model service refused my credentials (%s). Check OPENAI_API_KEY.", detail)
	case status == 404:
		return fmt.Sprintf("Sorry, the language model service does not know the model or the address (%s). Check OPENAI_MODEL and OPENAI_BASE_URL.", detail)
	case errors.As(err, &gaveUp):
		return fmt.Sprintf("Sorry, the language model service is unavailable (%s); I gave up after %d attempts. Please try again later.", detail, gaveUp.attempts)
	case status != 0:
		return fmt.Sprintf("Sorry, the language model service rejected the request (%s).", detail)
	default:
		return fmt.Sprintf("Sorry, I could not reach the language model service: %v", err)
	}
}

// conversation returns a copy of the history with partner.
func (a *Agent) conversation(partner string) []chatMessage {
	a.convMu.Lock()
	defer a.convMu.Unlock()
	return slices.Clone(a.conversations[partner])
}

// keep stores the history with partner, bounded by the History option.
func (a *Agent) keep(partner string, conv []chatMessage) {
	conv = trimHistory(conv, a.history)
	a.convMu.Lock()
	defer a.convMu.Unlock()
	a.conversations[partner] = conv
}

// trimHistory keeps the last n messages, less any tool results at the start
// whose call was cut off.
func trimHistory(conv []chatMessage, n int) []chatMessage {
	if len(conv) > n {
		conv = conv[len(conv)-n:]
	}
	for len(conv) > 0 && conv[0].Role == gopenai.ChatMessageRoleTool {
		conv = conv[1:]
	}
	return slices.Clip(slices.Clone(conv))
}
