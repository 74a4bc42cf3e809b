package human

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type webState struct {
	Lines    []webLine `json:"lines"`
	Question *webLine  `json:"question"`
	Next     int       `json:"next"`
}

func getState(t *testing.T, url string) webState {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s webState
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitQuestion polls, as a page does, until the question whose turn it is
// has the given text, and returns it: the Ask runs in another goroutine.
func waitQuestion(t *testing.T, url, text string) webLine {
	t.Helper()
	for range 10000 {
		if s := getState(t, url); s.Question != nil && s.Question.Text == text {
			return *s.Question
		}
	}
	t.Fatalf("no question %q came", text)
	return webLine{}
}

// answerTo is the body of a POST that answers q with text.
func answerTo(q webLine, text string) string {
	b, _ := json.Marshal(map[string]any{"seq": q.Seq, "text": text})
	return string(b)
}

// A person behind HTTP: GET shows the lines and the question whose turn it
// is (questions before a free line), POST answers it.
func TestWeb(t *testing.T) {
	web := NewWeb()
	srv := httptest.NewServer(web)
	defer srv.Close()
	ctx := context.Background()

	_ = web.Show(ctx, Line{Conversation: "c1", From: "User", Text: "I want a refund"})
	_ = web.Show(ctx, Line{Conversation: "c1", From: "Refunds", Text: "Let me transfer you."})
	s := getState(t, srv.URL+"/?after=0")
	if len(s.Lines) != 2 || s.Lines[1].From != "Refunds" || s.Next != s.Lines[1].Seq || s.Question != nil {
		t.Fatalf("state %+v", s)
	}
	if s := getState(t, srv.URL+"/?after="+itoa(s.Next)); len(s.Lines) != 0 {
		t.Errorf("after next: %+v", s.Lines)
	}
	if code := post(t, srv.URL, `{"seq":1,"text":"hello"}`); code != http.StatusConflict {
		t.Errorf("an answer nobody waits for: %d", code)
	}

	free := make(chan answer, 1)
	go func() { l, err := web.Ask(ctx, Line{}); free <- answer{l, err} }()
	waitQuestion(t, srv.URL, "")
	q := make(chan answer, 1)
	go func() {
		l, err := web.Ask(ctx, Line{Conversation: "c1", From: "User", Text: "Are you there?"})
		q <- answer{l, err}
	}()
	asked := waitQuestion(t, srv.URL, "Are you there?")
	if code := post(t, srv.URL, answerTo(asked, "Yes, the manager here.")); code != http.StatusNoContent {
		t.Fatalf("POST: %d", code)
	}
	if a := get(t, q); a.line != "Yes, the manager here." || a.err != nil {
		t.Errorf("the question got %+v", a)
	}
	s = getState(t, srv.URL)
	if s.Question == nil || s.Question.From != "" || s.Question.Text != "" {
		t.Fatalf("the free line's turn: %+v", s.Question)
	}
	if code := post(t, srv.URL, answerTo(*s.Question, "and one more thing")); code != http.StatusNoContent {
		t.Fatalf("POST: %d", code)
	}
	if a := get(t, free); a.line != "and one more thing" {
		t.Errorf("the free line got %+v", a)
	}

	// A withdrawn question goes; bad bodies and methods are refused.
	qctx, cancel := context.WithCancel(ctx)
	go func() { l, err := web.Ask(qctx, Line{From: "X", Text: "?"}); q <- answer{l, err} }()
	waitQuestion(t, srv.URL, "?")
	cancel()
	if a := get(t, q); !errors.Is(a.err, context.Canceled) {
		t.Errorf("withdrawn: %+v", a)
	}
	if s := getState(t, srv.URL); s.Question != nil {
		t.Errorf("a withdrawn question is still shown: %+v", s.Question)
	}
	for body, want := range map[string]int{`{"txt":"x"}`: 400, `nope`: 400, `{"text":"x"}`: 400, `{"seq":"1","text":"x"}`: 400,
		`{"seq":1,"text":"` + strings.Repeat("a", 70<<10) + `"}`: 413} {
		if code := post(t, srv.URL, body); code != want {
			t.Errorf("POST %.20s: %d, want %d", body, code, want)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A POST answers the question the person saw, or nothing: a question that
// comes between the page's GET and its POST does not take the line meant
// for the free line, and an answer to a question withdrawn meanwhile does
// not go to the free line.
func TestWebAnswersWhatWasSeen(t *testing.T) {
	web := NewWeb()
	srv := httptest.NewServer(web)
	defer srv.Close()
	ctx := context.Background()

	free := make(chan answer, 1)
	go func() { l, err := web.Ask(ctx, Line{}); free <- answer{l, err} }()
	seen := waitQuestion(t, srv.URL, "") // the page shows the free line
	q := make(chan answer, 1)
	go func() { l, err := web.Ask(ctx, Line{From: "Refunds", Text: "Refund the order?"}); q <- answer{l, err} }()
	now := waitQuestion(t, srv.URL, "Refund the order?") // the question comes first now
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(answerTo(seen, "hello everyone")))
	if err != nil {
		t.Fatal(err)
	}
	var conflict struct {
		Detail   string   `json:"detail"`
		Question *webLine `json:"question"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&conflict)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || conflict.Question == nil || conflict.Question.Seq != now.Seq {
		t.Fatalf("a line for the free line while a question waits: %d %+v; want 409 naming question %d", resp.StatusCode, conflict, now.Seq)
	}
	select {
	case a := <-q:
		t.Fatalf("the question took the line meant for the free line: %+v", a)
	default:
	}

	// The question is withdrawn before its answer is posted: the answer
	// does not reach the free line.
	qctx, cancel := context.WithCancel(ctx)
	go func() { l, err := web.Ask(qctx, Line{From: "Sales", Text: "Buy it?"}); q <- answer{l, err} }()
	if code := post(t, srv.URL, answerTo(now, "yes")); code != http.StatusNoContent {
		t.Fatalf("answering the question in turn: %d", code)
	}
	if a := get(t, q); a.line != "yes" {
		t.Fatalf("the refund question got %+v", a)
	}
	buy := waitQuestion(t, srv.URL, "Buy it?")
	cancel()
	if a := get(t, q); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("withdrawn: %+v", a)
	}
	if code := post(t, srv.URL, answerTo(buy, "no thanks")); code != http.StatusConflict {
		t.Errorf("an answer to a withdrawn question: %d, want 409", code)
	}
	if code := post(t, srv.URL, answerTo(seen, "hello everyone")); code != http.StatusNoContent {
		t.Fatalf("the free line, its turn again: %d", code)
	}
	if a := get(t, free); a.line != "hello everyone" {
		t.Errorf("the free line got %+v", a)
	}
}
