// Package demo serves the scripted model that the LLM examples run on with
// -demo: an OpenAI-compatible server in the example's own process (on
// actions/openai/openaitest), which answers each request with what the
// example's script makes of it. No key, no model server, no network
// beyond the loopback.
package demo

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
)

// Model is a scripted model server, running until Close.
type Model struct {
	srv *openaitest.Server
}

// Serve starts a model that answers every request with answer(req).
func Serve(answer func(openaitest.Request) openaitest.Step) *Model {
	m := &Model{}
	// Each step puts itself back at the end of the script: the script
	// never runs out.
	var step openaitest.Step
	step = openaitest.Step{Func: func(req openaitest.Request) openaitest.Step {
		m.srv.Add(step)
		return answer(req)
	}}
	m.srv = openaitest.Serve(step)
	return m
}

// Options point an LLM agent at the model.
func (m *Model) Options() []openai.Option {
	return []openai.Option{openai.BaseURL(m.srv.URL), openai.APIKey("demo"), openai.Model("scripted-demo")}
}

// Close stops the model.
func (m *Model) Close() { m.srv.Close() }

// Last returns the last message of req.
func Last(req openaitest.Request) openaitest.Message {
	if len(req.Messages) == 0 {
		return openaitest.Message{}
	}
	return req.Messages[len(req.Messages)-1]
}

// LastFrom returns the content of the last message of req with the given
// role.
func LastFrom(req openaitest.Request, role string) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == role {
			return req.Messages[i].Content
		}
	}
	return ""
}

// System returns the request's system prompt.
func System(req openaitest.Request) string { return LastFrom(req, "system") }

// Tool returns the name of the request's tool for agent's action (the
// tool's name starts with the agent's id and ends with the action's
// name), or the tool whose name is agent when action is empty.
func Tool(req openaitest.Request, agent, action string) (string, bool) {
	for _, t := range req.Tools {
		if action == "" && t.Name == agent || action != "" && strings.HasPrefix(t.Name, agent) && strings.HasSuffix(t.Name, action) {
			return t.Name, true
		}
	}
	return "", false
}

// ToolCalled returns the name of the tool whose result the last message
// of req is, or "".
func ToolCalled(req openaitest.Request) string {
	last := Last(req)
	if last.Role != "tool" {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		for _, c := range req.Messages[i].ToolCalls {
			if c.ID == last.ToolCallID {
				return c.Name
			}
		}
	}
	return ""
}

var number = regexp.MustCompile(`-?\d+(\.\d+)?`)

// Numbers returns the numbers in text.
func Numbers(text string) []float64 {
	var ns []float64
	for _, s := range number.FindAllString(text, -1) {
		if n, err := strconv.ParseFloat(s, 64); err == nil {
			ns = append(ns, n)
		}
	}
	return ns
}

// Mentions reports whether text holds any of words, in any case: a word
// of text that starts with one of them, a phrase (with a space) or a
// symbol anywhere in it.
func Mentions(text string, words ...string) bool {
	text = strings.ToLower(text)
	fields := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range words {
		if strings.ContainsFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) {
			if strings.Contains(text, w) {
				return true
			}
			continue
		}
		for _, f := range fields {
			if strings.HasPrefix(f, w) {
				return true
			}
		}
	}
	return false
}
