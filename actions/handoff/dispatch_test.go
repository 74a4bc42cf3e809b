package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

const plannerPrompt = "You are a planning agent specialized in creating detailed execution plans. Follow these steps precisely in order:\n" +
	"1. Create a list of high-level tasks needed to fulfill the user's request\n" +
	"2. For each task:\n   - create a handoff for the workbench_search_agent handoff to discover available tools for that specific task\n   - perform that handoff\n" +
	"3. After receiving tool information for each task, create a detailed step-by-step plan incorporating the specific tools\n" +
	"4. Hand off the complete plan to the coordinator agent\n\n" +
	"Important: You must use the workbench_search_agent handoff before attempting to create the final plan." +
	"Only after you have created the complete step-by-step plan with all required tools, handoff to coordinator_agent."

// dispatch is the program of the dynamic-handoff seed: a planner that
// creates handoffs to an authorized list, a search agent, a coordinator,
// the glTF Live API as an agent, and a payment agent the planner may not
// reach.
type dispatch struct {
	t                *testing.T
	ctx              context.Context
	st               store.Store
	pSrv, wSrv, cSrv *openaitest.Server
	events           *recorder
	team             *Team
	sp               *space.Local
	gltfCalls        *calls
	payments         chan Transfer
	authorized       []string // the planner's dispatcher's (default: the coordinator and the search agent)
}

func newDispatch(t *testing.T, st store.Store) *dispatch {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	if st == nil {
		st = store.NewMemory()
	}
	return &dispatch{t: t, ctx: ctx, st: st, pSrv: openaitest.NewServer(t), wSrv: openaitest.NewServer(t), cSrv: openaitest.NewServer(t),
		events: newRecorder(), gltfCalls: &calls{}, payments: make(chan Transfer, 4)}
}

func (d *dispatch) build() {
	t := d.t
	d.team = &Team{UserID: "User", Options: []Option{WithStore(d.st), MaxHops(12), Observe(d.events)}, AgentLLM: map[string][]openai.Option{
		"planning_agent": append(llmOptions(d.pSrv), openai.MaxSteps(12)), "workbench_search_agent": llmOptions(d.wSrv), "coordinator_agent": llmOptions(d.cSrv),
	}}
	authorized := d.authorized
	if authorized == nil {
		authorized = []string{"coordinator_agent", "workbench_search_agent"}
	}
	disp, err := NewDispatcher(authorized)
	if err != nil {
		t.Fatal(err)
	}
	planner, err := d.team.Agent("planning_agent", plannerPrompt, Dispatch(disp, Manage()))
	if err != nil {
		t.Fatal(err)
	}
	search, err := d.team.Agent("workbench_search_agent", "You find the tools a task needs.",
		OnLLM(To("planning_agent"), "Hand off your complete written analysis of available tools to the planning agent",
			Message("I have analyzed the available tools.")))
	if err != nil {
		t.Fatal(err)
	}
	coordinator, err := d.team.Agent("coordinator_agent", "You carry out plans.", AfterWork(Terminate()))
	if err != nil {
		t.Fatal(err)
	}
	open := agency.AccessBySender(map[string]agency.Access{"workbench_search_agent": agency.Permitted, "coordinator_agent": agency.Permitted}, agency.Denied)
	gltf := agency.MustNewAgent("gltf")
	agency.Handle(gltf, "list_gltfs", func(ctx context.Context, _ struct{}) ([]string, error) {
		d.gltfCalls.add(ctx, "list_gltfs", struct{}{})
		return []string{"scene42.gltf"}, nil
	}, open, agency.Describe("Lists the glTF documents"))
	agency.Handle(gltf, "get_scene_nodes", func(ctx context.Context, a struct {
		SceneID int `json:"scene_id"`
	}) ([]string, error) {
		return []string{"n1", "n2"}, nil
	}, open, agency.Describe("Lists the nodes of a scene"))
	pay := agency.MustNewAgent("payment_processor_agent")
	if err := Accept(pay, func(ctx context.Context, tr Transfer) error { d.payments <- tr; return nil }, "Ops"); err != nil {
		t.Fatal(err)
	}
	d.sp = space.NewLocal()
	sp := d.sp
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	// The tool agents first: the LLM agents' first turns offer what was
	// there when they joined.
	for _, a := range []*agency.Agent{gltf, pay, planner.Agent(), search.Agent(), coordinator.Agent(), d.team.UserAgent()} {
		if err := d.sp.Add(d.ctx, a); err != nil {
			t.Fatal(err)
		}
	}
}

