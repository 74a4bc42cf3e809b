package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/seed72275b23/agency-go/agency"
)

// Vars are a conversation's context variables: they travel with the
// conversation from agent to agent, are offered to conditions and system
// templates, and reach the tools the agents call (see VarsFrom). Values
// are whatever JSON holds: after a trip through the store or the wire,
// numbers are float64, lists []any, objects map[string]any.
type Vars map[string]any

// The __meta__ keys of a tool request made while a Policy serves a
// conversation.
const (
	// metaVars holds the conversation's variables.
	metaVars = "context_vars"
	// metaVersion holds the version of the conversation they belong to.
	metaVersion = "context_version"
	// metaHandedTo marks an answer after which the conversation goes on
	// with another agent (an after-work handoff): it holds that agent's id,
	// and the next answer comes from there.
	metaHandedTo = "handed_to"
	// metaFinal marks the last answer of a conversation.
	metaFinal        = "final"
	metaConversation = "conversation"
)

// VarsFrom returns the context variables of the message being handled:
// its __meta__.context_vars, which an LLM agent with a Policy puts on each
// tool request, in this process or another. It returns nil when there are
// none. The map is the caller's to change.
func VarsFrom(ctx context.Context) Vars {
	m := agency.MessageFrom(ctx)
	if m == nil {
		return nil
	}
	switch v := m.Meta[metaVars].(type) {
	case Vars:
		return maps.Clone(v)
	case map[string]any:
		return Vars(maps.Clone(v))
	case nil:
		return nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		var out Vars
		if json.Unmarshal(b, &out) != nil {
			return nil
		}
		return out
	}
}

// VarsAs decodes the context variables of the message being handled (see
// VarsFrom) into a T, through their JSON: T's json tags name the
// variables. Missing variables leave their fields zero.
func VarsAs[T any](ctx context.Context) (T, error) {
	var out T
	b, err := json.Marshal(VarsFrom(ctx))
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return out, fmt.Errorf("handoff: the context variables do not fit %T: %w", out, err)
	}
	return out, nil
}

// merge returns v with every key of set put in.
func (v Vars) merge(set Vars) Vars {
	out := make(Vars, len(v)+len(set))
	maps.Copy(out, v)
	maps.Copy(out, set)
	return out
}
