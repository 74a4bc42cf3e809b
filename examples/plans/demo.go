package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/examples/internal/demo"
)

var (
	taskLine    = regexp.MustCompile(`for the task: (.*)`)
	fullName    = regexp.MustCompile(`\b[A-Z][a-z]+ [A-Z][a-z]+\b`)
	isoDate     = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}\b`)
	replaceFrom = regexp.MustCompile(`replace_from (\d+)`)
	// a step of "The plan so far": number, status, agent, action, args, text
	planLine = regexp.MustCompile(`(?m)^(\d+)\. \[(\w+)\] (\w+)\.(\w+) (\{.*\}) \((.*)\)`)
)

// demoPlanner plans as the planner would, with a script: the onboarding
// of the person the task names (two capitalised words; the date, as
// YYYY-MM-DD, for the orientation), in four or five steps for HrAgent and
// TechSupportAgent; after a rejection or a failure it puts the assignment
// of an onboarding buddy in that step's place and keeps the steps after it.
// After submitting it says so.
func demoPlanner(req openaitest.Request) openaitest.Step {
	if last := demo.Last(req); last.Role == "tool" {
		if strings.HasPrefix(last.Content, "error") {
			return openaitest.Step{Text: "The plan was refused: " + last.Content}
		}
		return openaitest.Step{Text: "Submitted the plan."}
	}
	tool, ok := demo.Tool(req, "GroupChatManager", "submit_plan")
	if !ok {
		return openaitest.Step{Text: "(The scripted planner finds no submit_plan tool.)"}
	}
	text := demo.LastFrom(req, "user")
	submit := func(plan map[string]any) openaitest.Step {
		args, _ := json.Marshal(plan)
		return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: tool, Arguments: string(args)}}}
	}
	task := text
	if m := taskLine.FindStringSubmatch(text); m != nil {
		task = m[1]
	}
	name := fullName.FindString(strings.TrimPrefix(task, "Onboard "))
	if name == "" {
		name = "the new employee"
	}
	step := func(agent, action, what string, args map[string]string) map[string]any {
		args["name"] = name
		return map[string]any{"agent": agent, "action": action, "args": args, "text": what}
	}
	if m := replaceFrom.FindStringSubmatch(text); m != nil {
		from, _ := strconv.Atoi(m[1])
		steps := []any{step("HrAgent", "assign_buddy", "Instead: an onboarding buddy", map[string]string{})}
		for _, l := range planLine.FindAllStringSubmatch(text, -1) {
			if n, _ := strconv.Atoi(l[1]); n > from && l[2] == "planned" {
				steps = append(steps, map[string]any{"agent": l[3], "action": l[4], "args": json.RawMessage(l[5]), "text": l[6]})
			}
		}
		return submit(map[string]any{"steps": steps, "replace_from": from,
			"summary": "Step " + m[1] + " replaced by an onboarding buddy (the scripted planner of -demo)."})
	}
	steps := []any{step("HrAgent", "create_employee_record", "Create "+name+"'s record", map[string]string{})}
	if date := isoDate.FindString(task); date != "" {
		steps = append(steps, step("HrAgent", "schedule_orientation", "Orientation on "+date, map[string]string{"date": date}))
	}
	steps = append(steps,
		step("HrAgent", "enroll_in_benefits", "Health insurance", map[string]string{"program": "health"}),
		step("TechSupportAgent", "set_up_laptop", "A laptop", map[string]string{}),
		step("TechSupportAgent", "create_account", "An email account", map[string]string{"system": "email"}))
	return submit(map[string]any{"steps": steps, "summary": "Onboard " + name + " (a plan of the scripted planner of -demo)."})
}
