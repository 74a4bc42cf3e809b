package human

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// ErrTerminalClosed is returned by the methods of a Terminal after its
// Close: the person can no longer be shown or asked anything there. (The
// end of the person's input is io.EOF.)
var ErrTerminalClosed = errors.New("human: terminal closed")

// Terminal is a Front on a text stream, usually stdin and stdout: several
// agents (the user and an operator, say) can share it, with one reader of
// the input.
//
// Show writes "From: Text" and a newline, or the Text as it is when From is
// empty. ShowPart writes an answer as it comes: "From: " and the pieces,
// each as it arrives, on one line; the whole answer's Show that follows
// then only ends that line. A question (an Ask with a From or a Text) takes the next input
// line before anyone who waits for a free line; questions are answered
// one at a time, oldest first, and each is written (as Show writes it,
// unless its Text is empty) when its turn comes. A question whose ctx ends
// first is withdrawn: the line goes to the next.
//
// The Terminal reads its input only while someone waits for a line. Its
// methods are safe for concurrent use.
type Terminal struct {
	out io.Writer
	sc  *bufio.Scanner

	mu      sync.Mutex
	wmu     sync.Mutex // serializes writes
	waiters []*waiter
	lines   []string // read, not yet taken
	reading bool     // a goroutine reads a line
	end     error    // io.EOF, a read error, or ErrTerminalClosed

	partial *Line // the answer whose pieces are written, on a line not yet ended; under wmu
}

type waiter struct {
	question bool
	line     Line
	shown    bool
	ch       chan string // buffered: one line
}

// NewTerminal returns a Terminal that reads lines from in and writes to out.
// It reads in a goroutine of its own while an Ask waits; a read under way
// when nobody waits any more (or after Close) ends when in gives a line or
// ends.
func NewTerminal(in io.Reader, out io.Writer) *Terminal {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20) // a pasted text may be a long line
	return &Terminal{out: out, sc: sc}
}

// Show writes l.
func (t *Terminal) Show(_ context.Context, l Line) error {
	t.mu.Lock()
	closed := t.end == ErrTerminalClosed
	t.mu.Unlock()
	if closed {
		return ErrTerminalClosed
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if p := t.partial; p != nil && p.From == l.From && p.Conversation == l.Conversation && strings.HasSuffix(p.Text, l.Text) {
		// The answer whose pieces are on the line: end the line.
		t.partial = nil
		_, _ = io.WriteString(t.out, "\n")
		return nil
	}
	t.writeLocked(format(l))
	return nil
}

// ShowPart writes l.Text, a piece of what l.From is saying, on the line
// of the pieces before it (see Terminal).
func (t *Terminal) ShowPart(_ context.Context, l Line) error {
	t.mu.Lock()
	closed := t.end == ErrTerminalClosed
	t.mu.Unlock()
	if closed {
		return ErrTerminalClosed
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	text := l.Text
	if p := t.partial; p == nil || p.From != l.From || p.Conversation != l.Conversation {
		t.writeLocked(l.From + ": ")
		t.partial = &Line{Conversation: l.Conversation, From: l.From}
		// A line break that parts the replies of a turn (what the model
		// wrote beside a tool call, then its answer) is not written on a
		// line that is new already.
		text = strings.TrimLeft(text, "\n")
	}
	t.partial.Text += l.Text
	_, _ = io.WriteString(t.out, text)
	return nil
}

// Printf writes a formatted text as it is, between whole lines of the
// others.
func (t *Terminal) Printf(format string, args ...any) {
	t.write(fmt.Sprintf(format, args...))
}

func format(l Line) string {
	if l.From == "" {
		return l.Text
	}
	return l.From + ": " + l.Text + "\n"
}

func (t *Terminal) write(s string) {
	if s == "" {
		return
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.writeLocked(s)
}

// writeLocked writes s on a line of its own: a line of pieces under way
// is ended first. t.wmu is held.
func (t *Terminal) writeLocked(s string) {
	if t.partial != nil {
		t.partial = nil
		_, _ = io.WriteString(t.out, "\n")
	}
	_, _ = io.WriteString(t.out, s)
}

// Ask returns the next input line, without its line ending; see Terminal
// for who gets which line.
func (t *Terminal) Ask(ctx context.Context, l Line) (string, error) {
	w := &waiter{question: l != (Line{}), line: l, ch: make(chan string, 1)}
	t.mu.Lock()
	if t.end == ErrTerminalClosed || (t.end != nil && len(t.lines) == 0) {
		err := t.end
		t.mu.Unlock()
		return "", err
	}
	t.waiters = append(t.waiters, w)
	show := t.dispatch()
	t.mu.Unlock()
	t.write(show)

	select {
	case line, ok := <-w.ch:
		if !ok {
			return "", t.ended()
		}
		return line, nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	if i := slices.Index(t.waiters, w); i >= 0 {
		t.waiters = slices.Delete(t.waiters, i, i+1)
	}
	select {
	case line, ok := <-w.ch:
		if ok { // given to w as ctx ended: the next waiter's
			t.lines = slices.Insert(t.lines, 0, line)
		}
	default:
	}
	show = t.dispatch()
	t.mu.Unlock()
	t.write(show)
	return "", ctx.Err()
}

func (t *Terminal) ended() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.end
}

// dispatch hands read lines to waiters, questions first, starts a read if
// a waiter is left without a line, and returns the text of the question
// whose turn has come, to write; t.mu is held.
func (t *Terminal) dispatch() string {
	for len(t.lines) > 0 {
		i := slices.IndexFunc(t.waiters, func(w *waiter) bool { return w.question })
		if i < 0 && len(t.waiters) > 0 {
			i = 0
		}
		if i < 0 {
			break
		}
		w := t.waiters[i]
		t.waiters = slices.Delete(t.waiters, i, i+1)
		w.ch <- t.lines[0]
		t.lines = t.lines[1:]
	}
	if t.end != nil && len(t.lines) == 0 {
		for _, w := range t.waiters {
			close(w.ch)
		}
		t.waiters = nil
	}
	if len(t.waiters) > 0 && !t.reading {
		t.reading = true
		go t.read()
	}
	i := slices.IndexFunc(t.waiters, func(w *waiter) bool { return w.question })
	if i < 0 || t.waiters[i].shown {
		return ""
	}
	t.waiters[i].shown = true
	if t.waiters[i].line.Text == "" {
		return ""
	}
	return format(t.waiters[i].line)
}

// read reads one line for the waiters; dispatch starts another read while
// some are left.
func (t *Terminal) read() {
	ok := t.sc.Scan()
	line := strings.TrimSuffix(t.sc.Text(), "\r")

	t.mu.Lock()
	switch {
	case ok && t.end == nil:
		t.lines = append(t.lines, line)
	case !ok && t.end == nil:
		t.end = t.sc.Err()
		if t.end == nil {
			t.end = io.EOF
		}
	}
	t.reading = false
	show := t.dispatch()
	t.mu.Unlock()
	t.write(show)
}

// Close ends the Terminal: waiting and later Asks return ErrTerminalClosed, and the
// reader stops once its current read returns. Close cannot interrupt that
// read; closing the input does.
func (t *Terminal) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.end == nil {
		t.end = ErrTerminalClosed
	}
	t.lines = nil
	t.dispatch()
	return nil
}
