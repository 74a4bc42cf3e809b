package openai

import (
	"slices"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
)

// A say whose sender asked for parts (agency.Agent.Stream) gets the
// model's text as the model writes it, with no Stream option: each piece,
// in order, then the answer. The history keeps the whole answer, and a
// plain say of the same agent still gets the answer alone.
func TestStreamToCaller(t *testing.T) {
	f := newFixture(t,
		openaitest.Step{Text: "Let me add.", ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: `{"a":2,"b":3}`}}},
		openaitest.Step{Text: "The sum is 5.", Pieces: []string{"The s", "um is", " 5."}},
		openaitest.Step{Text: "Yes."},
	)
	var calls received
	f.add(calculator(&calls))
	f.start([]string{"Calculator"})

	m := &agency.Message{To: "Assistant", Action: "say", Args: SayArgs{Content: "2+3?"}, Meta: map[string]any{"conversation": "c1"}}
	var parts []string
	var answer string
	for r, err := range f.user.StreamMessage(f.ctx, m) {
		if err != nil {
			t.Fatalf("stream: %v (after %q)", err, parts)
		}
		v, err := agency.Value[string](r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Action == agency.PartAction {
			parts = append(parts, v)
			continue
		}
		answer = v
	}
	if want := []string{"Let ", "me ", "add.", "\n", "The s", "um is", " 5."}; !slices.Equal(parts, want) {
		t.Errorf("parts %q, want %q", parts, want)
	}
	if answer != "The sum is 5." {
		t.Errorf("answer %q", answer)
	}
	if !f.requests(2)[1].Stream {
		t.Error("the model request was not streamed")
	}
	h, err := f.llm.memory.Load(f.ctx, ConversationKey("User", "c1"))
	if err != nil || len(h) == 0 || h[len(h)-1].Content != "The sum is 5." {
		t.Errorf("history %+v, %v: want it to end with the whole answer", h, err)
	}
	if got, err := f.sayIn(f.user, "c1", "sure?"); err != nil || got != "Yes." {
		t.Errorf("a plain say: %q, %v", got, err)
	}
	if f.requests(3)[2].Stream {
		t.Error("a plain say's model request was streamed")
	}
}
