package spacetest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/seed72275b23/agency-go/agency"
)

// helpTests cover the built-in help action.
var helpTests = []test{
	{"AllActions", testHelpAll},
	{"OneAction", testHelpOne},
	{"UnknownAction", testHelpUnknownAction},
	{"Broadcast", testHelpBroadcast},
	{"BroadcastForOneAction", testHelpBroadcastOne},
	{"HidesDenied", testHelpHidesDenied},
	{"Survey", testSurvey},
	{"SurveyMeta", testSurveyMeta},
}

type helpMap = map[string]agency.ActionHelp

// helpCalculator returns an agent with a described add and a requested
// clear.
func helpCalculator(e *env) *agency.Agent {
	calc := e.newAgent("Calculator")
	agency.Handle(calc, "add", add,
		agency.Describe("Adds two numbers"),
		agency.Returns("the sum"),
		agency.Example(addArgs{A: 1, B: 2}))
	agency.Handle(calc, "clear", pong,
		agency.Describe("Clears the memory"),
		agency.Approve(func(context.Context, empty) (bool, error) { return false, nil }))
	return calc
}

// helpNames returns a map's keys (a help answer's action names), sorted.
func helpNames[V any](h map[string]V) []string {
	return slices.Sorted(maps.Keys(h))
}

// help lists every action the asker may call, with its schema, returns,
// access and examples; help itself is not listed.
func testHelpAll(e *env) {
	calc := helpCalculator(e)
	asker := e.newAgent("Asker")
	e.add(calc, asker)

	h := call[helpMap](e, asker, calc.ID(), agency.HelpAction, nil)
	if names := helpNames(h); !slices.Equal(names, []string{"add", "clear"}) {
		e.t.Fatalf("help lists %v, want [add clear]", names)
	}
	a := h["add"]
	if a.Description != "Adds two numbers" || a.Access != "permitted" {
		e.t.Errorf("add: description %q, access %q", a.Description, a.Access)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(a.Args, &schema); err != nil {
		e.t.Fatalf("add: args schema %s: %v", a.Args, err)
	}
	if schema.Type != "object" || !slices.Equal(helpNames(schema.Properties), []string{"a", "b"}) ||
		!slices.Equal(slices.Sorted(slices.Values(schema.Required)), []string{"a", "b"}) {
		e.t.Errorf("add: args schema %s, want an object with required properties a and b", a.Args)
	}
	if !sameJSON(e.t, a.Returns, map[string]any{"type": "number", "description": "the sum"}) {
		e.t.Errorf("add: returns %s, want a number described as the sum", a.Returns)
	}
	wantExample := map[string]any{"to": calc.ID(), "action": map[string]any{"add": map[string]any{"a": 1, "b": 2}}}
	if len(a.Examples) != 1 || !sameJSON(e.t, a.Examples[0], wantExample) {
		e.t.Errorf("add: examples %s, want [%v]", a.Examples, wantExample)
	}
	if c := h["clear"]; c.Access != "requested" || c.Description != "Clears the memory" {
		e.t.Errorf("clear: description %q, access %q, want requested", c.Description, c.Access)
	}
}

// help with action_name describes that action only.
func testHelpOne(e *env) {
	calc := helpCalculator(e)
	asker := e.newAgent("Asker")
	e.add(calc, asker)

	h := call[helpMap](e, asker, calc.ID(), agency.HelpAction, agency.HelpArgs{ActionName: "add"})
	if names := helpNames(h); !slices.Equal(names, []string{"add"}) {
		e.t.Fatalf("help for add lists %v", names)
	}
	if h["add"].Description != "Adds two numbers" {
		e.t.Errorf("add: description %q", h["add"].Description)
	}
	h = call[helpMap](e, asker, calc.ID(), agency.HelpAction, map[string]any{"action_name": "clear"})
	if names := helpNames(h); !slices.Equal(names, []string{"clear"}) {
		e.t.Errorf("help for clear lists %v", names)
	}
}

// help for an action the agent lacks is not_found, point to point.
func testHelpUnknownAction(e *env) {
	calc := helpCalculator(e)
	asker := e.newAgent("Asker")
	e.add(calc, asker)

	_, err := e.request(asker, calc.ID(), agency.HelpAction, agency.HelpArgs{ActionName: "divide"})
	ae := wantActionError(e.t, err, agency.ErrNotFound, agency.TypeNotFound)
	mustContain(e.t, "error text", ae.Text, "divide")
}

// helpAgents returns n agents, each with one action of its own, named after
// the agent's index.
func helpAgents(e *env, n int) []*agency.Agent {
	var agents []*agency.Agent
	for i := range n {
		a := e.newAgent("Worker")
		agency.Handle(a, actionName(i), pong)
		agents = append(agents, a)
	}
	return agents
}

func actionName(i int) string { return "task_" + string(rune('a'+i)) }

// waitForHelpFrom waits until the inbox holds an answer to id from each of
// the ids and returns the answers by sender.
func waitForHelpFrom(e *env, in *inbox, id string, ids []string) map[string]reply {
	e.t.Helper()
	rs := in.waitFor(e.t, "help from every agent", func(rs []reply) bool {
		for _, want := range ids {
			if !slices.ContainsFunc(answering(rs, id), func(r reply) bool { return r.msg.From == want }) {
				return false
			}
		}
		return true
	})
	out := map[string]reply{}
	for _, r := range answering(rs, id) {
		if _, dup := out[r.msg.From]; dup {
			e.t.Errorf("%s answered help twice", r.msg.From)
		}
		out[r.msg.From] = r
	}
	return out
}

// A help broadcast is answered by every agent, the asker too, each with its
// own actions.
func testHelpBroadcast(e *env) {
	in := &inbox{}
	asker := e.newAgent("Asker", agency.Hooks(in))
	workers := helpAgents(e, 3)
	e.add(asker)
	e.add(workers...)

	id := e.send(asker, agency.Broadcast, agency.HelpAction, nil)
	ids := []string{asker.ID()}
	for _, w := range workers {
		ids = append(ids, w.ID())
	}
	answers := waitForHelpFrom(e, in, id, ids)
	if r := answers[asker.ID()]; r.err != nil || len(value[helpMap](e.t, r.msg)) != 0 {
		e.t.Errorf("the asker's own help answer: %v, want an empty list", r)
	}
	for i, w := range workers {
		r := answers[w.ID()]
		if r.err != nil {
			e.t.Errorf("%s answered help with %v", w.ID(), r.err)
			continue
		}
		if names := helpNames(value[helpMap](e.t, r.msg)); !slices.Equal(names, []string{actionName(i)}) {
			e.t.Errorf("%s's help lists %v, want [%s]", w.ID(), names, actionName(i))
		}
	}
}

// A help broadcast naming one action is answered by the agents that have it;
// the others stay silent (no not_found). A second, plain help broadcast
// follows the same paths, so once everyone has answered it, any answer to
// the first would have arrived.
func testHelpBroadcastOne(e *env) {
	in := &inbox{}
	asker := e.newAgent("Asker", agency.Hooks(in))
	workers := helpAgents(e, 3)
	e.add(asker)
	e.add(workers...)

	one := e.send(asker, agency.Broadcast, agency.HelpAction, agency.HelpArgs{ActionName: actionName(1)})
	all := e.send(asker, agency.Broadcast, agency.HelpAction, nil)
	ids := []string{asker.ID()}
	for _, w := range workers {
		ids = append(ids, w.ID())
	}
	waitForHelpFrom(e, in, all, ids)
	var rs []reply // answers from this test's agents: a shared broker may hold others
	for _, r := range answering(in.all(), one) {
		if slices.Contains(ids, r.msg.From) {
			rs = append(rs, r)
		}
	}
	if len(rs) != 1 || rs[0].msg.From != workers[1].ID() || rs[0].err != nil {
		e.t.Fatalf("help for %s answered by %v, want one answer, from %s", actionName(1), rs, workers[1].ID())
	}
	if names := helpNames(value[helpMap](e.t, rs[0].msg)); !slices.Equal(names, []string{actionName(1)}) {
		e.t.Errorf("help for %s lists %v", actionName(1), names)
	}
}

// An action denied to the asker is hidden from its help, and visible to an
// agent it is permitted to.
func testHelpHidesDenied(e *env) {
	target := e.newAgent("Target")
	friend, stranger := e.newAgent("Friend"), e.newAgent("Stranger")
	agency.Handle(target, "public", pong)
	agency.Handle(target, "private", pong,
		agency.AccessBySender(map[string]agency.Access{friend.ID(): agency.Permitted}, agency.Denied))
	agency.Handle(target, "forbidden", pong, agency.AccessForAll(agency.Denied))
	e.add(target, friend, stranger)

	if names := helpNames(call[helpMap](e, stranger, target.ID(), agency.HelpAction, nil)); !slices.Equal(names, []string{"public"}) {
		e.t.Errorf("stranger's help lists %v, want [public]", names)
	}
	if names := helpNames(call[helpMap](e, friend, target.ID(), agency.HelpAction, nil)); !slices.Equal(names, []string{"private", "public"}) {
		e.t.Errorf("friend's help lists %v, want [private public]", names)
	}
	_, err := e.request(stranger, target.ID(), agency.HelpAction, agency.HelpArgs{ActionName: "private"})
	wantActionError(e.t, err, agency.ErrNotFound, agency.TypeNotFound)
	h := call[helpMap](e, friend, target.ID(), agency.HelpAction, agency.HelpArgs{ActionName: "private"})
	if names := helpNames(h); !slices.Equal(names, []string{"private"}) {
		e.t.Errorf("friend's help for private lists %v", names)
	}
}
