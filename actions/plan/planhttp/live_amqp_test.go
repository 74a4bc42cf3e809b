package planhttp_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// Across RabbitMQ: the step's agent on a connection of its own, the
// coordinator and the gateway on another; the parts of the step's answer
// reach the plan's event stream in order before its result.
func TestLivePartsOverAMQP(t *testing.T) {
	ex := amqptest.Exchange(t)
	near := amqptest.NewSpace(t, amqpspace.Config{Exchange: ex})
	far := amqptest.NewSpace(t, amqpspace.Config{Exchange: ex})
	coordID, writerID := amqptest.Name("Coord"), amqptest.Name("Writer")
	pl := openaitest.NewServer(t,
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: coordID + "__submit_plan",
			Arguments: `{"steps":[{"agent":"` + writerID + `","action":"write","args":{"topic":"a story"}}],"summary":"A story"}`}}},
		openaitest.Step{Text: "Plan submitted."})
	f := &fixture{t: t, events: make(chan plan.Event, 256), pl: pl}
	plannerID, gwID := amqptest.Name("Planner"), amqptest.Name("Front")
	coord, err := plan.NewCoordinator(coordID, store.NewMemory(), plan.Planner(plannerID), plan.Approver(gwID),
		plan.Logger(testLogger(t)), plan.Observe(func(_ context.Context, e plan.Event) {
			select {
			case f.events <- e:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	planner, err := openai.New(plannerID, openai.Logger(testLogger(t)), openai.BaseURL(pl.URL), openai.APIKey("test"), openai.HTTPClient(pl.Client()))
	if err != nil {
		t.Fatal(err)
	}
	gw := agency.MustNewAgent(gwID)
	w := &writer{parts: make(chan string), started: make(chan struct{})}
	wa := agency.MustNewAgent(writerID)
	agency.Handle(wa, "write", func(ctx context.Context, args Topic) (string, error) {
		close(w.started)
		all := ""
		for p := range w.parts {
			all += p
			if err := agency.Emit(ctx, p); err != nil {
				return "", err
			}
		}
		return all, nil
	}, agency.Describe("Writes about a topic"), agency.AccessBySender(map[string]agency.Access{coordID: agency.Permitted}, agency.Denied))
	if err := far.Add(t.Context(), wa); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{coord.Agent(), planner.Agent(), gw} {
		if err := near.Add(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	h, err := planhttp.Handler(gw, coordID)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)

	planID, steps := f.start()
	_, events := f.subscribe("/plans/"+planID+"/events", u1)
	if ev := f.next(events); ev.name != "open" {
		t.Fatalf("first event: %+v", ev)
	}
	f.ok("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[0]["id"], planID))
	<-w.started
	for i, text := range []string{"Once ", "upon ", "a time."} {
		w.parts <- text
		ev := f.next(events)
		if ev.name != "part" || ev.data["seq"] != float64(i+1) || ev.data["text"] != text {
			t.Fatalf("part %d: %+v", i+1, ev)
		}
		if st := f.stepOf(planID); st["status"] != "action_requested" || st["agent_reply"] != nil {
			t.Fatalf("while the step streams, it is %v with reply %v", st["status"], st["agent_reply"])
		}
	}
	close(w.parts)
	for _, want := range []string{"step_end", "end"} {
		if ev := f.next(events); ev.name != want {
			t.Fatalf("%+v, want %s", ev, want)
		}
	}
	if st := f.stepOf(planID); st["status"] != "completed" || st["agent_reply"] != "Once upon a time." {
		t.Errorf("the step's result: %v %v", st["status"], st["agent_reply"])
	}
}
