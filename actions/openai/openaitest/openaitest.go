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
// A request that finds the script empty, or one to another path, fails the
// test and gets HTTP 400, which an agent does not retry.
package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Step is one scripted answer. With Status set (and not 200) the server
// answers with that HTTP status and an OpenAI error body whose message is
// Error; otherwise it answers with an assistant message of Text and
// ToolCalls. With Func set, the step is the one Func returns for the
// request, and the other fields are ignored.
type Step struct {
	Text      string
	ToolCalls []ToolCall
	Status    int
	Error     string
	Func      func(Request) Step
}

// ToolCall is a call of a function tool. An empty ID is filled in
// ("call_1", "call_2", … in the order the server hands them out).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON text
}

// Request is a chat-completions request as the server received it.
type Request struct {
	Header   http.Header
	Body     []byte // the raw body
	Model    string
	Messages []Message
	Tools    []Tool
}

// Message is one message of a request.
type Message struct {
	Role       string
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

	t    testing.TB
	http *httptest.Server

	mu    sync.Mutex
	steps []Step
	reqs  []Request
	calls int // tool call ids handed out
}

// NewServer starts a server with the given script. It is closed when the
// test ends.
func NewServer(t testing.TB, steps ...Step) *Server {
	s := &Server{t: t, steps: steps}
	s.http = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.http.URL + "/v1"
	t.Cleanup(s.http.Close)
	return s
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
		s.t.Errorf("openaitest: unexpected %s %s", r.Method, r.URL.Path)
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
		s.t.Errorf("openaitest: undecodable request: %v\n%s", err, body)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	req.Header = r.Header.Clone()

	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	if len(s.steps) == 0 {
		s.mu.Unlock()
		s.t.Errorf("openaitest: request %d finds the script empty", len(s.Requests()))
		writeError(w, http.StatusBadRequest, "openaitest: the script has no step left")
		return
	}
	step := s.steps[0]
	s.steps = s.steps[1:]
	s.mu.Unlock()

	if step.Func != nil {
		step = step.Func(req)
	}
	if step.Status != 0 && step.Status != http.StatusOK {
		writeError(w, step.Status, step.Error)
		return
	}
	s.writeAnswer(w, req, step)
}

func (s *Server) writeAnswer(w http.ResponseWriter, req Request, step Step) {
	type function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type toolCall struct {
		ID       string   `json:"id"`
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	msg := struct {
		Role      string     `json:"role"`
		Content   string     `json:"content"`
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
	}{Role: "assistant", Content: step.Text}
	finish := "stop"
	for _, c := range step.ToolCalls {
		if c.ID == "" {
			s.mu.Lock()
			s.calls++
			c.ID = fmt.Sprintf("call_%d", s.calls)
			s.mu.Unlock()
		}
		msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: c.ID, Type: "function", Function: function{Name: c.Name, Arguments: c.Arguments}})
		finish = "tool_calls"
	}
	resp := map[string]any{
		"id":      "chatcmpl-openaitest",
		"object":  "chat.completion",
		"created": 0,
		"model":   req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
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
		Model    string `json:"model"`
		Messages []struct {
			Role      string `json:"role"`
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
	req := Request{Body: body, Model: wire.Model}
	for _, m := range wire.Messages {
		msg := Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
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
