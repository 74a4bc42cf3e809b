package human

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// Web is a Front over HTTP, for a person behind a web page or any other
// client: it keeps what it shows, and serves it with the question waiting
// for an answer; the client posts the answers.
//
//	GET  /?after=N  {"lines": [{"seq":…, "conversation":…, "owner":…, "from":…, "text":…}, …],
//	                 "question": {"seq":…, "conversation":…, "owner":…, "from":…, "text":…} or null,
//	                 "next": M}
//	POST /          {"seq": Q, "text": "…"}  → 204, or 409 when Q is not the question whose turn it is
//
// GET returns the lines shown after seq N (oldest first, at most the last
// 1,000 kept) and the question whose turn it is (as a Terminal, questions
// are answered one at a time, oldest first, before anyone who waits for a
// free line: the zero Line, shown as a question with no from and no text);
// next is the after of the following GET. POST answers the question whose
// seq it names, which must be the one whose turn it is: when another
// question came first since the page read it (a question came before a
// free line the person meant to use), or it was withdrawn, or answered
// already, POST changes nothing and answers 409 with the question whose
// turn it is now ("question", null when none), so that an answer never
// reaches a question the person did not see. A body over 64 KiB is
// refused. Web is safe for concurrent use.
//
// A page that shows answers as they come reads server-sent events:
//
//	GET  /events?after=N   text/event-stream
//	  event: line   data: {"seq":…, "conversation":…, "from":…, "text":…}
//	  event: part   data: {"conversation":…, "from":…, "text":…}
//
// first the kept lines after seq N, then each line as it is shown and each
// part of an answer as it comes (ShowPart: the pieces of what "from" is
// saying, before the whole answer comes as a line). A client that reads
// too slowly to keep up with 256 events is let go (its response ends) and
// reconnects with the after of the last line it has, so that a stalled
// page holds no unbounded backlog.
type Web struct {
	mu      sync.Mutex
	seq     int
	lines   []webLine
	waiters []*webWaiter
	subs    map[chan webEvent]struct{} // the /events readers
}

// webEvent is one server-sent event.
type webEvent struct {
	name string // "line" or "part"
	data []byte
}

// webPart is the data of a part event.
type webPart struct {
	Conversation string `json:"conversation"`
	From         string `json:"from"`
	Text         string `json:"text"`
}

// eventBuffer is how many events a /events reader may fall behind by.
const eventBuffer = 256

type webLine struct {
	Seq          int    `json:"seq"`
	Conversation string `json:"conversation"`
	Owner        string `json:"owner,omitempty"`
	From         string `json:"from"`
	Text         string `json:"text"`
}

type webWaiter struct {
	line webLine
	free bool
	ch   chan string // buffered: one answer
}

// keptLines bounds what a Web keeps of what it showed.
const keptLines = 1000

// NewWeb returns an empty Web front; serve it with an http.Server or mount
// it under a path with http.StripPrefix.
func NewWeb() *Web { return &Web{} }

func (w *Web) line(l Line) webLine {
	w.seq++
	return webLine{Seq: w.seq, Conversation: l.Conversation, Owner: l.Owner, From: l.From, Text: l.Text}
}

// Show keeps l for the next GET.
func (w *Web) Show(_ context.Context, l Line) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	wl := w.line(l)
	w.lines = append(w.lines, wl)
	if len(w.lines) > keptLines {
		w.lines = slices.Delete(w.lines, 0, len(w.lines)-keptLines)
	}
	w.publishLocked("line", wl)
	return nil
}

// ShowPart sends l, a piece of what l.From is saying, to the /events
// readers; it is not kept.
func (w *Web) ShowPart(_ context.Context, l Line) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.publishLocked("part", webPart{Conversation: l.Conversation, From: l.From, Text: l.Text})
	return nil
}

