package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// event is one message on the exchange, as tail prints it and Studio's
// timeline shows it.
type event struct {
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	ID     string    `json:"id,omitempty"`
	Parent string    `json:"parent_id,omitempty"`
	// Kind is "request" (an action), "response", "error", or "wire" for
	// input that is not a message.
	Kind   string `json:"kind"`
	Action string `json:"action"`
	// Answers is, on a response or error, the action of the request it
	// answers, when the request passed by too.
	Answers string `json:"answers,omitempty"`
	// Args is a request's arguments or a response's value.
	Args      json.RawMessage `json:"args,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
	Error     string          `json:"error,omitempty"`
	// Conversation is the message's __meta__.conversation.
	Conversation string `json:"conversation,omitempty"`
	// Elapsed is, on a response or error, the milliseconds since the
	// request passed.
	Elapsed *float64 `json:"elapsed_ms,omitempty"`
	// Wire is the message as it travelled (as it would, in process).
	Wire json.RawMessage `json:"wire"`

	// conversation, when set, makes this no message but the news of a
	// conversation that changed, for Studio's pages.
	conversation *conversation
}

// maxPending bounds the requests a timeline remembers while it waits for
// their answers (a request answered by no one, or a broadcast, stays).
const maxPending = 10000

// timeline turns message bodies into events, pairing answers with the
// requests they answer. It is safe for concurrent use.
type timeline struct {
	mu      sync.Mutex
	seq     int64
	pending map[string]pendingRequest // by message id
}

type pendingRequest struct {
	at     time.Time
	action string
}

func newTimeline() *timeline {
	return &timeline{pending: make(map[string]pendingRequest)}
}

// event makes the event of the message body that passed at at.
func (tl *timeline) event(at time.Time, body []byte) event {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.seq++
	ev := event{Seq: tl.seq, At: at, Wire: compact(body)}
	m, err := agency.DecodeMessage(body)
	if err != nil {
		ev.Kind, ev.Error = "wire", err.Error()
		return ev
	}
	ev.From, ev.To, ev.ID, ev.Parent, ev.Action = m.From, m.To, m.ID, m.ParentID, m.Action
	if c, ok := m.Meta["conversation"].(string); ok {
		ev.Conversation = c
	}
	switch {
	case m.IsResponse():
		ev.Kind = "response"
		var ae *agency.ActionError
		if errors.As(m.Err(), &ae) {
			ev.Kind, ev.ErrorType, ev.Error = "error", string(ae.Type), ae.Text
		} else if v, err := agency.Value[json.RawMessage](m); err == nil {
			ev.Args = v
		}
		if p, ok := tl.pending[m.ParentID]; ok && m.ParentID != "" {
			ev.Answers = p.action
			ms := float64(at.Sub(p.at).Microseconds()) / 1000
			ev.Elapsed = &ms
			if m.To != agency.Broadcast {
				delete(tl.pending, m.ParentID) // Request takes the first answer
			}
		}
	default:
		ev.Kind = "request"
		if raw, ok := m.Args.(json.RawMessage); ok {
			ev.Args = raw
		} else if m.Args == nil {
			ev.Args = json.RawMessage("{}")
		} else if b, err := json.Marshal(m.Args); err == nil {
			ev.Args = b
		}
		if len(tl.pending) >= maxPending {
			clear(tl.pending)
		}
		tl.pending[m.ID] = pendingRequest{at: at, action: m.Action}
	}
	return ev
}

// compact returns body as one line of JSON, or as a JSON string if it is
// not JSON.
func compact(body []byte) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, body) == nil {
		return buf.Bytes()
	}
	b, _ := json.Marshal(string(body))
	return b
}

// filter selects events by agent and action.
type filter struct {
	agent, action string
	// answered holds the ids of the requests of action, so that their
	// answers pass too.
	answered map[string]bool
}

// match reports whether ev passes the filter.
func (f *filter) match(ev event) bool {
	if f.agent != "" && ev.From != f.agent && ev.To != f.agent {
		return false
	}
	if f.action == "" {
		return true
	}
	if ev.Kind == "request" {
		if ev.Action != f.action {
			return false
		}
		if f.answered == nil || len(f.answered) >= maxPending {
			f.answered = make(map[string]bool)
		}
		f.answered[ev.ID] = true
		return true
	}
	return ev.Parent != "" && f.answered[ev.Parent]
}

// line formats ev as one line for a person.
func (ev event) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  ", ev.At.Local().Format("15:04:05.000"))
	switch ev.Kind {
	case "wire":
		fmt.Fprintf(&b, "(not a message: %s) %s", ev.Error, clip(string(ev.Wire)))
		return b.String()
	case "request":
		fmt.Fprintf(&b, "%s → %s  %s %s", ev.From, ev.To, ev.Action, clip(string(ev.Args)))
	case "response":
		fmt.Fprintf(&b, "%s → %s  %s %s", ev.From, ev.To, answerLabel(ev), clip(string(ev.Args)))
	case "error":
		fmt.Fprintf(&b, "%s → %s  %s %s: %s", ev.From, ev.To, answerLabel(ev), ev.ErrorType, clip(ev.Error))
	}
	if ev.Elapsed != nil {
		fmt.Fprintf(&b, "  (%.1f ms)", *ev.Elapsed)
	}
	if ev.Conversation != "" {
		fmt.Fprintf(&b, "  [conversation %s]", ev.Conversation)
	}
	return b.String()
}

// answerLabel names what a response answers.
func answerLabel(ev event) string {
	if ev.Answers != "" {
		return ev.Action + " to " + ev.Answers
	}
	return ev.Action
}

// clip shortens a text for a line of its own.
func clip(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}
