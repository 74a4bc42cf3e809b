package planhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/seed72275b23/agency-go/actions/plan/internal/front"
	"github.com/seed72275b23/agency-go/agency"
)

// keepAlive is how often an idle event stream gets a comment, so that
// proxies do not take it for dead.
const keepAlive = 20 * time.Second

// watched is one thing the coordinator's watch_plan stream yields.
type watched struct {
	m   *agency.Message
	err error
}

// events serves GET /plans/{plan_id}/events: the parts of the answers of
// the plan's steps while they run, as server-sent events, through the
// coordinator's watch_plan (a stream), under the rule of GET /steps: the
// user's plan, or 404.
//
//	event: open      data: {"plan_id": …}
//	event: part      data: {"step_id": …, "seq": N, "text": …}   (N from 1 in each step's stream)
//	event: step_end  data: {"step_id": …}                        (the step's answer came: read the plan again)
//	event: end       data: {"plan_id": …}                        (the plan is finished: nothing more will come)
//
// After open come the parts kept of the steps running now (the newest, at
// most 256 or 64 KiB a step), then each as it comes. A plan that is
// finished already answers 204 (an EventSource stops there). A stream
// that ends without end (the reader fell behind, the coordinator left) is
// to be opened again.
func (h *handler) events(w http.ResponseWriter, r *http.Request, user string) *httpError {
	q := front.Watch{UserID: user, PlanID: r.PathValue("plan_id")}
	if e := badID("path", "plan_id", q.PlanID); e != nil {
		return e
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return h.internal(r, "the ResponseWriter cannot flush: no event stream")
	}
	ctx, cancel := context.WithCancel(r.Context())
	// The coordinator opens the watch, or refuses it, at once: one that
	// does not within Timeout is 504.
	timedOut := make(chan struct{})
	timer := time.AfterFunc(h.cfg.timeout, func() { close(timedOut); cancel() })
	items := make(chan watched)
	go func() {
		defer close(items)
		for m, err := range h.client.from.Stream(ctx, h.client.coordinator, "watch_plan", q) {
			select {
			case items <- watched{m, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range items { // the watch has stopped
		}
	}()

	first, ok := <-items
	if !timer.Stop() {
		<-timedOut
		return errorf(http.StatusGatewayTimeout, "the coordinator %s did not answer in time", h.client.coordinator)
	}
	if !ok {
		return h.internal(r, "the watch ended without a word")
	}
	if first.err != nil {
		return h.fail(r, first.err)
	}
	if first.m.Action != agency.PartAction {
		rc, err := agency.Value[front.Receipt](first.m)
		switch {
		case err != nil:
			return h.internal(r, err)
		case rc.Refused != "":
			return h.fail(r, &refusal{rc})
		}
		w.WriteHeader(http.StatusNoContent) // finished: nothing will come
		return nil
	}

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	writePart(w, first.m)
	fl.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-items:
			if !ok || it.err != nil {
				return nil // the client, or the coordinator, went away
			}
			if it.m.Action != agency.PartAction {
				if rc, err := agency.Value[front.Receipt](it.m); err == nil && rc.Status == front.WatchFinished {
					writeEvent(w, "end", map[string]string{"plan_id": rc.PlanID})
					fl.Flush()
				}
				return nil
			}
			writePart(w, it.m)
			fl.Flush()
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		}
	}
}

// writePart writes a LiveEvent of the watch as the event of its kind.
func writePart(w http.ResponseWriter, m *agency.Message) {
	e, err := agency.Value[front.LiveEvent](m)
	if err != nil {
		return
	}
	switch e.Kind {
	case front.LiveOpen:
		writeEvent(w, "open", map[string]string{"plan_id": e.PlanID})
	case front.LivePart:
		writeEvent(w, "part", partJSON{StepID: e.StepID, Seq: e.Seq, Text: e.Text})
	case front.LiveStepEnd:
		writeEvent(w, "step_end", map[string]string{"step_id": e.StepID})
	}
}

type partJSON struct {
	StepID string `json:"step_id"`
	Seq    int    `json:"seq"`
	Text   string `json:"text"`
}

func writeEvent(w http.ResponseWriter, name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
}