// publishLocked sends an event to every /events reader; one whose buffer
// is full is let go. w.mu is held.
func (w *Web) publishLocked(name string, v any) {
	if len(w.subs) == 0 {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	for ch := range w.subs {
		select {
		case ch <- webEvent{name: name, data: data}:
		default:
			delete(w.subs, ch)
			close(ch) // the reader ends its response
		}
	}
}

// events serves GET /events.
func (w *Web) events(rw http.ResponseWriter, r *http.Request) {
	fl, ok := rw.(http.Flusher)
	if !ok {
		httpError(rw, http.StatusInternalServerError, "the server cannot stream events")
		return
	}
	after, _ := strconv.Atoi(r.URL.Query().Get("after"))
	ch := make(chan webEvent, eventBuffer)
	w.mu.Lock()
	var kept []webLine
	for _, l := range w.lines {
		if l.Seq > after {
			kept = append(kept, l)
		}
	}
	if w.subs == nil {
		w.subs = make(map[chan webEvent]struct{})
	}
	w.subs[ch] = struct{}{}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.subs, ch)
		w.mu.Unlock()
	}()
	rw.Header().Set("Content-Type", "text/event-stream")
	rw.Header().Set("Cache-Control", "no-cache")
	rw.WriteHeader(http.StatusOK)
	for _, l := range kept {
		data, _ := json.Marshal(l)
		fmt.Fprintf(rw, "event: line\ndata: %s\n\n", data)
	}
	fl.Flush()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return // fell behind: the client reconnects
			}
			fmt.Fprintf(rw, "event: %s\ndata: %s\n\n", e.name, e.data)
			fl.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// Ask waits for a POST that answers l.
func (w *Web) Ask(ctx context.Context, l Line) (string, error) {
	w.mu.Lock()
	wt := &webWaiter{line: w.line(l), free: l == (Line{}), ch: make(chan string, 1)}
	w.waiters = append(w.waiters, wt)
	w.mu.Unlock()
	select {
	case s := <-wt.ch:
		return s, nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if i := slices.Index(w.waiters, wt); i >= 0 {
		w.waiters = slices.Delete(w.waiters, i, i+1)
		return "", ctx.Err()
	}
	return <-wt.ch, nil // answered as ctx ended: the answer was taken
}

// head returns the index of the waiter whose turn it is, or -1; w.mu is
// held.
func (w *Web) head() int {
	if i := slices.IndexFunc(w.waiters, func(x *webWaiter) bool { return !x.free }); i >= 0 {
		return i
	}
	if len(w.waiters) > 0 {
		return 0
	}
	return -1
}

// ServeHTTP serves GET and POST as Web says.
func (w *Web) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if r.URL.Path == "/events" {
			w.events(rw, r)
			return
		}
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		w.mu.Lock()
		out := struct {
			Lines    []webLine `json:"lines"`
			Question *webLine  `json:"question"`
			Next     int       `json:"next"`
		}{Lines: []webLine{}, Next: after}
		for _, l := range w.lines {
			if l.Seq > after {
				out.Lines = append(out.Lines, l)
				out.Next = l.Seq
			}
		}
		if i := w.head(); i >= 0 {
			q := w.waiters[i].line
			out.Question = &q
		}
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(out)
	case http.MethodPost:
		var in struct {
			Seq  *int   `json:"seq"`
			Text string `json:"text"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(rw, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		err := dec.Decode(&in)
		if err == nil && in.Seq == nil {
			err = errors.New("seq is missing: name the question answered")
		}
		if err != nil {
			status := http.StatusBadRequest
			if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
				status = http.StatusRequestEntityTooLarge
			}
			httpError(rw, status, "the body must be {\"seq\": N, \"text\": \"…\"}, N the seq of the question answered: "+err.Error())
			return
		}
		w.mu.Lock()
		i := w.head()
		if i < 0 || w.waiters[i].line.Seq != *in.Seq {
			conflict := struct {
				Detail   string   `json:"detail"`
				Question *webLine `json:"question"`
			}{Detail: fmt.Sprintf("question %d is not the one whose turn it is: nobody waits for an answer", *in.Seq)}
			if i >= 0 {
				q := w.waiters[i].line
				conflict.Question = &q
				conflict.Detail = fmt.Sprintf("question %d is not the one whose turn it is: question %d is", *in.Seq, q.Seq)
			}
			w.mu.Unlock()
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(rw).Encode(conflict)
			return
		}
		wt := w.waiters[i]
		w.waiters = slices.Delete(w.waiters, i, i+1)
		wt.ch <- in.Text
		w.mu.Unlock()
		rw.WriteHeader(http.StatusNoContent)
	default:
		rw.Header().Set("Allow", "GET, POST")
		httpError(rw, http.StatusMethodNotAllowed, "GET reads, POST answers")
	}
}

func httpError(rw http.ResponseWriter, status int, detail string) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(map[string]string{"detail": detail})
}