func (d *dispatch) run(conv, message string) Result {
	d.t.Helper()
	res, err := d.team.Run(d.ctx, Start{Agent: "planning_agent", Message: message, Conversation: conv})
	if err != nil {
		d.t.Fatalf("Run: %v", err)
	}
	return res
}

// lastContent is the content of the last message of a request.
func lastContent(r openaitest.Request) string { return r.Messages[len(r.Messages)-1].Content }

const (
	searchName = "workbench_search_gltf_live_api_nodes"
	searchDesc = "Handoff to discover available tools for working with the glTF Live API, specifically for finding nodes and their material names in a scene."
	searchMsg  = "Please provide available tools for finding nodes and their material names in a scene using the glTF Live API."
	planMsg    = "Here is the plan: call list_gltfs, then get_scene_nodes for scene 42."
	analysis   = "Available tools: list_gltfs, get_scene_nodes(scene_id), get_node_material(node_id)"
)

func createArgs(name, target, desc, message string) string {
	b, _ := json.Marshal(map[string]string{"name": name, "target": target, "description": desc, "message": message})
	return string(b)
}

var manageNames = []string{"create_handoff", "enable_handoff", "disable_handoff", "delete_handoff"}

// Scenario C1-C7: the planner creates a handoff to the search agent,
// fails to create one to an agent it is not authorized for and to call
// that agent's handoff action, hands over, gets the analysis back,
// creates, disables, enables and calls a handoff to the coordinator,
// which finishes.
func TestDispatchPlan(t *testing.T) {
	d := newDispatch(t, nil)
	d.pSrv.Add(
		calls1("create_handoff", createArgs(searchName, "workbench_search_agent", searchDesc, searchMsg)),
		calls1("create_handoff", createArgs("process_payment", "payment_processor_agent", "Handoff when a payment needs processing.", "Please process the payment for order #12345.")),
		calls1("payment_processor_agent__handoff", `{"conversation":"c1","user":"User"}`),
		calls1(searchName, "{}"),
		calls1("create_handoff", createArgs("complete_plan", "coordinator_agent", "The complete step-by-step plan.", planMsg)),
		calls1("disable_handoff", `{"name":"complete_plan"}`),
		calls1("complete_plan", "{}"),
		calls1("enable_handoff", `{"name":"complete_plan"}`),
		calls1("complete_plan", "{}"),
	)
	d.wSrv.Add(openaitest.Step{Text: analysis, ToolCalls: []openaitest.ToolCall{{Name: "transfer_to_planning_agent", Arguments: "{}"}}})
	d.cSrv.Add(calls1("gltf__list_gltfs", "{}"), textStep("Here are the nodes: n1 (steel), n2 (glass)."))
	d.build()
	res := d.run("c1", "List every node of scene 42 with its material name")

	p := d.pSrv.Requests()
	if len(p) != 9 {
		t.Fatalf("the planner's model got %d requests", len(p))
	}
	// C1: the four management tools, and their schema.
	if got := toolNames(p[0]); !slices.Equal(got, manageNames) {
		t.Errorf("request 1 tools %v", got)
	}
	create, _ := p[0].Tool("create_handoff")
	var schema struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	if err := json.Unmarshal(create.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if tg := schema.Properties["target"]; tg["type"] != "string" || !slices.Equal(toStrings(tg["enum"]), []string{"coordinator_agent", "workbench_search_agent"}) {
		t.Errorf("target %v", tg)
	}
	if schema.Properties["description"]["maxLength"] != float64(1024) || schema.Properties["name"]["pattern"] != "^[a-zA-Z0-9_-]{1,64}$" ||
		!sameSet(schema.Required, []string{"name", "target", "description", "message"}) {
		t.Errorf("create_handoff's schema %s", create.Parameters)
	}
	// C2: created, and offered from the next call on.
	if got := lastContent(p[1]); got != `{"created":"workbench_search_gltf_live_api_nodes","target":"workbench_search_agent","enabled":true}` {
		t.Errorf("create_handoff read %s", got)
	}
	if tool, ok := p[1].Tool(searchName); !ok || tool.Description != searchDesc || len(p[1].Tools) != 5 {
		t.Errorf("request 2 tools %v", toolNames(p[1]))
	}
	if p[1].ParallelToolCalls == nil || *p[1].ParallelToolCalls {
		t.Errorf("parallel tool calls with a transfer offered: %v", p[1].ParallelToolCalls)
	}
	// C3: not authorized.
	if got := lastContent(p[2]); !strings.HasPrefix(got, `error: permission_denied: handoff target "payment_processor_agent" is not authorized (authorized: coordinator_agent, workbench_search_agent)`) {
		t.Errorf("the unauthorized create read %s", got)
	}
	if !slices.Equal(toolNames(p[2]), toolNames(p[1])) {
		t.Errorf("request 3 tools %v", toolNames(p[2]))
	}
	// C4: the payment agent's handoff is not a tool.
	if got := lastContent(p[3]); !strings.HasPrefix(got, `error: not_found: there is no tool named "payment_processor_agent__handoff"`) {
		t.Errorf("the forged handoff read %s", got)
	}
	select {
	case tr := <-d.payments:
		t.Errorf("the payment agent received %+v", tr)
	default:
	}
	// C5: the search agent got the created handoff.
	acc := d.events.of(EventAccepted)
	if len(acc) != 3 {
		t.Fatalf("accepted %+v", acc)
	}
	if ds := d.events.of(EventDispatch); len(ds) == 0 || ds[0].Agent != "planning_agent" || ds[0].Name == "" {
		t.Errorf("the dispatcher's events: %+v", ds)
	}
	if a := acc[0]; a.To != "workbench_search_agent" || a.Name != searchName || a.Message != searchMsg {
		t.Errorf("the first handoff %+v", a)
	}
	if got := messages(d.wSrv.Requests()[0]); got[len(got)-1].content != searchMsg {
		t.Errorf("the search agent's request ends with %+v", got[len(got)-1])
	}
	// C6: the planner's request 5 ends with the analysis, the transfer and its result.
	m5 := messages(p[4])
	if n := len(m5); n < 2 || m5[n-2] != (msg{role: "assistant", name: "workbench_search_agent", content: analysis, call: "transfer_to_planning_agent"}) ||
		m5[n-1] != (msg{role: "tool", content: "I have analyzed the available tools.", callID: "tool"}) {
		t.Errorf("the planner's request 5 ends with %+v", m5[max(0, len(m5)-2):])
	}
	// C7: disabled, not offered, not callable; enabled; called.
	if got := lastContent(p[6]); got != `{"disabled":"complete_plan"}` {
		t.Errorf("disable read %s", got)
	}
	if _, ok := p[6].Tool("complete_plan"); ok {
		t.Errorf("request 7 offers the disabled handoff")
	}
	if got := lastContent(p[7]); !strings.HasPrefix(got, `error: not_found: there is no tool named "complete_plan"`) {
		t.Errorf("calling the disabled handoff read %s", got)
	}
	if got := lastContent(p[8]); got != `{"enabled":"complete_plan"}` {
		t.Errorf("enable read %s", got)
	}
	if a := acc[2]; a.To != "coordinator_agent" || a.Message != planMsg || a.Hops != 3 {
		t.Errorf("the handoff to the coordinator %+v", a)
	}
	if c := d.gltfCalls.get(); len(c) != 1 || c[0].Meta["conversation"] != "c1" {
		t.Errorf("glTF calls %+v", c)
	}
	if res.Status != RunTerminated || res.Last != "coordinator_agent" {
		t.Errorf("Run: %s, last %s", res.Status, res.Last)
	}
	if d.pSrv.Left()+d.wSrv.Left()+d.cSrv.Left() != 0 {
		t.Errorf("steps left")
	}
	// The payment agent hides its handoff from the planner.
	help, err := agency.Call[map[string]agency.ActionHelp](d.ctx, d.team.UserAgent(), "payment_processor_agent", agency.HelpAction, nil)
	if err != nil || len(help) != 0 {
		t.Errorf("the payment agent's help to the user: %v, %v", help, err)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// C8: what the management tools refuse, in words the model can act on.
func TestDispatchRefusals(t *testing.T) {
	d := newDispatch(t, nil)
	d.pSrv.Add(
		calls1("create_handoff", createArgs("complete_plan", "coordinator_agent", "The plan.", planMsg)),
		calls1("create_handoff", createArgs("complete_plan", "coordinator_agent", "The plan again.", planMsg)),
		calls1("create_handoff", createArgs("long", "coordinator_agent", strings.Repeat("x", 1025), planMsg)),
		calls1("create_handoff", createArgs("a__b", "coordinator_agent", "The plan.", planMsg)),
		calls1("delete_handoff", `{"name":"x"}`),
		calls1("create_handoff", `{"name":"half"}`),
		calls1("create_handoff", createArgs("enable_handoff", "coordinator_agent", "Clash.", planMsg)),
		calls1("delete_handoff", `{"name":"complete_plan"}`),
		textStep("I could not."),
	)
	d.build()
	res := d.run("c1", "Plan something")
	p := d.pSrv.Requests()
	for i, want := range []string{
		`error: invalid_args: handoff "complete_plan" already exists`,
		`error: invalid_args: description: must hold 1 to at most 1024 characters, not 1025`,
		`error: invalid_args: name: "a__b" must match`,
		`error: invalid_args: no handoff "x"`,
		`error: invalid_args: missing required fields target, description, message`,
		`error: invalid_args: name: "enable_handoff" is the name of another of your tools`,
		`{"deleted":"complete_plan"}`,
	} {
		if got := lastContent(p[i+2]); !strings.HasPrefix(got, want) {
			t.Errorf("call %d read %s\nwant %s…", i+2, got, want)
		}
	}
	if _, ok := p[8].Tool("complete_plan"); ok {
		t.Errorf("a deleted handoff is offered")
	}
	if res.Status != RunAwaitingUser {
		t.Errorf("Run: %s", res.Status)
	}
}

// C9: what the model created is kept per agent and conversation, in the
// store: after a rebuild on the same SQLite file it is offered again in
// its conversation, and never in another.
func TestDispatchRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dispatch.db")
	d := newDispatch(t, nil)
	d.st = openSQLite(t, d.ctx, path)
	d.pSrv.Add(calls1("create_handoff", createArgs(searchName, "workbench_search_agent", searchDesc, searchMsg)), textStep("Created."))
	d.build()
	d.run("c1", "List every node of scene 42")

	if err := d.sp.Close(d.ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.st.Close(); err != nil {
		t.Fatal(err)
	}
	d.st = openSQLite(t, d.ctx, path)
	d.pSrv.Add(textStep("Still here."), textStep("New conversation."))
	d.build()
	d.run("c1", "Go on")
	d.run("c2", "Something else")
	p := d.pSrv.Requests()
	if _, ok := p[2].Tool(searchName); !ok {
		t.Errorf("after the rebuild, c1 lacks the created handoff: %v", toolNames(p[2]))
	}
	if got := toolNames(p[3]); !slices.Equal(got, manageNames) {
		t.Errorf("c2 is offered %v", got)
	}
	// The planner's history of c1 survived too.
	if n := len(p[2].Messages); n != 6 {
		t.Errorf("the planner's request in c1 after the rebuild holds %d messages", n)
	}
}

// A handoff the model created stays revoked once its target is no longer
// authorized: after a rebuild on the same SQLite file with a dispatcher
// that no longer authorizes the search agent, the handoff the table of c1
// holds is neither offered nor followed, and an event says it was
// dropped.
func TestDispatchRevokedAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dispatch.db")
	d := newDispatch(t, nil)
	d.st = openSQLite(t, d.ctx, path)
	d.pSrv.Add(calls1("create_handoff", createArgs(searchName, "workbench_search_agent", searchDesc, searchMsg)), textStep("Created."))
	d.build()
	d.run("c1", "List every node of scene 42")

	if err := d.sp.Close(d.ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.st.Close(); err != nil {
		t.Fatal(err)
	}
	d.st = openSQLite(t, d.ctx, path)
	d.authorized = []string{"coordinator_agent"}
	d.events = newRecorder()
	// The model calls the handoff it remembers from its history.
	d.pSrv.Add(calls1(searchName, "{}"), textStep("I cannot reach the search agent."))
	d.build()
	res := d.run("c1", "Go on")
	p := d.pSrv.Requests()
	for _, r := range p[2:] {
		if _, ok := r.Tool(searchName); ok {
			t.Errorf("the revoked handoff is offered: %v", toolNames(r))
		}
	}
	if len(p) != 4 {
		t.Errorf("the planner's model got %d requests, want 4", len(p))
	} else if got := lastContent(p[3]); !strings.HasPrefix(got, "error: not_found") {
		t.Errorf("the call of the revoked handoff read %q", got)
	}
	if n := len(d.wSrv.Requests()); n != 0 {
		t.Errorf("the revoked handoff was followed: the search agent's model got %d requests", n)
	}
	if res.Last != "planning_agent" {
		t.Errorf("the conversation ended with %s", res.Last)
	}
	if h, _ := d.team.Holder(d.ctx, "c1"); h != "planning_agent" {
		t.Errorf("the store names %q the holder", h)
	}
	dropped := d.events.of(EventDropped)
	if len(dropped) == 0 || dropped[0].To != "workbench_search_agent" || dropped[0].Name != searchName ||
		!errors.Is(dropped[0].Err, ErrRevoked) {
		t.Errorf("dropped events %+v", dropped)
	}
}

// The Dispatcher's own methods: the handoffs every conversation starts
// with.
func TestDispatcherMethods(t *testing.T) {
	d, err := NewDispatcher([]string{"b", "a"}, Handoff{Name: "to_a", Target: "a", Description: "A."})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.authorizedIDs(), []string{"a", "b"}) {
		t.Errorf("authorized %v", d.authorizedIDs())
	}
	if err := d.Add(Handoff{Name: "to_c", Target: "c", Description: "C."}, true); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("unauthorized: %v", err)
	}
	if err := d.Add(Handoff{Name: "to_a", Target: "a", Description: "A."}, true); !errors.Is(err, ErrExists) {
		t.Errorf("exists: %v", err)
	}
	if err := d.Add(Handoff{Name: "to_b", Target: "b", Description: "B."}, false); err != nil {
		t.Fatal(err)
	}
	if got := d.Enabled(); len(got) != 1 || got[0].Name != "to_a" {
		t.Errorf("enabled %v", got)
	}
	if err := d.Enable("to_b"); err != nil || len(d.Enabled()) != 2 {
		t.Errorf("enable: %v, %v", err, d.Enabled())
	}
	if err := d.Disable("to_a"); err != nil || len(d.Enabled()) != 1 {
		t.Errorf("disable: %v", err)
	}
	if err := d.Delete("nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("delete unknown: %v", err)
	}
	if err := d.Add(Handoff{Name: "x y", Target: "a", Description: "X."}, true); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad name: %v", err)
	}
	for _, h := range d.Enabled() {
		if err := d.Delete(h.Name); err != nil {
			t.Fatal(err)
		}
	}
	if len(d.Enabled()) != 0 {
		t.Errorf("after deleting each: %v", d.Enabled())
	}
	if _, err := NewDispatcher(nil); err == nil {
		t.Error("a dispatcher with nobody authorized")
	}
}

