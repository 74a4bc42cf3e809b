package agency

import "fmt"

// Access is an action's access policy for one caller.
type Access uint8

// The access policies.
const (
	// Permitted lets the caller run the action. It is the default.
	Permitted Access = iota
	// Denied refuses the action with permission_denied and hides it from the
	// caller's help.
	Denied
	// Requested asks the receiving agent's PermissionRequester, which may take
	// as long as a human needs. Without one, the action is denied.
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
	fn       func(*Message) Access
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
	}
	return p.static
}

// WithAccess sets an action's access policy for every caller.
func WithAccess(a Access) ActionOption {
	return func(c *actionConfig) error {
		if a > Requested {
			return fmt.Errorf("%w: unknown access policy %d", ErrInvalidOption, a)
		}
		return c.setPolicy(policy{static: a})
	}
}

// AccessBySender sets an action's access policy per sender id, with def for
// every sender the map does not name.
func AccessBySender(policies map[string]Access, def Access) ActionOption {
	return func(c *actionConfig) error {
		for id, a := range policies {
			if a > Requested {
				return fmt.Errorf("%w: unknown access policy %d for %q", ErrInvalidOption, a, id)
			}
		}
		if def > Requested {
			return fmt.Errorf("%w: unknown default access policy %d", ErrInvalidOption, def)
		}
		m := make(map[string]Access, len(policies))
		for id, a := range policies {
			m[id] = a
		}
		return c.setPolicy(policy{static: def, bySender: m})
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
