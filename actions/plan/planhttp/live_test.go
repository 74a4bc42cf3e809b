package planhttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

type Topic struct {
	Topic string `json:"topic" validate:"min=1"`
}

// writer is an agent whose write action emits, as parts of its answer,
// the texts the test sends it, and answers with all of them once the test
// closes the channel.
type writer struct {
	parts   chan string
	started chan struct{} // closed when write runs
}

func addWriter(t *testing.T, f *fixture) *writer {
	t.Helper()
	w := &writer{parts: make(chan string), started: make(chan struct{})}
	a := agency.MustNewAgent("WriterAgent")
	agency.Handle(a, "write", func(ctx context.Context, args Topic) (string, error) {
		close(w.started)
		var all strings.Builder
		for {
			select {
			case p, ok := <-w.parts:
				if !ok {
					return all.String(), nil
				}
				all.WriteString(p)
				if err := agency.Emit(ctx, p); err != nil {
					return "", err
				}
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}, agency.Describe("Writes about a topic"), agency.AccessBySender(map[string]agency.Access{"GroupChatManager": agency.Permitted}, agency.Denied))
	if err := f.sp.Add(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return w
}

// writeScript is the planner's plan of one step: WriterAgent.write.
func writeScript() []openaitest.Step {
	return []openaitest.Step{
		{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan",
			Arguments: `{"steps":[{"agent":"WriterAgent","action":"write","args":{"topic":"a story"}}],"summary":"A story"}`}}},
		{Text: "Plan submitted."},
	}
}

// sse is an event read from a text/event-stream.
type sse struct {
	name string
	data map[string]any
}

// subscribe opens GET path as a server-sent event stream with the given
// headers; it returns the answer and a channel of its events, closed when
// the stream ends.
func (f *fixture) subscribe(path string, header map[string]string) (*http.Response, <-chan sse) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan sse, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = sse{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			}
		}
	}()
	return resp, ch
}

// next returns the next event of ch, failing the test when none comes.
func (f *fixture) next(ch <-chan sse) sse {
	f.t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			f.t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		f.t.Fatal("no event within 10s")
	}
	return sse{}
}

func (f *fixture) stepOf(planID string) map[string]any {
	f.t.Helper()
	var steps []map[string]any
	_ = json.Unmarshal(f.ok("GET", "/steps/"+planID, ""), &steps)
	if len(steps) != 1 {
		f.t.Fatalf("steps: %v", steps)
	}
	return steps[0]
}

// The parts of a running step's answer reach a subscriber of the plan's
// event stream in order, while the step runs and before its result; a
// subscriber that comes late gets the parts so far; the result is
// recorded as before; and nobody but the plan's user sees them.
func TestLivePartsOverSSE(t *testing.T) {
	f := newFixture(t, nil, writeScript()...)
	w := addWriter(t, f)
	planID, steps := f.start()

	resp, events := f.subscribe("/plans/"+planID+"/events", u1)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /plans/%s/events: %d %s", planID, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if ev := f.next(events); ev.name != "open" || ev.data["plan_id"] != planID {
		t.Fatalf("first event: %+v", ev)
	}
	// Another user, or nobody, cannot watch the plan.
	u2 := map[string]string{"x-ms-client-principal-id": "u2"}
	if resp, data := f.request("GET", "/plans/"+planID+"/events", "", u2); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another user's watch: %d %s", resp.StatusCode, data)
	}
	if resp, data := f.request("GET", "/plans/"+planID+"/events", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a watch without a user: %d %s", resp.StatusCode, data)
	}

	f.ok("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[0]["id"], planID))
	<-w.started
	stepID := steps[0]["id"]
	for i, text := range []string{"Once ", "upon "} {
		w.parts <- text
		ev := f.next(events)
		if ev.name != "part" || ev.data["step_id"] != stepID || ev.data["seq"] != float64(i+1) || ev.data["text"] != text {
			t.Fatalf("part %d: %+v", i+1, ev)
		}
		// The step still runs: no result yet.
		if st := f.stepOf(planID); st["status"] != "action_requested" || st["agent_reply"] != nil {
			t.Fatalf("while the step streams, it is %v with reply %v", st["status"], st["agent_reply"])
		}
	}

	// A late subscriber gets the parts so far, in order.
	_, late := f.subscribe("/plans/"+planID+"/events", u1)
	var got []string
	for _, want := range []string{"open", "part", "part"} {
		ev := f.next(late)
		if ev.name != want {
			t.Fatalf("late subscriber: %s, want %s", ev.name, want)
		}
		if ev.name == "part" {
			got = append(got, fmt.Sprint(ev.data["seq"], ev.data["text"]))
		}
	}
	if strings.Join(got, "|") != "1Once |2upon " {
		t.Errorf("late subscriber's parts: %q", got)
	}

	w.parts <- "a time."
	if ev := f.next(events); ev.name != "part" || ev.data["seq"] != float64(3) {
		t.Fatalf("part 3: %+v", ev)
	}
	close(w.parts)
	if ev := f.next(events); ev.name != "step_end" || ev.data["step_id"] != stepID {
		t.Fatalf("after the parts: %+v, want step_end", ev)
	}
	if ev := f.next(events); ev.name != "end" {
		t.Fatalf("after the last step: %+v, want end", ev)
	}
	if _, more := <-events; more {
		t.Error("the stream goes on after end")
	}
	st := f.stepOf(planID)
	if st["status"] != "completed" || st["agent_reply"] != "Once upon a time." {
		t.Errorf("the step's result: %v %v", st["status"], st["agent_reply"])
	}
	f.wait("completed", func(e plan.Event) bool {
		return e.Kind == plan.PlanStatusEvent && e.Status == string(plan.PlanCompleted)
	})
	// A finished plan has nothing more to show: 204, which an EventSource
	// does not open again.
	if resp, data := f.request("GET", "/plans/"+planID+"/events", "", u1); resp.StatusCode != http.StatusNoContent {
		t.Errorf("a finished plan's events: %d %s", resp.StatusCode, data)
	}
}

