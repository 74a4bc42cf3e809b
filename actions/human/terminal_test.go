package human

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// safety bounds every wait of a test; no test sleeps to synchronise.
const safety = 10 * time.Second

// screen is a writer whose text a test can wait for.
type screen struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newScreen() *screen { return &screen{changed: make(chan struct{}, 1)} }

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *screen) waitFor(t *testing.T, text string) {
	t.Helper()
	timeout := time.After(safety)
	for !strings.Contains(s.String(), text) {
		select {
		case <-s.changed:
		case <-timeout:
			t.Fatalf("waited in vain for %q; the screen shows:\n%s", text, s.String())
		}
	}
}

// answer is what an Ask returned.
type answer struct {
	line string
	err  error
}

func ask(ctx context.Context, term *Terminal, l Line) chan answer {
	ch := make(chan answer, 1)
	go func() {
		line, err := term.Ask(ctx, l)
		ch <- answer{line, err}
	}()
	return ch
}

func get(t *testing.T, ch chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(safety):
		t.Fatal("no answer")
		return answer{}
	}
}

// waiters returns how many Asks wait on the terminal.
func (t *Terminal) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.waiters)
}

func waitWaiting(t *testing.T, term *Terminal, n int) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for term.waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", term.waiting(), n)
		}
		time.Sleep(time.Millisecond) // polls a counter; asserts no timing
	}
}

// A question takes the next line before whoever waits for a free line;
// questions come one at a time, each written when its turn comes; one
// withdrawn lets the line go to the next.
func TestTerminalQuestionsFirst(t *testing.T) {
	in, w := io.Pipe()
	out := newScreen()
	term := NewTerminal(in, out)
	defer w.Close()
	ctx := context.Background()

	free := ask(ctx, term, Line{})
	waitWaiting(t, term, 1)
	q1 := ask(ctx, term, Line{Text: "Allow it? [y/N] "})
	waitWaiting(t, term, 2)
	out.waitFor(t, "Allow it? [y/N] ")
	qctx, withdraw := context.WithCancel(ctx)
	q2 := ask(qctx, term, Line{From: "User", Text: "can you help?"})
	waitWaiting(t, term, 3)
	if strings.Contains(out.String(), "can you help?") {
		t.Fatal("the second question was written before the first was answered")
	}
	io.WriteString(w, "y\n")
	if a := get(t, q1); a.line != "y" || a.err != nil {
		t.Fatalf("the first question got %+v", a)
	}
	out.waitFor(t, "User: can you help?\n")
	withdraw()
	if a := get(t, q2); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("the withdrawn question got %+v", a)
	}
	io.WriteString(w, "hello\r\n")
	if a := get(t, free); a.line != "hello" || a.err != nil {
		t.Fatalf("the free line got %+v", a)
	}
	if err := term.Show(ctx, Line{From: "Assistant", Text: "Hi."}); err != nil {
		t.Fatal(err)
	}
	term.Printf("[%s → %s]\n", "A", "B")
	out.waitFor(t, "Assistant: Hi.\n[A → B]\n")

	// The end of input reaches every waiter and every later Ask.
	a1, a2 := ask(ctx, term, Line{}), ask(ctx, term, Line{From: "X"})
	waitWaiting(t, term, 2)
	w.Close()
	for _, ch := range []chan answer{a1, a2} {
		if a := get(t, ch); !errors.Is(a.err, io.EOF) {
			t.Errorf("after the end of input: %+v", a)
		}
	}
	if _, err := term.Ask(ctx, Line{}); !errors.Is(err, io.EOF) {
		t.Errorf("a later Ask: %v", err)
	}
}

// Lines typed before anyone asks wait for the next Ask; Close ends the
// waits.
func TestTerminalBufferedAndClose(t *testing.T) {
	ctx := context.Background()
	term := NewTerminal(strings.NewReader("one\ntwo\n"), io.Discard)
	for _, want := range []string{"one", "two"} {
		if line, err := term.Ask(ctx, Line{}); line != want || err != nil {
			t.Fatalf("got %q, %v, want %q", line, err, want)
		}
	}
	in, w := io.Pipe()
	defer w.Close()
	term = NewTerminal(in, io.Discard)
	a := ask(ctx, term, Line{})
	waitWaiting(t, term, 1)
	term.Close()
	if got := get(t, a); !errors.Is(got.err, ErrTerminalClosed) {
		t.Errorf("after Close: %+v", got)
	}
	if err := term.Show(ctx, Line{Text: "x"}); !errors.Is(err, ErrTerminalClosed) {
		t.Errorf("Show after Close: %v", err)
	}
	w.Close() // the reader's read returns; it stops
}

func TestScript(t *testing.T) {
	ctx := context.Background()
	s := NewScript("a", "b")
	for _, want := range []string{"a", "b"} {
		if got, err := s.Ask(ctx, Line{From: "X", Text: "?"}); got != want || err != nil {
			t.Fatalf("got %q, %v", got, err)
		}
	}
	if _, err := s.Ask(ctx, Line{}); !errors.Is(err, io.EOF) {
		t.Errorf("when used up: %v", err)
	}
	_ = s.Show(ctx, Line{From: "Y", Text: "shown"})
	if shown, err := s.WaitShown(ctx, 1); err != nil || len(shown) != 1 || shown[0].Text != "shown" {
		t.Errorf("shown %v, %v", shown, err)
	}
	if asked := s.Asked(); len(asked) != 3 || asked[2] != (Line{}) {
		t.Errorf("asked %v", asked)
	}
}
