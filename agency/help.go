package agency

import (
	"context"
	"encoding/json"
	"reflect"
	"runtime/debug"
	"slices"
)

// ActionHelp is one action's entry in the value help returns. Decode a help
// response with Call[map[string]ActionHelp] or Value[map[string]ActionHelp].
// An action registered with CustomHelp may have an entry of any other shape.
type ActionHelp struct {
	Description string            `json:"description,omitempty"`
	Args        json.RawMessage   `json:"args"` // a JSON Schema object
	Returns     json.RawMessage   `json:"returns,omitempty"`
	Errors      map[string]string `json:"errors,omitempty"`
	Access      string            `json:"access"` // "permitted" or "requested"
	Examples    []json.RawMessage `json:"examples,omitempty"`
}

// HelpArgs are the arguments of the built-in help action.
type HelpArgs struct {
	// ActionName limits the answer to one action.
	ActionName string `json:"action_name,omitempty" jsonschema:"description=the one action to describe; all when empty"`
}

var helpInfo = func() *typeInfo {
	info, err := typeInfoFor(reflect.TypeFor[HelpArgs]())
	if err != nil {
		panic(err)
	}
	return info
}()

// answerHelp responds to help with the entries of the actions the asking
// agent may call: all of them, or the one named by action_name.
func (c *conn) answerHelp(ctx context.Context, m *Message) {
	defer func() {
		// In process the arguments are the sender's Go value, whose own
		// MarshalJSON may panic while they are decoded here.
		if p := recover(); p != nil {
			c.agent.logger.Error("agency: help panicked", "agent", c.agent.id, "from", m.From, "panic", p, "stack", string(debug.Stack()))
			c.fail(ctx, m, newActionError(TypeActionFailed, nil, "%s.help panicked: %v", c.agent.id, p))
		}
	}()
	var args HelpArgs
	if err := decodeArgs(helpInfo, m.Args, &args); err != nil {
		c.fail(ctx, m, newActionError(TypeInvalidArgs, err, "invalid arguments for %q: %v", c.agent.id+".help", err))
		return
	}
	help := map[string]json.RawMessage{}
	for act := range c.agent.actions.all() {
		name := act.name
		if args.ActionName != "" && name != args.ActionName {
			continue
		}
		probe := &Message{To: m.To, From: m.From, ID: m.ID, Meta: m.Meta, Action: name}
		access := c.decide(act, probe)
		if access == Denied {
			continue
		}
		entry, err := c.agent.helpEntry(act, access)
		if err != nil {
			c.fail(ctx, m, newActionError(TypeActionFailed, err, "help for %q: %v", name, err))
			return
		}
		help[name] = entry
	}
	if args.ActionName != "" && len(help) == 0 {
		if m.To != Broadcast {
			c.fail(ctx, m, newActionError(TypeNotFound, nil,
				"%q has no action %q that %q may call; send help without action_name to list them", c.agent.id, args.ActionName, m.From))
		}
		return
	}
	if err := c.reply(ctx, m, ResponseAction, help); err != nil {
		c.agent.logger.Warn("agency: help not delivered", "agent", c.agent.id, "to", m.From, "error", err)
	}
}

// helpEntry returns an action's help entry as the caller with the given
// access sees it.
func (a *Agent) helpEntry(act *action, access Access) (json.RawMessage, error) {
	if act.cfg.help != nil {
		return act.cfg.help, nil
	}
	schema := act.cfg.schema // RegisterJSON's
	if schema == nil {
		var err error
		if schema, err = act.args.argsSchema(); err != nil {
			return nil, err
		}
	}
	h := ActionHelp{Args: schema, Errors: act.cfg.errors, Access: access.String()}
	if act.cfg.description != nil {
		h.Description = *act.cfg.description
	}
	var desc string
	if act.cfg.returns != nil {
		desc = *act.cfg.returns
	}
	if act.cfg.schema != nil {
		h.Returns = jsonReturns(act.cfg.returnsSchema, desc)
	} else {
		h.Returns = returnsSchema(act.h.result(), desc)
	}
	for _, ex := range act.cfg.encoded {
		b, err := json.Marshal(struct {
			To     string                     `json:"to"`
			Action map[string]json.RawMessage `json:"action"`
		}{a.id, map[string]json.RawMessage{act.name: ex}})
		if err != nil {
			return nil, err
		}
		h.Examples = append(h.Examples, b)
	}
	return json.Marshal(h)
}

// ActionNames returns the names of the agent's registered actions, sorted,
// without help.
func (a *Agent) ActionNames() []string {
	names := make([]string, 0, a.actions.len())
	for act := range a.actions.all() {
		names = append(names, act.name)
	}
	slices.Sort(names)
	return names
}
