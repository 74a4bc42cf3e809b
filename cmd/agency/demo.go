package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// demo is a space in this process with agents to look at: a Calculator,
// its Owner, who approves one clear per run, an Assistant, an LLM agent on
// a scripted model served in this process, and a plan coordinator
// (GroupChatManager) with its planner (PlannerAgent, on the same model)
// and the agent that speaks for people (HumanAgent), whose plans run the
// Calculator's add.
//
// A support team of two LLM agents on the same model, Triage and Refunds,
// shows a handoff: Triage hands every conversation to Refunds, and the
// team keeps who holds each conversation in the demo's store.
type demo struct {
	sp       *space.Local
	model    *openaitest.Server
	approver *agency.Agent
	team     *handoff.Team
	store    store.Store // the team's conversations
}

// The ids of the demo's support team.
const (
	demoTriage  = "Triage"
	demoRefunds = "Refunds"
)

// Their system prompts, by which the scripted model knows whom it plays.
const (
	triagePrompt  = "You are Triage, the demo's first contact: hand every customer to Refunds."
	refundsPrompt = "You are Refunds, the demo's refunds desk."
)

// The ids of the demo's plan agents.
const (
	demoCoordinator = "GroupChatManager"
	demoPlanner     = "PlannerAgent"
	demoApprover    = "HumanAgent"
)

// demoTurns is how many model calls the scripted model answers: far more
// than a person makes by hand in one run.
const demoTurns = 100000

// startDemo starts the demo space.
func startDemo(ctx context.Context) (*demo, error) {
	d := &demo{sp: space.NewLocal()}
	steps := make([]openaitest.Step, demoTurns)
	for i := range steps {
		steps[i] = openaitest.Step{Func: scriptedModel}
	}
	d.model = openaitest.Serve(steps...)

	calc := &demoCalculator{}
	calcAgent := agency.MustNewAgent("Calculator")
	agency.Handle(calcAgent, "add", calc.add,
		agency.Describe("Adds two numbers"),
		agency.Returns("the sum"),
		agency.Example(demoAddArgs{A: 1, B: 2}))
	agency.Handle(calcAgent, "clear", calc.clear,
		agency.Describe("Clears the calculator's memory; its Owner approves one clear per run"),
		agency.Returns("what was done"),
		agency.Approve(calc.approveClear))

	owner := &demoOwner{}
	ownerAgent := agency.MustNewAgent("Owner")
	agency.Handle(ownerAgent, "approve", owner.approve,
		agency.Describe("Asks the owner to approve a call"),
		agency.AccessBySender(map[string]agency.Access{"Calculator": agency.Permitted}, agency.Denied))

	llm, err := openai.New("Assistant",
		openai.BaseURL(d.model.URL), openai.APIKey("demo"), openai.HTTPClient(d.model.Client()),
		openai.Model("scripted-demo"),
		openai.SystemPrompt("You are a helpful assistant with a calculator."))
	if err != nil {
		return nil, errors.Join(err, d.close())
	}
	coord, err := plan.NewCoordinator(demoCoordinator, store.NewMemory(),
		plan.Planner(demoPlanner), plan.Approver(demoApprover))
	if err != nil {
		return nil, errors.Join(err, d.close())
	}
	planner, err := openai.New(demoPlanner,
		openai.BaseURL(d.model.URL), openai.APIKey("demo"), openai.HTTPClient(d.model.Client()),
		openai.Model("scripted-demo"), openai.SystemPrompt(plan.PlannerPrompt))
	if err != nil {
		return nil, errors.Join(err, d.close())
	}
	d.approver = agency.MustNewAgent(demoApprover)

	d.store = store.NewMemory()
	d.team = &handoff.Team{Options: []handoff.Option{handoff.WithStore(d.store)}, LLM: []openai.Option{
		openai.BaseURL(d.model.URL), openai.APIKey("demo"), openai.HTTPClient(d.model.Client()),
		openai.Model("scripted-demo"),
	}}
	triage, err := d.team.Agent(demoTriage, triagePrompt,
		handoff.OnLLM(handoff.To(demoRefunds), "Hand the customer to Refunds for anything about a refund."))
	if err != nil {
		return nil, errors.Join(err, d.close())
	}
	refunds, err := d.team.Agent(demoRefunds, refundsPrompt)
	if err != nil {
		return nil, errors.Join(err, d.close())
	}
	// The LLM agents join last: they ask the others for help as they
	// join.
	for _, a := range []*agency.Agent{calcAgent, ownerAgent, coord.Agent(), d.approver, d.team.UserAgent(),
		llm.Agent(), planner.Agent(), triage.Agent(), refunds.Agent()} {
		if err := d.sp.Add(ctx, a); err != nil {
			return nil, errors.Join(err, d.close())
		}
	}
	return d, nil
}