// A person sees, in a real browser, the answer of a running step grow
// part by part while the step still runs, then its result.
func TestBrowserLiveParts(t *testing.T) {
	exe := browser(t)
	f := newFixture(t, []planhttp.Option{planhttp.DevUser("u1")}, writeScript()...)
	w := addWriter(t, f)
	ctx := openBrowser(t, exe)
	row := `#steps tr[data-seq="1"]`
	live := func(text string) chromedp.Action {
		return chromedp.WaitVisible(`//tr[@data-seq="1"][@data-status="action_requested"]//div[@class="live"][contains(., "`+text+`")]`, chromedp.BySearch)
	}
	err := chromedp.Run(ctx,
		chromedp.Navigate(f.srv.URL+"/"),
		chromedp.WaitVisible("#task-description", chromedp.ByQuery),
		chromedp.SendKeys("#task-description", "Write a story", chromedp.ByQuery),
		chromedp.Click("#task-create", chromedp.ByQuery),
		chromedp.WaitVisible(row+`[data-status="awaiting_feedback"] button.approve`, chromedp.ByQuery),
		chromedp.Click(row+" button.approve", chromedp.ByQuery),
	)
	if err != nil {
		t.Fatal(err)
	}
	<-w.started
	w.parts <- "Once "
	if err := chromedp.Run(ctx, live("Once ")); err != nil {
		t.Fatal(err)
	}
	w.parts <- "upon "
	var shown, status string
	var ok bool
	err = chromedp.Run(ctx, live("Once upon "),
		chromedp.Text(row+" .live", &shown, chromedp.ByQuery),
		chromedp.AttributeValue(row, "data-status", &status, &ok, chromedp.ByQuery))
	if err != nil {
		t.Fatal(err)
	}
	// The step has not answered: the handler waits for the test.
	if strings.TrimSpace(shown) != "Once upon" || status != "action_requested" {
		t.Errorf("while the step runs the page shows %q, status %q", shown, status)
	}
	w.parts <- "a time."
	close(w.parts)
	var reply string
	err = chromedp.Run(ctx,
		chromedp.WaitVisible(row+`[data-status="completed"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#plan-status.s-completed`, chromedp.ByQuery),
		chromedp.Text(row+" td:nth-child(5)", &reply, chromedp.ByQuery))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(reply) != "Once upon a time." {
		t.Errorf("the completed step shows %q", reply)
	}
}

