package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	gopenai "github.com/sashabaranov/go-openai"

	"github.com/seed72275b23/agency-go/agency"
)

// chatRequest turns the turn's history and the prepared call into the
// request to the API.
func (a *Agent) chatRequest(t *Turn, r *Request, ts toolSet) gopenai.ChatCompletionRequest {
	msgs := make([]gopenai.ChatCompletionMessage, 0, len(t.History)+1)
	if r.System != "" {
		msgs = append(msgs, gopenai.ChatCompletionMessage{Role: gopenai.ChatMessageRoleSystem, Content: r.System})
	}
	for _, m := range t.History {
		msgs = append(msgs, toChat(m))
	}
	req := gopenai.ChatCompletionRequest{Model: a.model, Messages: msgs, Tools: ts.tools}
	p := r.Params
	if p.Temperature != nil {
		req.Temperature = nonZero(*p.Temperature)
	}
	if p.TopP != nil {
		req.TopP = nonZero(*p.TopP)
	}
	req.MaxTokens = p.MaxTokens //lint:ignore SA1019 max_tokens on purpose: many OpenAI-compatible servers know no max_completion_tokens (docs/llm.md)
	req.Seed = p.Seed
	if len(ts.tools) > 0 { // the API refuses these without tools
		switch p.ToolChoice {
		case "":
		case "auto", "none", "required":
			req.ToolChoice = p.ToolChoice
		default:
			req.ToolChoice = gopenai.ToolChoice{Type: gopenai.ToolTypeFunction, Function: gopenai.ToolFunction{Name: p.ToolChoice}}
		}
		if p.ParallelToolCalls != nil {
			req.ParallelToolCalls = *p.ParallelToolCalls
		}
	}
	if f := p.ResponseFormat; f != nil {
		if f.Schema == nil {
			req.ResponseFormat = &gopenai.ChatCompletionResponseFormat{Type: gopenai.ChatCompletionResponseFormatTypeJSONObject}
		} else {
			req.ResponseFormat = &gopenai.ChatCompletionResponseFormat{
				Type:       gopenai.ChatCompletionResponseFormatTypeJSONSchema,
				JSONSchema: &gopenai.ChatCompletionResponseFormatJSONSchema{Name: f.Name, Schema: f.Schema, Strict: f.Strict},
			}
		}
	}
	return req
}

// nonZero is v as a float32, with 0 as the smallest positive float32:
// go-openai leaves a zero out of the request.
func nonZero(v float64) float32 {
	if v == 0 {
		return math.SmallestNonzeroFloat32
	}
	return float32(v)
}

