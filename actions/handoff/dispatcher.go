package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/seed72275b23/agency-go/agency"
)

// Handoff is one entry of a Dispatcher: a transfer tool named Name, which
// the model reads Description of, hands the conversation to Target with
// Message.
type Handoff struct {
	Name        string `json:"name"`
	Target      string `json:"target"`
	Description string `json:"description"`
	Message     string `json:"message"`
}

// The errors of a Dispatcher's methods (also what the model reads, as an
// error result of the management tools).
var (
	ErrUnauthorized = errors.New("handoff: target not authorized")
	ErrExists       = errors.New("handoff: handoff exists")
	ErrUnknown      = errors.New("handoff: no such handoff")
	ErrInvalid      = errors.New("handoff: invalid handoff")
)

// Limits of a Handoff.
const (
	maxDescription = 1024 // characters of a Handoff's Description
	maxMessage     = 4096 // characters of a Handoff's (and a Transfer's) Message
)

// namePattern is what the chat-completions API takes as a tool name.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Dispatcher is a set of handoffs to an authorized list of agents: the
// "dynamic handoffs" of AutoGen's proposal #4739. Each enabled handoff is
// one transfer tool for an agent whose Policy has Dispatch(d) among its
// rules; with Manage the model creates, enables, disables and deletes
// handoffs itself, only ever to an authorized agent.
//
// The handoffs a Dispatcher holds (given to NewDispatcher, or added with
// its methods) are where every conversation starts: the first change the
// model makes in a conversation copies them into a table of that agent and
// conversation, kept in the Policy's store, which later changes (of the
// model in that conversation) go to. A Dispatcher may be shared by several
// agents. Its methods are safe for concurrent use.
type Dispatcher struct {
	authorized []string

	mu      sync.Mutex
	entries []entry
}

// entry is a handoff and whether it is enabled.
type entry struct {
	Handoff
	Enabled bool `json:"enabled"`
	// Revoked marks a handoff whose target the dispatcher no longer
	// authorized when it was offered: it stays in the table, so that a
	// call of it reads why, but it is never offered or made again.
	Revoked bool `json:"revoked,omitempty"`
}

// NewDispatcher returns a Dispatcher whose handoffs may go to the agents
// named in authorized, with the handoffs given, enabled. It fails when
// authorized is empty or names an invalid id, or a handoff is invalid.
func NewDispatcher(authorized []string, handoffs ...Handoff) (*Dispatcher, error) {
	if len(authorized) == 0 {
		return nil, errors.New("handoff: NewDispatcher: authorize at least one agent")
	}
	for _, id := range authorized {
		if err := agency.ValidateID(id); err != nil {
			return nil, fmt.Errorf("handoff: NewDispatcher: %w", err)
		}
	}
	d := &Dispatcher{authorized: slices.Clone(authorized)}
	slices.Sort(d.authorized)
	d.authorized = slices.Compact(d.authorized)
	for _, h := range handoffs {
		if err := d.Add(h, true); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// authorizedIDs returns the agents the handoffs may go to, sorted.
func (d *Dispatcher) authorizedIDs() []string { return slices.Clone(d.authorized) }

// Add adds a handoff, enabled or not. It fails with ErrUnauthorized when
// its target is not authorized, ErrExists when its name is taken, and
// ErrInvalid when a field is wrong: the name must match
// ^[a-zA-Z0-9_-]{1,64}$ without "__", the description hold 1 to
// 1,024 characters, the message at most 4,096.
func (d *Dispatcher) Add(h Handoff, enabled bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.add(d.entries, h, enabled)
	if err != nil {
		return err
	}
	d.entries = t
	return nil
}

// Delete removes a handoff; ErrUnknown when there is none by that name.
func (d *Dispatcher) Delete(name string) error {
	return d.change(func(t []entry) ([]entry, error) { return del(t, name) })
}

// Enable enables a handoff; ErrUnknown when there is none by that name.
func (d *Dispatcher) Enable(name string) error {
	return d.change(func(t []entry) ([]entry, error) { return setEnabled(t, name, true) })
}

// Disable disables a handoff; ErrUnknown when there is none by that name.
func (d *Dispatcher) Disable(name string) error {
	return d.change(func(t []entry) ([]entry, error) { return setEnabled(t, name, false) })
}

// Enabled returns the enabled handoffs, in the order they were added.
func (d *Dispatcher) Enabled() []Handoff {
	d.mu.Lock()
	defer d.mu.Unlock()
	return enabled(d.entries)
}

func (d *Dispatcher) change(f func([]entry) ([]entry, error)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := f(d.entries)
	if err != nil {
		return err
	}
	d.entries = t
	return nil
}

// table returns a copy of the dispatcher's own handoffs: where each
// conversation starts.
func (d *Dispatcher) table() []entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.entries)
}

// authorizedOnly splits t into the entries whose target d authorizes and
// the others (revoked before, or now).
func (d *Dispatcher) authorizedOnly(t []entry) (kept, dropped []entry) {
	for _, e := range t {
		if !e.Revoked && slices.Contains(d.authorized, e.Target) {
			kept = append(kept, e)
		} else {
			dropped = append(dropped, e)
		}
	}
	return kept, dropped
}

