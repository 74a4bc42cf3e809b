package agency

import (
	"context"
)

// Router carries an agent's outgoing messages. A space gives one to each
// agent it adds, through [Connect].
//
// Route must be safe for concurrent use. It returns ErrNoRecipient for a
// point-to-point message when it can tell that no agent has the recipient id,
// and an error when the message may not have been delivered; it should return
// once the message is on its way, never wait for the recipient to act on it.
type Router interface {
	Route(ctx context.Context, m *Message) error
}

// RouterFunc adapts a function to a Router.
type RouterFunc func(ctx context.Context, m *Message) error

// Route calls f.
func (f RouterFunc) Route(ctx context.Context, m *Message) error { return f(ctx, m) }