// clone copies p, so that an extension that changes a pointed-to value
// changes only its own call.
func (p Params) clone() Params {
	c := p
	c.Temperature = clonePtr(p.Temperature)
	c.TopP = clonePtr(p.TopP)
	c.Seed = clonePtr(p.Seed)
	c.ParallelToolCalls = clonePtr(p.ParallelToolCalls)
	if p.ResponseFormat != nil {
		f := *p.ResponseFormat
		c.ResponseFormat = &f
	}
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// toChat is m as the API takes it.
func toChat(m Message) gopenai.ChatCompletionMessage {
	c := gopenai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
	if m.Role != RoleTool && readable(m.Name) && len(m.Name) <= maxToolName {
		c.Name = m.Name
	}
	for _, tc := range m.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, gopenai.ToolCall{ID: tc.ID, Type: gopenai.ToolTypeFunction,
			Function: gopenai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	return c
}

// fromChat is the model's reply as a history message. Tool calls without an
// id (some local servers leave it out) get one: their results need it.
func fromChat(c gopenai.ChatCompletionMessage) Message {
	m := Message{Role: RoleAssistant, Content: c.Content}
	if m.Content == "" && len(c.ToolCalls) == 0 {
		m.Content = c.Refusal
	}
	for _, tc := range c.ToolCalls {
		id := tc.ID
		if id == "" {
			id = "call_" + agency.NewID()
		}
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return m
}

var (
	errNoChoice    = errors.New("openai: the model's reply has no choices")
	errEmptyAnswer = errors.New("openai: the model's reply is empty")
	errTimedOut    = errors.New("openai: the model request timed out")
)

// completeRetrying calls the model, retrying on HTTP 408, 429 and 5xx and on a
// request that timed out, with a doubling backoff or the wait the server
// asked for. It returns the reply and the usage of every attempt.
func (a *Agent) completeRetrying(ctx context.Context, t *Turn, req gopenai.ChatCompletionRequest) (Message, Usage, error) {
	wait := a.backoff
	var used Usage
	for attempt := 1; ; attempt++ {
		var after retryAfter
		actx, cancel := context.WithTimeout(context.WithValue(ctx, retryAfterKey{}, &after), a.requestTimeout)
		reply, u, streamed, err := a.attempt(actx, t, req)
		timedOut := err != nil && actx.Err() != nil && ctx.Err() == nil
		cancel()
		used = used.plus(u)
		if timedOut {
			err = fmt.Errorf("%w after %v: %w", errTimedOut, a.requestTimeout, err)
		}
		if err == nil {
			return reply, used, nil
		}
		if ctx.Err() != nil {
			return reply, used, ctx.Err()
		}
		if streamed || !(timedOut || retryable(err)) {
			return reply, used, err
		}
		if attempt > a.retries {
			return reply, used, &retriesError{attempts: attempt, err: err}
		}
		d := wait
		if s := after.get(); s > 0 && s <= maxRetryAfter {
			d = s
		}
		a.logger.Warn("openai: model call failed; retrying", "agent", a.agent.ID(), "conversation", t.Conversation, "attempt", attempt, "wait", d, "error", err)
		if err := a.sleep(ctx, d); err != nil {
			return reply, used, err
		}
		wait *= 2
	}
}

// maxRetryAfter is the longest Retry-After the agent waits for; a longer
// one falls back to the backoff.
const maxRetryAfter = time.Minute

// attempt makes one model request. streamed reports whether some of the
// reply's text had gone to the Stream callback before it failed: such a
// request is not tried again.
func (a *Agent) attempt(ctx context.Context, t *Turn, req gopenai.ChatCompletionRequest) (reply Message, used Usage, streamed bool, err error) {
	if a.stream != nil || streamedTo(ctx) {
		return a.attemptStream(ctx, t, req)
	}
	resp, err := a.client.CreateChatCompletion(ctx, req)
	if err != nil {
		return Message{}, Usage{}, false, err
	}
	used = Usage{Calls: 1, PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens, TotalTokens: resp.Usage.TotalTokens}
	if len(resp.Choices) == 0 {
		return Message{}, used, false, errNoChoice
	}
	reply = fromChat(resp.Choices[0].Message)
	if reply.Content == "" && len(reply.ToolCalls) == 0 {
		return reply, used, false, errEmptyAnswer
	}
	return reply, used, false, nil
}

// attemptStream makes one streamed model request, giving each piece of text
// to the Stream callback, and puts the reply together from its pieces.
func (a *Agent) attemptStream(ctx context.Context, t *Turn, req gopenai.ChatCompletionRequest) (reply Message, used Usage, streamed bool, err error) {
	req.Stream = true
	req.StreamOptions = &gopenai.StreamOptions{IncludeUsage: true}
	s, err := a.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return Message{}, Usage{}, false, err
	}
	defer s.Close()
	used.Calls = 1
	var text, refusal strings.Builder
	var calls []gopenai.ToolCall
	choices := 0
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if streamed {
				// The text given so far is abandoned: say so.
				a.chunk(ctx, Chunk{Conversation: t.Conversation, Step: t.Step, Done: true, Err: err})
			}
			return Message{}, used, streamed, err
		}
		if u := chunk.Usage; u != nil {
			used.PromptTokens, used.CompletionTokens, used.TotalTokens = u.PromptTokens, u.CompletionTokens, u.TotalTokens
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			choices++
			d := c.Delta
			if d.Content != "" {
				if !streamed && t.spoke {
					// The text of an earlier reply of the turn (what the
					// model wrote beside its tool calls) was shown: this
					// reply starts on a line of its own.
					_ = agency.Emit(ctx, "\n")
				}
				text.WriteString(d.Content)
				streamed = true
				a.chunk(ctx, Chunk{Conversation: t.Conversation, Step: t.Step, Text: d.Content})
			}
			refusal.WriteString(d.Refusal)
			for _, tc := range d.ToolCalls {
				i := len(calls)
				if tc.Index != nil {
					i = *tc.Index
				}
				for len(calls) <= i {
					calls = append(calls, gopenai.ToolCall{})
				}
				c := &calls[i]
				if tc.ID != "" {
					c.ID = tc.ID
				}
				if tc.Function.Name != "" {
					c.Function.Name += tc.Function.Name
				}
				c.Function.Arguments += tc.Function.Arguments
			}
		}
	}
	if choices == 0 {
		return Message{}, used, streamed, errNoChoice
	}
	reply = fromChat(gopenai.ChatCompletionMessage{Content: text.String(), Refusal: refusal.String(), ToolCalls: calls})
	if reply.Content == "" && len(reply.ToolCalls) == 0 {
		return reply, used, streamed, errEmptyAnswer
	}
	a.chunk(ctx, Chunk{Conversation: t.Conversation, Step: t.Step, Done: true, Answer: len(reply.ToolCalls) == 0})
	t.spoke = t.spoke || streamed
	return reply, used, streamed, nil
}

