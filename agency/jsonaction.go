package agency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// JSONHandler is the handler of an action registered with [RegisterJSON]:
// it receives the arguments as the JSON text of an object, and checks them
// itself.
type JSONHandler func(ctx context.Context, args json.RawMessage) (any, error)

// RegisterJSON registers h as the action name of agent a, for arguments
// that no Go type describes: ones whose JSON Schema comes from elsewhere at
// run time (an MCP server's tool, an A2A skill). help shows schema, which
// must be a JSON Schema object, as the action's args unchanged. The
// framework does not read the schema: h gets the arguments as they came
// (always a JSON object; {} for none) and validates them itself, with a
// JSON Schema library, failing with [InvalidArgsf] so that the caller learns
// what to fix. The options are those of [Register]; [ReturnsSchema] gives
// the schema of the value h returns, and [Approve] takes a
// func(context.Context, json.RawMessage) (bool, error). An [Example] is
// shown in help as given, unchecked.
//
// Before a joins a space, RegisterJSON adds the action as Register does
// (and fails on a name already taken). On an agent made with
// [ChangingActions] it may also be called while the agent is in a space,
// and replaces an action of the same name that RegisterJSON registered: a
// call that has begun keeps the handler it found, the next one finds the
// new one, and help shows the new schema.
func RegisterJSON(a *Agent, name string, schema json.RawMessage, h JSONHandler, opts ...ActionOption) error {
	if h == nil {
		return fmt.Errorf("agency: action %q: nil handler", name)
	}
	if err := validateRegisterable(name); err != nil {
		return err
	}
	schema = bytes.TrimSpace(schema)
	if len(schema) == 0 || schema[0] != '{' || !json.Valid(schema) {
		return fmt.Errorf("agency: action %q: the argument schema must be a JSON object", name)
	}
	changing := a.actions.changing()
	if changing == nil && a.joined() {
		return fmt.Errorf("agency: action %q: register actions before %q joins a space, or make it with agency.ChangingActions", name, a.id)
	}
	if a.actions.getStatic(name) != nil {
		return fmt.Errorf("agency: action %q registered twice on %q", name, a.id)
	}
	if changing == nil && a.actions.get(name) != nil {
		return fmt.Errorf("agency: action %q registered twice on %q", name, a.id)
	}
	act := new(action)
	if changing == nil {
		act = a.actions.slot()
	}
	*act = action{name: name, h: jsonFunc(h), cfg: new(actionConfig)}
	for _, o := range opts {
		if err := o(act.cfg); err != nil {
			*act = action{}
			return fmt.Errorf("agency: action %q: %w", name, err)
		}
	}
	act.cfg.schema = append(json.RawMessage(nil), schema...)
	for i, ex := range act.cfg.examples {
		if text, ok := ex.(string); ok {
			ex = json.RawMessage(text)
		}
		b, err := encodeArgsObject(ex)
		if err != nil {
			*act = action{}
			return fmt.Errorf("agency: action %q: example %d: %w", name, i+1, err)
		}
		act.cfg.encoded = append(act.cfg.encoded, b)
	}
	act.cfg.examples = nil
	if err := setUpJSONApproval(a, act, h); err != nil {
		*act = action{}
		return fmt.Errorf("agency: action %q: %w", name, err)
	}
	if changing != nil {
		changing.put(act)
		return nil
	}
	a.actions.add(act)
	return nil
}

// ReturnsSchema gives, in help, the JSON Schema of what an action
// registered with RegisterJSON returns (with Returns, its description is
// set on it).
func ReturnsSchema(schema json.RawMessage) ActionOption {
	return func(c *actionConfig) error {
		if c.returnsSchema != nil {
			return fmt.Errorf("%w: ReturnsSchema given twice", ErrInvalidOption)
		}
		schema = bytes.TrimSpace(schema)
		if len(schema) == 0 || !json.Valid(schema) {
			return fmt.Errorf("%w: ReturnsSchema: not JSON", ErrInvalidOption)
		}
		c.returnsSchema = append(json.RawMessage(nil), schema...)
		return nil
	}
}

// Unregister removes the action name, registered with RegisterJSON, from an
// agent made with ChangingActions. A call already running ends as it
// would; a later one is not_found, and help no longer lists the action.
func Unregister(a *Agent, name string) error {
	changing := a.actions.changing()
	if changing == nil {
		return fmt.Errorf("agency: Unregister(%q): %q was not made with agency.ChangingActions", name, a.id)
	}
	if !changing.remove(name) {
		return fmt.Errorf("%w: %q has no action %q registered with RegisterJSON", ErrNotFound, a.id, name)
	}
	return nil
}

// ChangingActions lets the agent's actions registered with RegisterJSON
// change while it is in a space: RegisterJSON adds or replaces one,
// Unregister removes one. An agent that bridges a foreign server, whose
// tools come and go, is made with it; the actions registered with Register
// stay fixed.
func ChangingActions() Option {
	return func(c *agentConfig) error {
		if c.changing {
			return fmt.Errorf("%w: ChangingActions given twice", ErrInvalidOption)
		}
		c.changing = true
		return nil
	}
}

