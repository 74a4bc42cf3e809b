// Package openaitest serves a scripted OpenAI-compatible chat-completions
// API, so that tests of LLM agents run without a live model.
//
// A [Server] answers each POST /v1/chat/completions with the next [Step] of
// its script (a text answer, tool calls, or an HTTP error) and records every
// request it received:
//
//	srv := openaitest.NewServer(t,
//		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":1,"b":2}`}}},
//		openaitest.Step{Text: "3"},
//	)
//	llm, err := openai.New("Assistant", openai.BaseURL(srv.URL), openai.APIKey("test"), openai.HTTPClient(srv.Client()))
//	…
//	reqs := srv.Requests() // what the model was sent
//
// A request with "stream": true gets its answer as server-sent events, the
// way the API streams: the text in pieces, then the tool calls, then (when
// the request asks for it with stream_options.include_usage) the usage.
//
// A request that finds the script empty, or one to another path, fails the
// test and gets HTTP 400, which an agent does not retry.
package openaitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Step is one scripted answer. With Status set (and not 200) the server
// answers with that HTTP status and an OpenAI error body whose message is
// Error; otherwise it answers with an assistant message of Text and
// ToolCalls, and Usage as the answer's token usage. Header is added to the
// answer's headers (a Retry-After, say). With Hang set the server answers
// nothing until the client gives up on the request. With Func set, the
// step is the one Func returns for the request, and the other fields are
// ignored.
type Step struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	Status    int
	Error     string
	Header    http.Header
	Hang      bool
	Func      func(Request) Step
	// Pieces, when streaming, splits Text into these pieces (they must
	// add up to Text); by default each word is a piece, with the space
	// that follows it.
	Pieces []string
	// Broken, when streaming, fails the answer part-way: after the pieces
	// of Text comes an error event whose message is Error (the way the API
	// reports a failure in the middle of a stream), and nothing else: no
	// tool calls, no finish reason, no [DONE].
	Broken bool
}

// Usage is the token usage an answer reports.
type Usage struct {
	PromptTokens, CompletionTokens int
}

// ToolCall is a call of a function tool. An empty ID is filled in
// ("call_1", "call_2", … in the order the server hands them out).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON text
}

// Request is a chat-completions request as the server received it. Body
// holds every parameter; the fields are those that tests look at most.
type Request struct {
	Header   http.Header
	Body     []byte // the raw body
	Model    string
	Messages []Message
	Tools    []Tool
	Stream   bool
	// ParallelToolCalls is the request's parallel_tool_calls; nil when
	// absent.
	ParallelToolCalls *bool
	includeUsage      bool
	ctx               context.Context
}

// Context returns the context of the HTTP request: done when the client
// gives up on it. A step's Func may wait on it.
func (r Request) Context() context.Context {
	if r.ctx == nil {
		return context.Background()
	}
	return r.ctx
}

// Message is one message of a request.
type Message struct {
	Role       string
	Name       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
}

// Tool is one function tool of a request.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // as sent
}

// Tool returns the request's tool with the given name.
func (r Request) Tool(name string) (Tool, bool) {
	for _, t := range r.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Server is a scripted chat-completions server. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the base URL to give an OpenAI client, ending in "/v1".
	URL string

	t    testing.TB // nil for a server from Serve
	http *httptest.Server
	errs []error // what went wrong, for a server from Serve

	mu    sync.Mutex
	steps []Step
	reqs  []Request
	calls int // tool call ids handed out
}

// NewServer starts a server with the given script. It is closed when the
// test ends; a request it cannot answer fails the test.
func NewServer(t testing.TB, steps ...Step) *Server {
	s := &Server{t: t, steps: steps}
	s.http = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.http.URL + "/v1"
	t.Cleanup(s.http.Close)
	return s
}

// Serve starts a server with the given script, outside a test (in an
// Example, say): the caller closes it, and reads what went wrong from Err.
func Serve(steps ...Step) *Server {
	s := &Server{steps: steps}
	s.http = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.http.URL + "/v1"
	return s
}

// Close shuts a server from Serve down. (One from NewServer closes when
// its test ends.)
func (s *Server) Close() { s.http.Close() }

// Err returns what went wrong with the requests of a server from Serve:
// unexpected paths, undecodable bodies, a script used up.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

func (s *Server) fail(format string, args ...any) {
	if s.t != nil {
		s.t.Errorf(format, args...)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Errorf(format, args...))
}

// Client returns an HTTP client for the server; Close drops its idle
// connections, so no goroutine outlives the test.
func (s *Server) Client() *http.Client { return s.http.Client() }

