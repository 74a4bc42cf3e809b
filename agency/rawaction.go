package agency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// HandleRaw registers h as the action name of agent a, with arguments that
// no Go type describes: those of a tool that lives elsewhere (an A2A
// agent's skill, a tool of another protocol), whose JSON Schema comes from
// there. It panics on a programmer error, as Handle does; use RegisterRaw
// to get the error instead.
func HandleRaw(a *Agent, name string, schema json.RawMessage, h func(context.Context, json.RawMessage) (any, error), opts ...ActionOption) {
	if err := RegisterRaw(a, name, schema, h, opts...); err != nil {
		panic(err)
	}
}

// RegisterRaw registers h as the action name of agent a, for arguments
// described by schema, a JSON Schema object that help shows as the
// action's args unchanged. h receives the arguments as the JSON text of an
// object ("{}" when none were given); anything that is not an object is
// invalid_args before h runs. Checking the arguments against schema is
// h's part (or the remote tool's): the framework knows no more of them.
// What h returns is the response value, as for Register.
//
// It fails as Register does (reserved or taken name, an invalid or
// repeated option, an agent already in a space), when schema is not a JSON
// object, and when the access can be Requested and no PermissionRequester
// hook decides it: Approve needs the typed arguments of Register.
func RegisterRaw(a *Agent, name string, schema json.RawMessage, h func(context.Context, json.RawMessage) (any, error), opts ...ActionOption) error {
	if h == nil {
		return fmt.Errorf("agency: action %q: nil handler", name)
	}
	if err := validateRegisterable(name); err != nil {
		return err
	}
	if a.joined() {
		return fmt.Errorf("agency: action %q: register actions before %q joins a space", name, a.id)
	}
	if a.actions.get(name) != nil {
		return fmt.Errorf("agency: action %q registered twice on %q", name, a.id)
	}
	schema = bytes.TrimSpace(schema)
	if !json.Valid(schema) || len(schema) == 0 || schema[0] != '{' {
		return fmt.Errorf("agency: action %q: the schema must be a JSON object, not %.40q", name, schema)
	}
	cfg := &actionConfig{schema: append(json.RawMessage(nil), schema...)}
	for _, o := range opts {
		if err := o(cfg); err != nil {
			return fmt.Errorf("agency: action %q: %w", name, err)
		}
	}
	for i, ex := range cfg.examples {
		if text, ok := ex.(string); ok {
			ex = json.RawMessage(text)
		}
		b, err := encodeArgsObject(ex)
		if err != nil {
			return fmt.Errorf("agency: action %q: example %d: %w", name, i+1, err)
		}
		cfg.encoded = append(cfg.encoded, b)
	}
	cfg.examples = nil
	switch {
	case cfg.approver != nil:
		return fmt.Errorf("agency: action %q: Approve needs the typed arguments of Register; decide with a PermissionRequester (Hooks)", name)
	case cfg.policy.requests() == always && !a.hooks.hasPermission():
		return fmt.Errorf("agency: action %q: its access is Requested but nothing approves a call: give a PermissionRequester with agency.Hooks", name)
	}
	act := a.actions.slot()
	*act = action{name: name, cfg: cfg, agent: a, h: rawFunc(h)}
	a.actions.add(act)
	return nil
}

// rawFunc is the handler of an action registered with RegisterRaw.
type rawFunc func(context.Context, json.RawMessage) (any, error)

func (h rawFunc) result() reflect.Type { return reflect.TypeFor[any]() }

func (h rawFunc) call(act *action, ctx context.Context, raw any) (any, error) {
	b, err := rawArgs(raw)
	if err != nil {
		return nil, invalidArgsError(act.agent, act.name, err)
	}
	return h(ctx, b)
}

// errNotObject is the problem with arguments that are not a JSON object.
var errNotObject = errors.New("the arguments must be a JSON object")

// rawArgs returns the JSON text of an incoming arguments value, which
// must be an object.
func rawArgs(raw any) (json.RawMessage, error) {
	var b []byte
	switch v := raw.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		b = v
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("%w: %v", errNotObject, err)
		}
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage("{}"), nil
	}
	if b[0] != '{' || !json.Valid(b) {
		return nil, errNotObject
	}
	return json.RawMessage(b), nil
}