func (d *demo) close() error {
	err := closeSpace(d.sp)
	d.model.Close()
	return err
}

// number matches a number; numbers keeps those that stand as words of
// their own, not the digits of an id.
var number = regexp.MustCompile(`\d+(?:\.\d+)?`)

// numbers returns the first n numbers of a text, as JSON numbers.
func numbers(text string, n int) []string {
	inWord := func(i int) bool {
		if i < 0 || i >= len(text) {
			return false
		}
		c := text[i]
		return c == '-' || c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
	}
	var out []string
	for _, m := range number.FindAllStringIndex(text, -1) {
		end := m[1]
		if end < len(text) && text[end] == '.' && end+1 < len(text) && '0' <= text[end+1] && text[end+1] <= '9' {
			continue // an address, a version: 1.2.3
		}
		if inWord(m[0]-1) || inWord(end) {
			continue
		}
		f, err := strconv.ParseFloat(text[m[0]:end], 64)
		if err != nil {
			continue
		}
		out = append(out, strconv.FormatFloat(f, 'g', -1, 64))
		if len(out) == n {
			break
		}
	}
	return out
}

// scriptedModel plays a model that can add: asked a question with two
// numbers in it, it calls the Calculator's add; given the result, it
// answers with it; asked anything else, it says what it can do.
func scriptedModel(r openaitest.Request) openaitest.Step {
	if len(r.Messages) == 0 {
		return openaitest.Step{Text: "Hello."}
	}
	last := r.Messages[len(r.Messages)-1]
	switch {
	case strings.Contains(r.Messages[0].Content, triagePrompt):
		if _, ok := r.Tool("transfer_to_" + demoRefunds); ok && last.Role == "user" {
			return openaitest.Step{Text: "This is one for Refunds.",
				ToolCalls: []openaitest.ToolCall{{Name: "transfer_to_" + demoRefunds, Arguments: "{}"}}}
		}
		return openaitest.Step{Text: "Refunds will take it from here."}
	case strings.Contains(r.Messages[0].Content, refundsPrompt):
		return openaitest.Step{Text: "Refunds here: your refund is on its way."}
	}
	if _, ok := r.Tool(demoCoordinator + "__submit_plan"); ok {
		return scriptedPlanner(r, last)
	}
	if last.Role == "tool" {
		var v any
		if err := json.Unmarshal([]byte(last.Content), &v); err == nil {
			if f, ok := v.(float64); ok {
				return openaitest.Step{Text: "The sum is " + strconv.FormatFloat(f, 'g', -1, 64) + "."}
			}
		}
		return openaitest.Step{Text: "The Calculator said: " + last.Content}
	}
	nums := numbers(last.Content, 2)
	if _, ok := r.Tool("Calculator__add"); ok && len(nums) == 2 {
		args, _ := json.Marshal(map[string]json.Number{"a": json.Number(nums[0]), "b": json.Number(nums[1])})
		return openaitest.Step{
			Text:      "I should add " + nums[0] + " and " + nums[1] + ".",
			ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: string(args)}},
		}
	}
	return openaitest.Step{Text: fmt.Sprintf("I am the demo's scripted model: I can only add. Ask me something like \"what is 2 + 3?\" (you said %q). Without --demo, agency talks to the agents of a real space, which may run a real model.",
		strings.TrimSpace(last.Content))}
}

