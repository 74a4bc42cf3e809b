package handoff

import (
	"slices"

	"github.com/seed72275b23/agency-go/actions/openai"
)

// Filter returns the history that the agent self continues a handed-over
// conversation on, from what came with the Transfer.
type Filter func(self string, t Transfer) []openai.Message

// KeepAll keeps the whole history as it came.
func KeepAll(self string, t Transfer) []openai.Message { return slices.Clone(t.History) }

// DropOtherToolCalls is the default Filter: it keeps what the user and
// every agent said, self's own tool calls with their results, and of the
// other agents' tool calls only the one that handed the conversation to
// self (Transfer.Call). An agent never sees, and so never tries to call,
// the tools of another, and bookkeeping of other handoffs does not pile up.
func DropOtherToolCalls(self string, t Transfer) []openai.Message {
	// The results after an assistant message answer its calls: kept are
	// those of the calls kept (call ids are unique only per model server).
	var keep map[string]bool
	out := make([]openai.Message, 0, len(t.History))
	for _, m := range t.History {
		switch m.Role {
		case openai.RoleAssistant:
			keep = map[string]bool{}
			if m.Name == self {
				for _, c := range m.ToolCalls {
					keep[c.ID] = true
				}
				out = append(out, m)
				continue
			}
			var calls []openai.ToolCall
			for _, c := range m.ToolCalls {
				if t.Call != "" && c.ID == t.Call {
					calls = append(calls, c)
					keep[c.ID] = true
				}
			}
			if m.Content == "" && len(calls) == 0 {
				continue
			}
			m.ToolCalls = calls
			out = append(out, m)
		case openai.RoleTool:
			if keep[m.ToolCallID] {
				out = append(out, m)
			}
		default:
			keep = nil
			out = append(out, m)
		}
	}
	return out
}

// LastN filters with DropOtherToolCalls and keeps the last n messages of
// what is left, never starting with a tool result whose call was cut off.
func LastN(n int) Filter {
	return func(self string, t Transfer) []openai.Message {
		h := DropOtherToolCalls(self, t)
		if len(h) > n {
			h = h[len(h)-n:]
		}
		for len(h) > 0 && h[0].Role == openai.RoleTool {
			h = h[1:]
		}
		return h
	}
}