// A step whose agent emits nothing shows no part: its watchers hear only
// that it ended, and its result is recorded as before.
func TestLiveStepWithoutParts(t *testing.T) {
	f := newFixture(t, nil, script()...)
	planID, steps := f.start()
	_, events := f.subscribe("/plans/"+planID+"/events", u1)
	if ev := f.next(events); ev.name != "open" {
		t.Fatalf("first event: %+v", ev)
	}
	f.ok("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[0]["id"], planID))
	if ev := f.next(events); ev.name != "step_end" || ev.data["step_id"] != steps[0]["id"] {
		t.Fatalf("after the approval: %+v, want step_end", ev)
	}
	f.wait("step 1 completed", func(e plan.Event) bool {
		return e.Kind == plan.StepStatusEvent && e.StepID == steps[0]["id"] && e.Status == string(plan.Completed)
	})
	var got []map[string]any
	_ = json.Unmarshal(f.ok("GET", "/steps/"+planID, ""), &got)
	if got[0]["status"] != "completed" || got[0]["agent_reply"] != "Record of Jessica Smith" || got[1]["status"] != "awaiting_feedback" {
		t.Errorf("the steps: %v; %v", got[0], got[1])
	}
}

// A coordinator that leaves while a step streams, and comes back on the
// same store: nothing of the first run is recorded (its answer has nobody
// to go to), the step is sent again when its lease runs out, with the same
// idempotency key, its parts reach the new coordinator's watchers, and its
// answer is the step's result.
func TestLiveCoordinatorRestart(t *testing.T) {
	st := store.NewMemory()
	f := newFixtureOn(t, st, []plan.Option{plan.Lease(300 * time.Millisecond)}, nil, writeScript()...)
	type run struct {
		key   string
		parts chan string
		done  chan error // what the handler returned
	}
	runs := make(chan run, 2)
	a := agency.MustNewAgent("WriterAgent")
	agency.Handle(a, "write", func(ctx context.Context, args Topic) (string, error) {
		key, _ := agency.MessageFrom(ctx).Meta["idempotency_key"].(string)
		r := run{key: key, parts: make(chan string), done: make(chan error, 1)}
		runs <- r
		var all strings.Builder
		for {
			select {
			case p, ok := <-r.parts:
				if !ok {
					r.done <- nil
					return all.String(), nil
				}
				all.WriteString(p)
				if err := agency.Emit(ctx, p); err != nil {
					r.done <- err
					return "", err
				}
			case <-ctx.Done():
				r.done <- ctx.Err()
				return "", ctx.Err()
			}
		}
	}, agency.AccessBySender(map[string]agency.Access{"GroupChatManager": agency.Permitted}, agency.Denied))
	if err := f.sp.Add(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	planID, steps := f.start()
	_, events := f.subscribe("/plans/"+planID+"/events", u1)
	if ev := f.next(events); ev.name != "open" {
		t.Fatalf("first event: %+v", ev)
	}
	f.ok("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[0]["id"], planID))
	first := <-runs
	first.parts <- "Once "
	if ev := f.next(events); ev.name != "part" || ev.data["text"] != "Once " {
		t.Fatalf("the first run's part: %+v", ev)
	}
	if err := f.sp.Remove(t.Context(), "GroupChatManager"); err != nil {
		t.Fatal(err)
	}
	if _, more := <-events; more {
		t.Error("the watch goes on without its coordinator")
	}
	// The first run is told to stop (nobody reads its parts: its next part
	// finds the coordinator gone, if the [cancel] of the stream has not
	// come first), and answers nobody.
	select {
	case first.parts <- "upon ":
	case err := <-first.done:
		first.done <- err
	}
	if err := <-first.done; !errors.Is(err, context.Canceled) && !errors.Is(err, agency.ErrStreamClosed) {
		t.Fatalf("the first run after the coordinator left: %v", err)
	}
	coord, err := plan.NewCoordinator("GroupChatManager", st, plan.Lease(300*time.Millisecond), plan.Logger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sp.Add(t.Context(), coord.Agent()); err != nil {
		t.Fatal(err)
	}
	var again run
	select {
	case again = <-runs:
	case <-time.After(10 * time.Second):
		t.Fatal("the step was not sent again")
	}
	if again.key != first.key || again.key != steps[0]["id"] {
		t.Errorf("idempotency keys: %q then %q, want the step id %v", first.key, again.key, steps[0]["id"])
	}
	_, events = f.subscribe("/plans/"+planID+"/events", u1)
	if ev := f.next(events); ev.name != "open" {
		t.Fatalf("first event: %+v", ev)
	}
	again.parts <- "Once upon a time."
	if ev := f.next(events); ev.name != "part" || ev.data["seq"] != float64(1) || ev.data["text"] != "Once upon a time." {
		t.Fatalf("the second run's part: %+v", ev)
	}
	close(again.parts)
	if err := <-again.done; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := f.stepOf(planID)
		if s["status"] == "completed" {
			if s["agent_reply"] != "Once upon a time." || s["attempts"] != float64(2) {
				t.Errorf("the step: %v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step is %v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