// streamedTo reports whether the action ctx serves was asked for the parts
// of its answer (agency.Agent.Stream): then the model's reply is streamed
// even without a Stream callback.
func streamedTo(ctx context.Context) bool {
	m := agency.MessageFrom(ctx)
	return m != nil && m.Stream
}

// chunk gives c to the Stream callback, if any, and each piece of text to
// the caller of the action, as a part of its answer (agency.Emit): a
// caller that asked for parts reads the model's text as it comes; for any
// other, Emit sends nothing. A caller that stops reading cancels ctx, and
// with it the model request.
func (a *Agent) chunk(ctx context.Context, c Chunk) {
	if a.stream != nil {
		a.stream(ctx, c)
	}
	if c.Text != "" {
		_ = agency.Emit(ctx, c.Text)
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
	return s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500
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

// retryAfter holds the wait a failed answer asked for. The transport writes
// it while the request's caller waits.
type retryAfter struct {
	mu sync.Mutex
	d  time.Duration
}

func (r *retryAfter) get() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d
}

type retryAfterKey struct{}

// retryAfterTransport reads the Retry-After of answers that a request may
// be retried after, for the request's retryAfter: go-openai's errors do not
// carry the answer's headers.
type retryAfterTransport struct{ base http.RoundTripper }

func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout) {
		return resp, err
	}
	if slot, ok := req.Context().Value(retryAfterKey{}).(*retryAfter); ok {
		if d, ok := parseRetryAfter(resp.Header, time.Now()); ok {
			slot.mu.Lock()
			slot.d = d
			slot.mu.Unlock()
		}
	}
	return resp, nil
}

// parseRetryAfter reads retry-after-ms (OpenAI's, in milliseconds) or
// Retry-After (seconds, or an HTTP date).
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// withRetryAfter returns a client like hc (or http.DefaultClient) whose
// transport reads Retry-After headers.
func withRetryAfter(hc *http.Client) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = retryAfterTransport{base: traceTransport{base: base}}
	return c
}

// sorry is the text the partner reads when a turn fails.
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
	default:
		detail = err.Error()
	}
	var gaveUp *retriesError
	var ext *extError
	switch {
	case errors.Is(err, agency.ErrMessageTooLarge):
		return fmt.Sprintf("Sorry, my answer is too large to send (%s). Please ask for a shorter one.",
			strings.TrimPrefix(err.Error(), agency.ErrMessageTooLarge.Error()+": "))
	case errors.As(err, &ext):
		return fmt.Sprintf("Sorry, something went wrong on my side: %v", err)
	case errors.Is(err, errTimedOut):
		text := "Sorry, the language model did not answer in time"
		if errors.As(err, &gaveUp) {
			text += fmt.Sprintf("; I gave up after %d attempts", gaveUp.attempts)
		}
		return text + ". Please try again later."
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
