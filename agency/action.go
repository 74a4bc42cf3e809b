package agency

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// ActionOption sets a piece of an action's metadata in [Handle]. Each option
// may be given once per action, but for Example, which may repeat.
type ActionOption func(*actionConfig) error

type actionConfig struct {
	description *string
	returns     *string
	policy      policy
	policySet   bool
	errors      map[string]string
	examples    []any             // as given to Example
	encoded     []json.RawMessage // the examples' arguments, encoded by Register
	help        json.RawMessage
	// schema and returnsSchema, for an action registered with
	// RegisterJSON: its arguments' JSON Schema, and its result's.
	schema        json.RawMessage
	returnsSchema json.RawMessage
	approver      interface{ argType() reflect.Type } // an approverOf, set by Approve
	// approve, for an action given Approve, does what run does with the
	// approver's word in between. It is here, not in the action, which an
	// idle agent holds: only an action given options has a config of its
	// own.
	approve approval
}

func (c *actionConfig) setPolicy(p policy) error {
	if c.policySet {
		return fmt.Errorf("%w: access policy given twice", ErrInvalidOption)
	}
	c.policy, c.policySet = p, true
	return nil
}

// Describe sets the action's description in help.
func Describe(text string) ActionOption {
	return func(c *actionConfig) error {
		if c.description != nil {
			return fmt.Errorf("%w: Describe given twice", ErrInvalidOption)
		}
		c.description = &text
		return nil
	}
}

// Returns describes the action's return value in help.
func Returns(text string) ActionOption {
	return func(c *actionConfig) error {
		if c.returns != nil {
			return fmt.Errorf("%w: Returns given twice", ErrInvalidOption)
		}
		c.returns = &text
		return nil
	}
}

// Errors documents, in help, the errors the action may return: a short name
// (or error type) for each, with when it happens.
func Errors(docs map[string]string) ActionOption {
	return func(c *actionConfig) error {
		if c.errors != nil {
			return fmt.Errorf("%w: Errors given twice", ErrInvalidOption)
		}
		if len(docs) == 0 {
			return fmt.Errorf("%w: Errors with no entries", ErrInvalidOption)
		}
		c.errors = make(map[string]string, len(docs))
		for k, v := range docs {
			c.errors[k] = v
		}
		return nil
	}
}

// Example adds an example call to help. args is a value of the action's
// argument type, a map, or a JSON object as a string or json.RawMessage; it
// must decode and validate as the action's arguments, which is checked when
// the action is registered.
func Example(args any) ActionOption {
	return func(c *actionConfig) error {
		c.examples = append(c.examples, args)
		return nil
	}
}

// CustomHelp replaces the action's generated help entry with v, which must
// encode to a JSON object. Access still hides the action from callers it is
// denied to.
func CustomHelp(v any) ActionOption {
	return func(c *actionConfig) error {
		if c.help != nil {
			return fmt.Errorf("%w: CustomHelp given twice", ErrInvalidOption)
		}
		b, err := encodeArgsObject(v)
		if err != nil {
			return fmt.Errorf("%w: CustomHelp: %v", ErrInvalidOption, err)
		}
		c.help = b
		return nil
	}
}

// action is a registered action with its types erased. It is kept small
// (an agent with one action holds one, 48 bytes), and allocates nothing
// but itself: what only some actions need is in cfg, and the agent is
// the caller's to give (see run).
type action struct {
	name string
	cfg  *actionConfig // noActionConfig for an action given no options
	args *typeInfo
	// h is the handler: a plainFunc[A, R] when arguments that come as an
	// A need no work (see Register), else a handlerFunc[A, R].
	h caller
}

// noActionConfig is the configuration of every action registered without
// options; it is never written to.
var noActionConfig = &actionConfig{}

// run decodes and validates args and calls the handler of a's action.
func (act *action) run(a *Agent, ctx context.Context, args any) (any, error) {
	return act.h.call(a, act, ctx, args)
}

// caller calls a handler with its types erased; a is the action's agent.
type caller interface {
	call(a *Agent, act *action, ctx context.Context, args any) (any, error)
	result() reflect.Type // the handler's R
}

// handlerFunc is an action's handler. A func in an interface takes no
// allocation, as a closure over it would.
type handlerFunc[A, R any] func(context.Context, A) (R, error)

func (h handlerFunc[A, R]) result() reflect.Type { return reflect.TypeFor[R]() }

// plainFunc is the handler of an action whose arguments, when they come
// as an A, need no work (see Register).
type plainFunc[A, R any] func(context.Context, A) (R, error)

func (h plainFunc[A, R]) result() reflect.Type { return reflect.TypeFor[R]() }

// call passes raw to h as it is when it is an A, else as a handlerFunc
// does.
func (h plainFunc[A, R]) call(a *Agent, act *action, ctx context.Context, raw any) (any, error) {
	if v, ok := raw.(A); ok {
		return h(ctx, v)
	}
	return handlerFunc[A, R](h).call(a, act, ctx, raw)
}

// call decodes and validates raw as the action's arguments and calls h.
func (h handlerFunc[A, R]) call(a *Agent, act *action, ctx context.Context, raw any) (any, error) {
	var args A
	if err := decodeArgs(act.args, raw, &args); err != nil {
		return nil, invalidArgsError(a, act.name, err)
	}
	return h(ctx, args)
}