// dispatchError is an error of a dispatcher operation: it reads as the
// model should read it ("invalid_args: …") and matches its sentinel.
type dispatchError struct {
	typ      agency.ErrorType
	text     string
	sentinel error
}

func (e *dispatchError) Error() string    { return "handoff: " + e.text }
func (e *dispatchError) Unwrap() error    { return e.sentinel }
func (e *dispatchError) forModel() string { return string(e.typ) + ": " + e.text }
func invalidf(format string, args ...any) error {
	return &dispatchError{agency.TypeInvalidArgs, fmt.Sprintf(format, args...), ErrInvalid}
}

// add returns t with h added, or why it cannot be.
func (d *Dispatcher) add(t []entry, h Handoff, enabled bool) ([]entry, error) {
	if !namePattern.MatchString(h.Name) || strings.Contains(h.Name, "__") {
		return nil, invalidf("name: %q must match ^[a-zA-Z0-9_-]{1,64}$ and hold no \"__\" (the tools of other agents have it)", h.Name)
	}
	if !slices.Contains(d.authorized, h.Target) {
		return nil, &dispatchError{agency.TypePermissionDenied,
			fmt.Sprintf("handoff target %q is not authorized (authorized: %s)", h.Target, strings.Join(d.authorized, ", ")), ErrUnauthorized}
	}
	if n := utf8.RuneCountInString(h.Description); n == 0 || n > maxDescription {
		return nil, invalidf("description: must hold 1 to at most %d characters, not %d", maxDescription, n)
	}
	if n := utf8.RuneCountInString(h.Message); n > maxMessage {
		return nil, invalidf("message: must hold at most %d characters, not %d", maxMessage, n)
	}
	if slices.ContainsFunc(t, func(e entry) bool { return e.Name == h.Name }) {
		return nil, &dispatchError{agency.TypeInvalidArgs, fmt.Sprintf("handoff %q already exists; enable, disable or delete it, or create one with another name", h.Name), ErrExists}
	}
	return append(slices.Clone(t), entry{Handoff: h, Enabled: enabled}), nil
}

func unknown(name string) error {
	return &dispatchError{agency.TypeInvalidArgs, fmt.Sprintf("no handoff %q", name), ErrUnknown}
}

func del(t []entry, name string) ([]entry, error) {
	i := slices.IndexFunc(t, func(e entry) bool { return e.Name == name })
	if i < 0 {
		return nil, unknown(name)
	}
	return slices.Delete(slices.Clone(t), i, i+1), nil
}

func setEnabled(t []entry, name string, on bool) ([]entry, error) {
	i := slices.IndexFunc(t, func(e entry) bool { return e.Name == name })
	if i < 0 {
		return nil, unknown(name)
	}
	t = slices.Clone(t)
	t[i].Enabled = on
	return t, nil
}

func enabled(t []entry) []Handoff {
	var out []Handoff
	for _, e := range t {
		if e.Enabled {
			out = append(out, e.Handoff)
		}
	}
	return out
}

// The management tools.
const (
	toolCreate  = "create_handoff"
	toolEnable  = "enable_handoff"
	toolDisable = "disable_handoff"
	toolDelete  = "delete_handoff"
)

// manageTools returns the four management tools of d for the model.
func (d *Dispatcher) manageTools() []toolDef {
	enum, _ := json.Marshal(d.authorized)
	create := `{"type":"object","properties":{` +
		`"name":{"type":"string","pattern":"^[a-zA-Z0-9_-]{1,64}$","description":"The name of the handoff: the name of the tool that performs it. Letters, digits, _ and -; no __."},` +
		`"target":{"type":"string","enum":` + string(enum) + `,"description":"The agent the handoff hands the conversation to."},` +
		`"description":{"type":"string","maxLength":1024,"description":"When the handoff should happen and what the target agent can do: the description of its tool."},` +
		`"message":{"type":"string","maxLength":4096,"description":"The message to the target agent."}},` +
		`"required":["name","target","description","message"],"additionalProperties":false}`
	byName := func(what string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The name of the handoff to ` + what + `."}},"required":["name"],"additionalProperties":false}`)
	}
	return []toolDef{
		{toolCreate, "Create a handoff and enable it: from the next step on, calling the tool named after it hands the conversation to its target with its message. " +
			"The target must be one of the authorized agents. Example: name \"process_payment\", target \"payment_processor_agent\", " +
			"description \"Handoff when a payment needs processing, handled by the payment processor agent.\", message \"Please process the payment for order #12345.\"", json.RawMessage(create)},
		{toolEnable, "Enable a handoff, so that its tool is offered again.", byName("enable")},
		{toolDisable, "Disable a handoff: its tool is no longer offered until it is enabled again.", byName("disable")},
		{toolDelete, "Delete a handoff.", byName("delete")},
	}
}

// toolDef is a tool a Policy offers.
type toolDef struct {
	name, description string
	params            json.RawMessage
}
