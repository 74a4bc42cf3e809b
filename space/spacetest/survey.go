package spacetest

import (
	"slices"
	"strings"

	"github.com/seed72275b23/agency-go/agency"
)

// agency.Survey lists every other agent in the space with the actions it
// offers the asker (denied ones hidden), and returns on its own: in a space
// that can tell who a broadcast reached, once they all answered; in any
// other, after a quiet period. Answers to the survey never reach the
// asker's ValueHandler.
func testSurvey(e *env) {
	in := &inbox{}
	asker := e.newAgent("Asker", agency.Hooks(in))
	agency.Handle(asker, "own", pong)
	workers := helpAgents(e, 3)
	agency.Handle(workers[0], "secret", pong, agency.AccessForAll(agency.Denied))
	e.add(asker)
	e.add(workers...)

	got, err := agency.Survey(e.ctx(), asker)
	if err != nil {
		e.t.Fatalf("Survey: %v", err)
	}
	if _, ok := got[asker.ID()]; ok {
		e.t.Errorf("the asker lists itself: %v", got)
	}
	for i, w := range workers {
		if names := helpNames(got[w.ID()]); !slices.Equal(names, []string{actionName(i)}) {
			e.t.Errorf("%s offers %v, want [%s]", w.ID(), names, actionName(i))
		}
	}
	if d := got[workers[1].ID()][actionName(1)]; d.Access != "permitted" || len(d.Args) == 0 {
		e.t.Errorf("%s's entry: %+v, want its help entry", actionName(1), d)
	}

	// Answers to the survey, late ones included, went nowhere else: once a
	// later answer has come, none of them has reached the hooks.
	id := e.send(asker, workers[0].ID(), actionName(0), nil)
	in.repliesTo(e.t, id, 1)
	for _, r := range in.all() {
		if strings.HasSuffix(r.msg.ParentID, ".survey") || r.msg.ParentID != id {
			e.t.Errorf("the ValueHandler got %v", r.msg)
		}
	}
}

// The help broadcast of a Survey carries the meta keys given with
// agency.SurveyMeta (a conversation, say) and the traceparent of its
// context, as every message sent for a conversation or a trace does.
func testSurveyMeta(e *env) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var seen record[map[string]any]
	asker := e.newAgent("Asker")
	worker := e.newAgent("Worker")
	agency.Handle(worker, "task", pong, agency.AccessFunc(func(m *agency.Message) agency.Access {
		if m.From == asker.ID() {
			seen.add(m.Meta)
		}
		return agency.Permitted
	}))
	e.add(asker, worker)

	ctx := agency.WithTraceparent(e.ctx(), tp)
	got, err := agency.Survey(ctx, asker, agency.SurveyMeta(map[string]any{"conversation": "c-1", "thoughts": "who is here?"}),
		agency.SurveyMeta(map[string]any{"thoughts": "who else?"}))
	if err != nil {
		e.t.Fatalf("Survey: %v", err)
	}
	if _, ok := got[worker.ID()]; !ok {
		e.t.Fatalf("the worker did not answer: %v", got)
	}
	meta := seen.waitLen(e.t, "the worker's help probe", 1)[0]
	want := map[string]any{"conversation": "c-1", "thoughts": "who else?", agency.TraceparentKey: tp}
	for k, v := range want {
		if meta[k] != v {
			e.t.Errorf("the help broadcast's __meta__.%s is %v, want %v (meta %v)", k, meta[k], v, meta)
		}
	}
}
