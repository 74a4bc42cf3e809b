package handoff_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// model points the team's LLM agents at a scripted server, which plays
// every model in turn (actions/openai/openaitest).
func model(srv *openaitest.Server) []openai.Option {
	return []openai.Option{openai.APIKey("test"), openai.BaseURL(srv.URL), openai.HTTPClient(srv.Client())}
}

// printEvents prints the transitions worth seeing in an example.
var printEvents = handoff.ObserverFunc(func(_ context.Context, e handoff.Event) {
	switch e.Kind {
	case handoff.EventHandoff:
		fmt.Printf("[%s → %s: %s]\n", e.From, e.To, e.Name)
	case handoff.EventCondition:
		fmt.Printf("[condition %s holds]\n", e.Name)
	case handoff.EventDispatch:
		fmt.Printf("[%s]\n", e.Name)
	}
})

// run adds the agents and the team's user agent to a space, runs one
// message of the user and prints the answer.
func run(team *handoff.Team, start handoff.Start, agents ...*agency.Agent) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range append(agents, team.UserAgent()) {
		if err := sp.Add(ctx, a); err != nil {
			log.Fatal(err)
		}
	}
	res, err := team.Run(ctx, start)
	if err != nil {
		log.Fatal(err)
	}
	last := res.History[len(res.History)-1]
	fmt.Printf("%s: %s\n", last.Name, last.Content)
}

// A static transfer: Triage's model is offered a transfer tool to Refunds,
// calls it, and Refunds takes the conversation over and answers the user
// at once, on the history Triage handed over.
func Example_transfer() {
	srv := openaitest.Serve(
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "transfer_to_refunds", Arguments: "{}"}}}, // Triage
		openaitest.Step{Text: "Sorry to hear that. Which item?"},                                          // Refunds
	)
	defer srv.Close()
	team := &handoff.Team{LLM: model(srv), Options: []handoff.Option{handoff.Observe(printEvents)}}
	triage, err := team.Agent("Triage", "You route customers.",
		handoff.OnLLM(handoff.To("Refunds"), "Use for refunds.", handoff.Name("transfer_to_refunds")))
	if err != nil {
		log.Fatal(err)
	}
	refunds, err := team.Agent("Refunds", "You handle refunds.",
		handoff.OnLLM(handoff.To("Triage"), "Use for anything else."))
	if err != nil {
		log.Fatal(err)
	}
	run(team, handoff.Start{Agent: "Triage", Message: "I want a refund"}, triage.Agent(), refunds.Agent())
	// Output:
	// [Triage → Refunds: transfer_to_refunds]
	// Refunds: Sorry to hear that. Which item?
}

// Dynamic dispatch: the planner's model creates a handoff at run time,
// only ever to an agent of the dispatcher's authorized list, and calls it
// on its next step.
func Example_dispatch() {
	srv := openaitest.Serve(
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "create_handoff", // the planner
			Arguments: `{"name":"ask_search","target":"Search","description":"Finds the tools a task needs.","message":"Which tools list a scene's nodes?"}`}}},
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "ask_search", Arguments: "{}"}}}, // the planner, with the new tool
		openaitest.Step{Text: "list_gltfs, then get_scene_nodes."},                               // Search
	)
	defer srv.Close()
	team := &handoff.Team{LLM: model(srv), Options: []handoff.Option{handoff.Observe(printEvents)}}
	d, err := handoff.NewDispatcher([]string{"Search"}) // the authorized list
	if err != nil {
		log.Fatal(err)
	}
	planner, err := team.Agent("Planner", "You plan.", handoff.Dispatch(d, handoff.Manage()))
	if err != nil {
		log.Fatal(err)
	}
	search, err := team.Agent("Search", "You find tools.")
	if err != nil {
		log.Fatal(err)
	}
	run(team, handoff.Start{Agent: "Planner", Message: "List every node of scene 42"}, planner.Agent(), search.Agent())
	// Output:
	// [create_handoff ask_search]
	// [Planner → Search: ask_search]
	// Search: list_gltfs, then get_scene_nodes.
}

// A condition on the context variables hands the conversation on before
// the model is asked: a Gold customer goes straight to the VIP desk.
func Example_condition() {
	srv := openaitest.Serve(openaitest.Step{Text: "Welcome back! How can I help?"}) // VIP; Triage's model is never called
	defer srv.Close()
	team := &handoff.Team{LLM: model(srv), Options: []handoff.Option{handoff.Observe(printEvents)}}
	triage, err := team.Agent("Triage", "You route customers.",
		handoff.OnContext(handoff.To("VIP"), "tier == 'Gold'"))
	if err != nil {
		log.Fatal(err)
	}
	vip, err := team.Agent("VIP", "You serve Gold customers.")
	if err != nil {
		log.Fatal(err)
	}
	run(team, handoff.Start{Agent: "Triage", Message: "Hello", Vars: handoff.Vars{"tier": "Gold"}}, triage.Agent(), vip.Agent())
	// Output:
	// [condition tier == 'Gold' holds]
	// [Triage → VIP: on_context]
	// VIP: Welcome back! How can I help?
}

// Escalation to a person: a person of the team (reached here through a
// script; a human.Terminal or human.Web in a program) takes the
// conversation over, is shown what was said, and answers the user.
func Example_escalation() {
	srv := openaitest.Serve(
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "escalate_to_human", Arguments: "{}"}}}, // Triage
	)
	defer srv.Close()
	team := &handoff.Team{LLM: model(srv), Options: []handoff.Option{handoff.Observe(printEvents)}}
	triage, err := team.Agent("Triage", "You route customers.",
		handoff.OnLLM(handoff.To("Manager"), "Only call this if explicitly asked to.", handoff.Name("escalate_to_human")))
	if err != nil {
		log.Fatal(err)
	}
	operator := human.NewScript("Hello, this is the manager. How can I help?")
	manager, err := team.Human("Manager", operator)
	if err != nil {
		log.Fatal(err)
	}
	run(team, handoff.Start{Agent: "Triage", Message: "I want to talk to your manager"}, triage.Agent(), manager.Agent())
	fmt.Println("the manager saw:", operator.Shown()[1].From+": "+operator.Shown()[1].Text)
	// Output:
	// [Triage → Manager: escalate_to_human]
	// Manager: Hello, this is the manager. How can I help?
	// the manager saw: User: I want to talk to your manager
}
