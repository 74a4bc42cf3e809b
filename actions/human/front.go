package human

import (
	"context"
	"io"
	"slices"
	"sync"
)

// Line is one line of what a person sees: who said it, and what, in which
// conversation. A conversation belongs to the agent that started it, so
// two agents that name the same conversation id speak in two
// conversations: Owner tells them apart.
type Line struct {
	Conversation string
	Owner        string // who the conversation belongs to
	From         string // the agent that said it; "" for a note of the front's own
	Text         string
}

// Front is how a person is reached: a terminal ([Terminal]), a web page or
// any HTTP client ([Web]), a script in a test ([Script]). Its methods are called from several
// goroutines at once.
type Front interface {
	// Show shows the person a line. It does not wait for an answer.
	Show(ctx context.Context, l Line) error
	// Ask asks the person something and returns their answer. A Line with
	// a From or a Text is a question, which the front shows; the zero Line
	// waits for whatever the person says next, of their own accord (a
	// user's next message). Ask may block as long as a person needs, until
	// ctx ends; at the end of the person's input it returns io.EOF.
	Ask(ctx context.Context, l Line) (string, error)
}

// PartShower is a Front that shows an answer while it is being made. A
// User whose Front is one asks the holder of the conversation for the
// parts of its answer (agency.Agent.Stream: an LLM agent of actions/openai
// sends the model's text as it comes) and shows each with ShowPart; then
// the whole answer with Show, as for any Front. [Terminal] and [Web] are
// PartShowers.
type PartShower interface {
	Front
	// ShowPart shows l.Text, the next piece of what l.From is saying in
	// l.Conversation, after the pieces before it.
	ShowPart(ctx context.Context, l Line) error
}

// Script is a Front for tests: it answers questions with the lines it was
// given, in order, and records what it was shown and asked. Once the lines
// are used up, Ask returns io.EOF. It is safe for concurrent use.
type Script struct {
	mu      sync.Mutex
	answers []string
	shown   []Line
	asked   []Line
	changed chan struct{} // closed and replaced when shown grows
}

// NewScript returns a Script that gives the answers in order.
func NewScript(answers ...string) *Script {
	return &Script{answers: slices.Clone(answers), changed: make(chan struct{})}
}

// Show records l.
func (s *Script) Show(_ context.Context, l Line) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shown = append(s.shown, l)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// Ask records l and returns the next answer, or io.EOF.
func (s *Script) Ask(ctx context.Context, l Line) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, l)
	if len(s.answers) == 0 {
		return "", io.EOF
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	return a, nil
}

// Shown returns the lines shown so far.
func (s *Script) Shown() []Line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.shown)
}

// Asked returns the lines asked so far, the zero Line for each wait for
// the person's own next line.
func (s *Script) Asked() []Line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asked)
}

// WaitShown waits until at least n lines have been shown, or ctx ends, and
// returns the lines shown.
func (s *Script) WaitShown(ctx context.Context, n int) ([]Line, error) {
	for {
		s.mu.Lock()
		shown, changed := slices.Clone(s.shown), s.changed
		s.mu.Unlock()
		if len(shown) >= n {
			return shown, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return shown, ctx.Err()
		}
	}
}
