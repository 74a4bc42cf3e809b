package main

import (
	"encoding/json"
	"strings"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/examples/internal/demo"
)

// demoModel plays Triage, Sales and Refunds with a script, told apart by
// their system prompts: Triage sends a customer who wants to buy to Sales,
// one with a broken item or who wants money back to Refunds, and one who
// asks for a person to Human; Sales sells rocket skates and orders them on
// a yes; Refunds proposes a fix, and on a yes looks the item up and
// refunds it. Anything else gets a line that says what to type.
func demoModel(req openaitest.Request) openaitest.Step {
	system := demo.System(req)
	last := demo.Last(req)
	user := demo.LastFrom(req, "user")
	call := func(text, tool, args string) openaitest.Step {
		name, ok := demo.Tool(req, tool, "")
		if !ok {
			name, ok = demo.Tool(req, "Shop", tool)
		}
		if !ok {
			return openaitest.Step{Text: "(The scripted model finds no tool " + tool + ".)"}
		}
		return openaitest.Step{Text: text, ToolCalls: []openaitest.ToolCall{{Name: name, Arguments: args}}}
	}
	called := demo.ToolCalled(req)
	switch {
	case strings.Contains(system, triagePrompt):
		// Triage decides on the customer's last line, also when a
		// colleague has just handed the customer back.
		switch {
		case demo.Mentions(user, "human", "person", "operator", "manager"):
			return call("", "escalate_to_human", "{}")
		case demo.Mentions(user, "refund", "broken", "broke", "repair", "return", "money back"):
			return call("", "transfer_to_issues_and_repairs", "{}")
		case demo.Mentions(user, "buy", "order", "sales", "price", "skates", "product"):
			return call("", "transfer_to_sales_agent", "{}")
		}
		return openaitest.Step{Text: "Hi, I'm ACME's support bot (a scripted model: -demo). Do you want to buy something, " +
			"or is something broken? Ask for a human to reach the operator."}
	case strings.Contains(system, salesPrompt):
		switch {
		case strings.HasSuffix(called, "execute_order"):
			return openaitest.Step{Text: "Ordered! One caveat: the skates only brake uphill."}
		case last.Role == "tool":
			return openaitest.Step{Text: "Sales here. Any trouble catching roadrunners?"}
		case demo.Mentions(user, "yes", "ok", "sure", "deal"):
			return call("", "execute_order", `{"product":"ACME Rocket Skates","price":1000}`)
		case demo.Mentions(user, "refund", "broken", "human", "person"):
			return call("", "transfer_back_to_triage", "{}")
		}
		return openaitest.Step{Text: "Sales here. ACME Rocket Skates catch any roadrunner, for $1000. Shall I order a pair? (yes)"}
	case strings.Contains(system, refundsPrompt):
		switch {
		case strings.HasSuffix(called, "look_up_item"):
			var id string
			if json.Unmarshal([]byte(last.Content), &id) != nil {
				id = last.Content
			}
			args, _ := json.Marshal(map[string]string{"item_id": id, "reason": "the customer said yes"})
			return call("", "execute_refund", string(args))
		case strings.HasSuffix(called, "execute_refund"):
			return openaitest.Step{Text: "Done: your refund is on its way."}
		case last.Role == "tool":
			return openaitest.Step{Text: "Refunds here. What is the matter with it?"}
		case demo.Mentions(user, "yes", "ok", "sure", "please"):
			args, _ := json.Marshal(map[string]string{"search_query": user})
			return call("", "look_up_item", string(args))
		case demo.Mentions(user, "buy", "order", "human", "person"):
			return call("", "transfer_back_to_triage", "{}")
		}
		return openaitest.Step{Text: "Refunds here. Have you tried hitting it with a hammer? If that does not help, shall I refund it? (yes)"}
	}
	return openaitest.Step{Text: "(The scripted model does not know this agent.)"}
}