// changingActions are the actions of an agent made with ChangingActions
// that RegisterJSON registered. Readers (the delivery goroutine, help)
// take the current table without a lock; writers replace it.
type changingActions struct {
	mu    sync.Mutex // serializes writers
	table atomic.Pointer[actionTable]
}

// actionTable is one immutable state of a changingActions.
type actionTable struct {
	list   []*action // in the order registered
	byName map[string]*action
}

func (ch *changingActions) get(name string) *action {
	if t := ch.table.Load(); t != nil {
		return t.byName[name]
	}
	return nil
}

func (ch *changingActions) list() []*action {
	if t := ch.table.Load(); t != nil {
		return t.list
	}
	return nil
}

func (ch *changingActions) put(act *action) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	old := ch.table.Load()
	next := &actionTable{byName: map[string]*action{}}
	replaced := false
	if old != nil {
		for _, x := range old.list {
			if x.name == act.name {
				x, replaced = act, true
			}
			next.list = append(next.list, x)
			next.byName[x.name] = x
		}
	}
	if !replaced {
		next.list = append(next.list, act)
		next.byName[act.name] = act
	}
	ch.table.Store(next)
}

func (ch *changingActions) remove(name string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	old := ch.table.Load()
	if old == nil || old.byName[name] == nil {
		return false
	}
	next := &actionTable{byName: make(map[string]*action, len(old.list))}
	for _, x := range old.list {
		if x.name != name {
			next.list = append(next.list, x)
			next.byName[x.name] = x
		}
	}
	ch.table.Store(next)
	return true
}

// jsonFunc is the caller of an action registered with RegisterJSON.
type jsonFunc JSONHandler

func (h jsonFunc) result() reflect.Type { return reflect.TypeFor[any]() }

func (h jsonFunc) call(a *Agent, act *action, ctx context.Context, raw any) (any, error) {
	args, err := jsonArgs(a, act, raw)
	if err != nil {
		return nil, err
	}
	return h(ctx, args)
}

// jsonArgs returns the JSON text of an incoming arguments value, which must
// be an object.
func jsonArgs(a *Agent, act *action, raw any) (json.RawMessage, error) {
	b, err := argsJSON(raw)
	if err != nil {
		return nil, invalidArgsError(a, act.name, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage("{}"), nil
	}
	if b[0] != '{' {
		return nil, invalidArgsError(a, act.name, errors.New("the arguments must be a JSON object"))
	}
	return b, nil
}

// setUpJSONApproval is setUpApproval for an action registered with
// RegisterJSON, whose approver takes the arguments' JSON text.
func setUpJSONApproval(a *Agent, act *action, h JSONHandler) error {
	switch ap := act.cfg.approver.(type) {
	case nil:
		if act.cfg.policy.requests() == always && !a.hooks.hasPermission() {
			return errors.New("its access is Requested but nothing approves a call: give agency.Approve, or a PermissionRequester with agency.Hooks")
		}
		return nil
	case approverOf[json.RawMessage]:
		if !act.cfg.policySet {
			act.cfg.policy, act.cfg.policySet = policy{static: Requested}, true
		} else if act.cfg.policy.requests() == never {
			return errors.New("Approve is given but the access policy never asks for approval")
		}
		act.cfg.approve = jsonApproval(a, act, ap.f, h)
		return nil
	default:
		return fmt.Errorf("Approve takes %v, but the action's arguments are json.RawMessage", act.cfg.approver.argType())
	}
}

func jsonApproval(a *Agent, act *action, approve func(context.Context, json.RawMessage) (bool, error), h JSONHandler) approval {
	return func(ctx context.Context, m *Message) (func() (any, error), *ActionError) {
		args, err := jsonArgs(a, act, m.Args)
		if err != nil {
			return nil, asActionError(err)
		}
		ok, err := func() (ok bool, err error) {
			defer func() {
				if p := recover(); p != nil {
					a.logger.Error("agency: approver panicked", "agent", a.id, "action", act.name, "panic", p, "stack", string(debug.Stack()))
					ok, err = false, nil
				}
			}()
			return approve(ctx, args)
		}()
		var typed *ActionError
		switch {
		case err != nil && errors.As(err, &typed):
			return nil, typed
		case err != nil:
			return nil, newActionError(TypePermissionDenied, err, "%q not permitted for %q: %v", a.id+"."+act.name, m.From, err)
		case !ok:
			return nil, newActionError(TypePermissionDenied, nil, "%q not permitted for %q", a.id+"."+act.name, m.From)
		}
		return func() (any, error) { return h(ctx, args) }, nil
	}
}

// jsonReturns is the returns entry in help of an action registered with
// RegisterJSON: its ReturnsSchema with the Returns description on it, the
// description alone, or nothing.
func jsonReturns(schema json.RawMessage, desc string) json.RawMessage {
	if desc == "" {
		return schema
	}
	obj := map[string]json.RawMessage{}
	if schema != nil && json.Unmarshal(schema, &obj) != nil {
		return schema // true or false: no room for a description
	}
	obj["description"], _ = json.Marshal(desc)
	b, err := json.Marshal(obj)
	if err != nil {
		return schema
	}
	return b
}