// Every call checks authorization again: a stored handoff to an agent the
// dispatcher does not authorize is not made, even when the model calls it
// without being offered it, and the call reads why.
func TestDispatchCallRechecks(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	disp, err := NewDispatcher([]string{"A"})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	p, err := NewPolicy("P", []Rule{Dispatch(disp)}, WithStore(st), Observe(rec))
	if err != nil {
		t.Fatal(err)
	}
	key := openai.ConversationKey("User", "c1")
	body, _ := json.Marshal([]entry{{Handoff: Handoff{Name: "to_b", Target: "B", Description: "B"}, Enabled: true}})
	if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: kindDispatch, ID: tableID("P", 0, key), Parent: key, Body: body}}}); err != nil {
		t.Fatal(err)
	}
	turn := &openai.Turn{Conversation: "c1", Owner: "User", Partner: "User"}
	_, err = p.call(ctx, turn, openai.ToolCall{ID: "call_1", Name: "to_b", Arguments: "{}"})
	if err == nil || !strings.Contains(err.Error(), "no longer authorized") || turn.Ended() {
		t.Errorf("the call of a stored handoff to B: %v (turn ended: %v)", err, turn.Ended())
	}
	if got := rec.of(EventDropped); len(got) != 1 || got[0].To != "B" {
		t.Errorf("events %+v", got)
	}
	var r openai.Request
	if err := p.before(ctx, turn, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Tools) != 0 {
		t.Errorf("offered %+v", r.Tools)
	}
}