// Add appends steps to the script.
func (s *Server) Add(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Left returns how many steps of the script are still unused.
func (s *Server) Left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		s.fail("openaitest: unexpected %s %s", r.Method, r.URL.Path)
		writeError(w, http.StatusNotFound, "openaitest: only POST /v1/chat/completions is served")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	req, err := decode(body)
	if err != nil {
		s.fail("openaitest: undecodable request: %v\n%s", err, body)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	req.Header = r.Header.Clone()
	req.ctx = r.Context()

	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	if len(s.steps) == 0 {
		n := len(s.reqs)
		s.mu.Unlock()
		s.fail("openaitest: request %d finds the script empty", n)
		writeError(w, http.StatusBadRequest, "openaitest: the script has no step left")
		return
	}
	step := s.steps[0]
	s.steps = s.steps[1:]
	s.mu.Unlock()

	if step.Func != nil {
		step = step.Func(req)
	}
	for k, v := range step.Header {
		w.Header()[k] = v
	}
	if step.Hang {
		<-r.Context().Done()
		return
	}
	if step.Status != 0 && step.Status != http.StatusOK {
		writeError(w, step.Status, step.Error)
		return
	}
	calls := make([]toolCall, len(step.ToolCalls))
	for i, c := range step.ToolCalls {
		if c.ID == "" {
			s.mu.Lock()
			s.calls++
			c.ID = fmt.Sprintf("call_%d", s.calls)
			s.mu.Unlock()
		}
		calls[i] = toolCall{ID: c.ID, Type: "function", Function: function{Name: c.Name, Arguments: c.Arguments}}
	}
	if req.Stream {
		s.writeStream(w, req, step, calls)
		return
	}
	writeAnswer(w, req, step, calls)
}

type function struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type toolCall struct {
	Index    *int     `json:"index,omitempty"`
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type,omitempty"`
	Function function `json:"function"`
}

func usage(u Usage) map[string]int {
	return map[string]int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.PromptTokens + u.CompletionTokens}
}

func finishReason(calls []toolCall) string {
	if len(calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func writeAnswer(w http.ResponseWriter, req Request, step Step, calls []toolCall) {
	msg := struct {
		Role      string     `json:"role"`
		Content   string     `json:"content"`
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
	}{Role: "assistant", Content: step.Text, ToolCalls: calls}
	resp := map[string]any{
		"id":      "chatcmpl-openaitest",
		"object":  "chat.completion",
		"created": 0,
		"model":   req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(calls)}},
		"usage":   usage(step.Usage),
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// writeStream answers as the API streams: a chunk with the role, one per
// piece of text, one per tool call (its name and the first half of its
// arguments) and one with the rest of its arguments, one with the finish
// reason, the usage if asked for, and [DONE].
func (s *Server) writeStream(w http.ResponseWriter, req Request, step Step, calls []toolCall) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(delta map[string]any, finish any, u map[string]int) {
		chunk := map[string]any{
			"id":      "chatcmpl-openaitest",
			"object":  "chat.completion.chunk",
			"created": 0,
			"model":   req.Model,
			"choices": []any{},
		}
		if delta != nil {
			chunk["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		}
		if u != nil {
			chunk["usage"] = u
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	pieces := step.Pieces
	if pieces == nil {
		pieces = words(step.Text)
	}
	for _, p := range pieces {
		send(map[string]any{"content": p}, nil, nil)
	}
	if step.Broken {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": step.Error, "type": "server_error"}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		return
	}
	for i, c := range calls {
		args := c.Function.Arguments
		head := toolCall{Index: &i, ID: c.ID, Type: "function", Function: function{Name: c.Function.Name, Arguments: args[:len(args)/2]}}
		tail := toolCall{Index: &i, Function: function{Arguments: args[len(args)/2:]}}
		send(map[string]any{"tool_calls": []toolCall{head}}, nil, nil)
		send(map[string]any{"tool_calls": []toolCall{tail}}, nil, nil)
	}
	send(map[string]any{}, finishReason(calls), nil)
	if req.includeUsage {
		send(nil, nil, usage(step.Usage))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// words splits text after each space.
func words(text string) []string {
	var out []string
	for text != "" {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			return append(out, text)
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

func writeError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": message,
		"type":    http.StatusText(status),
		"code":    status,
	}})
}

// decode reads the parts of a request that tests look at.
func decode(body []byte) (Request, error) {
	var wire struct {
		Model             string `json:"model"`
		Stream            bool   `json:"stream"`
		ParallelToolCalls *bool  `json:"parallel_tool_calls"`
		StreamOptions     struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role      string `json:"role"`
			Name      string `json:"name"`
			Content   string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return Request{}, err
	}
	req := Request{Body: body, Model: wire.Model, Stream: wire.Stream, ParallelToolCalls: wire.ParallelToolCalls, includeUsage: wire.StreamOptions.IncludeUsage}
	for _, m := range wire.Messages {
		msg := Message{Role: m.Role, Name: m.Name, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range wire.Tools {
		if t.Type != "function" {
			return Request{}, fmt.Errorf("tool of type %q", t.Type)
		}
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return req, nil
}
