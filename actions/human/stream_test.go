package human

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// streamingWriter is an agent that answers a say as the LLM agents of
// actions/openai do: the pieces of its answer as parts (each after gate
// lets it go), then a say back with the whole answer, and the answer as
// the value.
func streamingWriter(t *testing.T, gate func(piece string)) *agency.Agent {
	w := agency.MustNewAgent("Writer")
	agency.Handle(w, "say", func(ctx context.Context, _ SayArgs) (string, error) {
		m := agency.MessageFrom(ctx)
		var whole string
		for _, p := range []string{"It ", "rains."} {
			if err := agency.Emit(ctx, p); err != nil {
				return "", err
			}
			whole += p
			gate(whole)
		}
		back := &agency.Message{To: m.From, Action: "say", Args: SayArgs{Content: whole},
			Meta: map[string]any{metaConversation: m.Meta[metaConversation], metaReply: m.ID}}
		if _, err := agency.AgentFrom(ctx).SendMessage(ctx, back); err != nil {
			return "", err
		}
		return whole, nil
	})
	return w
}

func streamSpace(t *testing.T, agents ...*agency.Agent) {
	t.Helper()
	sp := space.NewLocal()
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	for _, a := range agents {
		if err := sp.Add(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
}

// A Terminal shows an answer as it comes: each piece is on the screen
// before the next is made, and the whole answer that follows only ends
// the line.
func TestTerminalShowsAnswerAsItComes(t *testing.T) {
	scr := newScreen()
	term := NewTerminal(strings.NewReader(""), scr)
	defer term.Close()
	w := streamingWriter(t, func(sofar string) { scr.waitFor(t, "Writer: "+sofar) })
	u, err := NewUser("User", term, StartWith("Writer"))
	if err != nil {
		t.Fatal(err)
	}
	streamSpace(t, w, u.Agent())
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	if err := u.Say(ctx, "weather?"); err != nil {
		t.Fatal(err)
	}
	if got := scr.String(); got != "Writer: It rains.\n" {
		t.Errorf("the screen shows %q, want the answer once", got)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, data string }

// readEvents sends the events of an event stream on ch until it ends.
func readEvents(resp *http.Response, ch chan<- sseEvent) {
	defer close(ch)
	sc := bufio.NewScanner(resp.Body)
	var e sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			e.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			e.data = strings.TrimPrefix(line, "data: ")
		case line == "":
			ch <- e
			e = sseEvent{}
		}
	}
}

// A Web front sends the parts of an answer to /events as they come, each
// before the next is made, then the whole answer as a line.
func TestWebEventsLive(t *testing.T) {
	web := NewWeb()
	srv := httptest.NewServer(web)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := make(chan sseEvent, 16)
	go readEvents(resp, events)
	next := func() sseEvent {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-ctx.Done():
			t.Fatal("no event came")
		}
		return sseEvent{}
	}
	var got []sseEvent
	w := streamingWriter(t, func(string) { got = append(got, next()) }) // a piece is on the page before the next is made
	u, err := NewUser("User", web, StartWith("Writer"))
	if err != nil {
		t.Fatal(err)
	}
	streamSpace(t, w, u.Agent())
	if err := u.Say(ctx, "weather?"); err != nil {
		t.Fatal(err)
	}
	got = append(got, next())
	var texts []string
	for _, e := range got {
		var v struct{ From, Text string }
		if err := json.Unmarshal([]byte(e.data), &v); err != nil || v.From != "Writer" {
			t.Fatalf("event %+v: %v", e, err)
		}
		texts = append(texts, e.name+":"+v.Text)
	}
	if want := []string{"part:It ", "part:rains.", "line:It rains."}; strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", texts, want)
	}
	cancel()
	for range events { // the reader ends with the response
	}
}