// scriptedPlanner plays the planner of the demo's plans: a task becomes a
// plan of one step, the Calculator's add of the first two numbers in the
// task (or of 2 and 3), and the person's comment on a rejected step
// becomes a new plan from the comment's numbers in the same way.
func scriptedPlanner(r openaitest.Request, last openaitest.Message) openaitest.Step {
	if last.Role == "tool" {
		if !strings.Contains(last.Content, `"accepted":true`) {
			return openaitest.Step{Text: "The coordinator refused the plan: " + last.Content}
		}
		return openaitest.Step{Text: "Plan submitted."}
	}
	nums := numbers(last.Content, 2)
	if len(nums) < 2 {
		nums = []string{"2", "3"}
	}
	spec := plan.SubmitPlan{
		Summary: "Add " + nums[0] + " and " + nums[1] + " on the Calculator.",
		Steps: []plan.StepSpec{{
			Agent: "Calculator", Action: "add",
			Args: json.RawMessage(`{"a":` + nums[0] + `,"b":` + nums[1] + `}`),
			Text: "Add " + nums[0] + " and " + nums[1],
		}},
	}
	args, _ := json.Marshal(spec)
	return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: demoCoordinator + "__submit_plan", Arguments: string(args)}}}
}

// demoCalculator adds numbers for anyone, and clears its memory when its
// owner agrees.
type demoCalculator struct{ memory float64 }

type demoAddArgs struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

func (c *demoCalculator) add(ctx context.Context, args demoAddArgs) (float64, error) {
	c.memory = args.A + args.B
	return c.memory, nil
}

type demoClearArgs struct {
	Reason string `json:"reason" validate:"min=3,max=80" jsonschema:"description=why the memory should be cleared"`
}

func (c *demoCalculator) clear(ctx context.Context, args demoClearArgs) (string, error) {
	c.memory = 0
	return "cleared: " + args.Reason, nil
}

// approveClear asks the Owner whether the caller may clear.
func (c *demoCalculator) approveClear(ctx context.Context, args demoClearArgs) (bool, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return false, err
	}
	return agency.Call[bool](ctx, agency.AgentFrom(ctx), "Owner", "approve",
		demoApproveArgs{Caller: agency.MessageFrom(ctx).From, Action: "clear", Args: raw})
}

// demoOwner stands in for the person who owns the Calculator.
type demoOwner struct{ approved int }

type demoApproveArgs struct {
	Caller string          `json:"caller" validate:"required"`
	Action string          `json:"action" validate:"required"`
	Args   json.RawMessage `json:"args"`
}

func (o *demoOwner) approve(ctx context.Context, args demoApproveArgs) (bool, error) {
	if o.approved > 0 {
		return false, nil
	}
	o.approved++
	return true, nil
}

// play has a, the command's agent, use the demo's agents once, so that
// there is something to watch: add, add with a wrong argument, a question
// to the Assistant, and two clears, of which the Owner approves one; then
// the support team's User starts a conversation that Triage hands to
// Refunds.
func (d *demo) play(ctx context.Context, a *agency.Agent, log io.Writer) {
	calls := []struct {
		to, action string
		args       any
	}{
		{"Calculator", "add", demoAddArgs{A: 1, B: 2}},
		{"Calculator", "add", map[string]any{"a": "x"}},
		{"Assistant", "say", openai.SayArgs{Content: "What is 2 + 3?"}},
		{"Calculator", "clear", demoClearArgs{Reason: "new day"}},
		{"Calculator", "clear", demoClearArgs{Reason: "once more"}},
	}
	for _, c := range calls {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := a.Request(rctx, c.to, c.action, c.args)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, agency.ErrInvalidArgs) && !errors.Is(err, agency.ErrPermissionDenied) {
			fmt.Fprintf(log, "demo: %s.%s: %v\n", c.to, c.action, err)
		}
	}
	// A customer of the support team, whom Triage hands to Refunds.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := d.team.Run(rctx, handoff.Start{Agent: demoTriage, Conversation: demoConversation,
		Message: "My anvil arrived broken; I want my money back."})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(log, "demo: the support conversation: %v\n", err)
	}
}

// demoConversation is the id of the support conversation play runs.
const demoConversation = "demo-refund"
