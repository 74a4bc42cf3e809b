package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/examples/internal/demo"
)

// demoHelp is what the scripted model says to what it does not script.
const demoHelp = "I am the scripted model of -demo, not a real one. Ask me to add or multiply two numbers " +
	"(\"what is 2 plus 3?\", \"multiply 6 by 7\"), or to list the files here (the Host asks you first). " +
	"For a real model, start the chat without -demo, with OPENAI_API_KEY or OPENAI_BASE_URL set."

// demoModel answers as a model would that uses the Calculator and the
// Host: two numbers in the person's line are added (or multiplied, when
// the line says so) by a call of the Calculator's action; a line about
// files lists them through the Host; anything else gets demoHelp. A tool's
// result is given back in a sentence.
func demoModel(req openaitest.Request) openaitest.Step {
	last := demo.Last(req)
	if last.Role == "tool" {
		var files []struct {
			Name string `json:"name"`
			Dir  bool   `json:"dir"`
		}
		if strings.HasSuffix(demo.ToolCalled(req), "list_files") && json.Unmarshal([]byte(last.Content), &files) == nil {
			names := make([]string, len(files))
			for i, f := range files {
				names[i] = f.Name
				if f.Dir {
					names[i] += "/"
				}
			}
			return openaitest.Step{Text: "Here are the files: " + strings.Join(names, ", ") + "."}
		}
		return openaitest.Step{Text: "The answer is " + last.Content + "."}
	}
	text := last.Content
	call := func(agent, action, args string) openaitest.Step {
		name, ok := demo.Tool(req, agent, action)
		if !ok {
			return openaitest.Step{Text: fmt.Sprintf("I have no tool for %s.%s.", agent, action)}
		}
		return openaitest.Step{
			Text:      fmt.Sprintf("I will ask %s to %s.", agent, action),
			ToolCalls: []openaitest.ToolCall{{Name: name, Arguments: args}},
		}
	}
	if ns := demo.Numbers(text); len(ns) >= 2 {
		action := "add"
		if demo.Mentions(text, "multipl", "times", "product", "*", "×") {
			action = "multiply"
		}
		a, b := strconv.FormatFloat(ns[0], 'g', -1, 64), strconv.FormatFloat(ns[1], 'g', -1, 64)
		return call("Calculator", action, `{"a":`+a+`,"b":`+b+`}`)
	}
	if demo.Mentions(text, "file", "list", " ls") {
		return call("Host", "list_files", `{"path":"."}`)
	}
	return openaitest.Step{Text: demoHelp}
}
