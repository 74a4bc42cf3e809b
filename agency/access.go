package agency

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Access is an action's access policy for one caller.
type Access uint8

// The access policies.
const (
	// Permitted lets the caller run the action. It is the default.
	Permitted Access = iota
	// Denied refuses the action with permission_denied and hides it from the
	// caller's help.
	Denied
	// Requested asks the action's approver (see Approve), or else the
	// receiving agent's PermissionRequester hooks, which may take as long as
	// a human needs. Register refuses a Requested action that neither can
	// approve; a call that an AccessFunc makes Requested on such an agent
	// is denied.
	Requested
)

// String returns the policy's name in help: "permitted", "denied" or
// "requested".
func (a Access) String() string {
	switch a {
	case Permitted:
		return "permitted"
	case Denied:
		return "denied"
	case Requested:
		return "requested"
	}
	return fmt.Sprintf("Access(%d)", a)
}

// MarshalText encodes the policy as its name.
func (a Access) MarshalText() ([]byte, error) {
	if a > Requested {
		return nil, fmt.Errorf("agency: unknown access policy %d", a)
	}
	return []byte(a.String()), nil
}

// policy decides an action's access for one incoming message. The zero value
// permits everything.
type policy struct {
	static   Access
	bySender map[string]Access // nil unless set with AccessBySender
	patterns []senderPrefix    // AccessBySender's "Prefix*" keys, longest first
	fn       func(*Message) Access
}

// senderPrefix is the access of the senders whose id starts with prefix.
type senderPrefix struct {
	prefix string
	access Access
}

func (p *policy) decide(m *Message) Access {
	switch {
	case p.fn != nil:
		a := p.fn(m)
		if a > Requested {
			return Denied // an unknown answer must not open the door
		}
		return a
	case p.bySender != nil:
		if a, ok := p.bySender[m.From]; ok {
			return a
		}
		for _, r := range p.patterns {
			if strings.HasPrefix(m.From, r.prefix) {
				return r.access
			}
		}
	}
	return p.static
}

// AccessForAll sets an action's access policy for every caller.
func AccessForAll(a Access) ActionOption {
	return func(c *actionConfig) error {
		if a > Requested {
			return fmt.Errorf("%w: unknown access policy %d", ErrInvalidOption, a)
		}
		return c.setPolicy(policy{static: a})
	}
}

// AccessBySender sets an action's access policy per sender id, with def for
// every sender the map does not name.
//
// A key that ends in "*" names every sender whose id starts with what
// precedes it: "Worker-*" covers "Worker-1f3a" and "Worker-eu-7", the
// agents a program starts with random suffixes to keep their ids unique
// across processes. ('*' is in no id, so the key cannot mean one agent.)
// An exact id comes first, then the longest matching prefix, then def.
// A '*' anywhere else in a key is an error, and so is the key "*" alone:
// that is def.
func AccessBySender(policies map[string]Access, def Access) ActionOption {
	return func(c *actionConfig) error {
		if def > Requested {
			return fmt.Errorf("%w: unknown default access policy %d", ErrInvalidOption, def)
		}
		p := policy{static: def, bySender: make(map[string]Access, len(policies))}
		for key, a := range policies {
			if a > Requested {
				return fmt.Errorf("%w: unknown access policy %d for %q", ErrInvalidOption, a, key)
			}
			prefix, pattern := strings.CutSuffix(key, "*")
			switch {
			case strings.Contains(prefix, "*"):
				return fmt.Errorf("%w: AccessBySender key %q: '*' may only end a key, as in \"Worker-*\"", ErrInvalidOption, key)
			case pattern && prefix == "":
				return fmt.Errorf("%w: AccessBySender key \"*\": the access of every other sender is the default argument", ErrInvalidOption)
			case pattern:
				p.patterns = append(p.patterns, senderPrefix{prefix: prefix, access: a})
			default:
				p.bySender[key] = a
			}
		}
		slices.SortFunc(p.patterns, func(x, y senderPrefix) int { return cmp.Compare(len(y.prefix), len(x.prefix)) })
		return c.setPolicy(p)
	}
}

// AccessFunc decides an action's access per incoming message. For help, f is
// asked about a message from the asking agent that names the action and
// carries no arguments. f runs on the agent's goroutine and must not block;
// use Requested to ask a human. A panic in f counts as Denied.
func AccessFunc(f func(m *Message) Access) ActionOption {
	return func(c *actionConfig) error {
		if f == nil {
			return fmt.Errorf("%w: AccessFunc(nil)", ErrInvalidOption)
		}
		return c.setPolicy(policy{fn: f})
	}
}