// Handle registers h as the action name of agent a, with its metadata. It
// panics on a programmer error (see [Register]), as http.ServeMux.Handle does;
// use Register to get the error instead.
//
//	agency.Handle(agent, "add", calc.Add, agency.Describe("Adds two numbers"))
func Handle[A, R any](a *Agent, name string, h func(context.Context, A) (R, error), opts ...ActionOption) {
	if err := Register(a, name, h, opts...); err != nil {
		panic(err)
	}
}

// Register registers h as the action name of agent a, with its metadata. It
// fails when A is not a struct, a validate tag of A names no rule or has a bad
// parameter, help cannot describe A or R (a type that contains itself, a
// complex number, a channel; CustomHelp lifts this), name is reserved or
// taken, an option is invalid or repeated, an example does not decode as an
// A, the agent has already joined a space, or the access can be Requested
// and nothing approves it (see [Approve]).
func Register[A, R any](a *Agent, name string, h func(context.Context, A) (R, error), opts ...ActionOption) error {
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
	info, err := typeInfoFor(reflect.TypeFor[A]())
	if err != nil {
		return fmt.Errorf("agency: action %q: %w", name, err)
	}
	if err := checkRules(info); err != nil {
		return fmt.Errorf("agency: action %q: %w", name, err)
	}
	act := a.actions.slot()
	*act = action{name: name, cfg: noActionConfig, args: info, h: handlerFunc[A, R](h)}
	if err := configure(a, act, info, h, opts); err != nil {
		*act = action{} // the slot may be the agent's own: it keeps nothing of a failed registration
		return err
	}
	a.actions.add(act)
	return nil
}

// configure sets up act, made by Register for a, with its options.
func configure[A, R any](a *Agent, act *action, info *typeInfo, h func(context.Context, A) (R, error), opts []ActionOption) error {
	name := act.name
	if len(opts) > 0 {
		act.cfg = new(actionConfig)
		for _, o := range opts {
			if err := o(act.cfg); err != nil {
				return fmt.Errorf("agency: action %q: %w", name, err)
			}
		}
		for i, ex := range act.cfg.examples {
			var args A
			if err := decodeArgs(info, ex, &args); err != nil {
				return fmt.Errorf("agency: action %q: example %d: %w", name, i+1, err)
			}
			if text, ok := ex.(string); ok {
				ex = json.RawMessage(text) // a JSON object as a string, not a JSON string
			}
			b, err := encodeArgsObject(ex)
			if err != nil {
				return fmt.Errorf("agency: action %q: example %d: %w", name, i+1, err)
			}
			act.cfg.encoded = append(act.cfg.encoded, b)
		}
		act.cfg.examples = nil
	}
	if act.cfg.help == nil {
		// Made now, so that a type help cannot describe fails here and not
		// on the agent's goroutine when someone asks.
		if _, err := info.argsSchema(); err != nil {
			return fmt.Errorf("agency: action %q: arguments: %w", name, err)
		}
		if _, err := returnsBase(act.h.result()); err != nil {
			return fmt.Errorf("agency: action %q: result: %w", name, err)
		}
	}
	if err := setUpApproval(a, act, h); err != nil {
		return fmt.Errorf("agency: action %q: %w", name, err)
	}
	// Arguments that come as an A, from a sender in the process, need no
	// work when A has no rules, no required field that can be nil and no
	// interface field: then they go to the handler as they are, without
	// the copy on the heap that decoding needs.
	if !info.validate && !info.nilable && !holdsInterface(info.typ) {
		act.h = plainFunc[A, R](h)
	}
	return nil
}

// invalidArgsError is the error for arguments of the action name of a that
// do not decode or validate.
func invalidArgsError(a *Agent, name string, err error) *ActionError {
	return newActionError(TypeInvalidArgs, err,
		"invalid arguments for %q: %v (send \"help\" for the argument schema)", a.id+"."+name, err)
}

// checkRules has the validator read the argument type's validate tags, so
// that a misspelt rule or a bad parameter fails at registration: the
// validator panics on them, and would do so at the first call.
func checkRules(info *typeInfo) (err error) {
	if !info.validate {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("validate tag: %v", p)
		}
	}()
	_ = validate.Struct(reflect.New(info.typ).Interface())
	return nil
}

// decodeArgs turns an incoming arguments value into *dst and validates it.
// A value that already is a T (in process) skips decoding, unless T holds
// interface values; anything else goes through its JSON form. Failures are
// invalid_args errors naming the bad fields.
func decodeArgs[T any](info *typeInfo, raw any, dst *T) error {
	switch raw.(type) {
	case T, *T:
		if holdsInterface(info.typ) {
			// Its interface fields get what they would from the wire (see
			// holdsInterface): the same in every space.
			b, err := json.Marshal(raw)
			if err != nil {
				var errs argsError
				errs.add("", "%v", err)
				return &errs
			}
			raw = json.RawMessage(b)
		}
	}
	switch v := raw.(type) {
	case T:
		*dst = v
	case *T:
		if v == nil {
			return decodeJSONArgs(info, nil, dst)
		}
		*dst = *v
	default:
		b, err := argsJSON(raw)
		if err != nil {
			var errs argsError
			errs.add("", "%v", err)
			return &errs
		}
		return decodeJSONArgs(info, b, dst)
	}
	return checkGoArgs(info, dst)
}

// argsJSON returns the JSON text of an arguments value that is not yet of the
// action's type.
func argsJSON(raw any) ([]byte, error) {
	switch v := raw.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	case string:
		return []byte(v), nil
	}
	return json.Marshal(raw)
}
