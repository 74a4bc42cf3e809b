package demo

import (
	"slices"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
)

func TestMentions(t *testing.T) {
	for _, c := range []struct {
		text  string
		words []string
		want  bool
	}{
		{"My skates broke", []string{"ok", "yes"}, false}, // not "br-ok-e"
		{"OK, do it", []string{"ok"}, true},
		{"Multiply 6 by 7", []string{"multipl"}, true},
		{"6 * 7", []string{"*"}, true},
		{"I want my money back", []string{"money back"}, true},
		{"a refund", []string{"human"}, false},
	} {
		if got := Mentions(c.text, c.words...); got != c.want {
			t.Errorf("Mentions(%q, %q) = %v, want %v", c.text, c.words, got, c.want)
		}
	}
	if got := Numbers("what is 2 plus -3.5?"); !slices.Equal(got, []float64{2, -3.5}) {
		t.Errorf("Numbers: %v", got)
	}
}

func TestToolCalled(t *testing.T) {
	req := openaitest.Request{Messages: []openaitest.Message{
		{Role: "user", Content: "2+3"},
		{Role: "assistant", ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "Calculator__add"}}},
		{Role: "tool", ToolCallID: "c1", Content: "5"},
	}}
	if got := ToolCalled(req); got != "Calculator__add" {
		t.Errorf("ToolCalled = %q", got)
	}
	if got := ToolCalled(openaitest.Request{Messages: req.Messages[:1]}); got != "" {
		t.Errorf("ToolCalled after a user message = %q", got)
	}
}
