package driver

import (
	"context"

	"github.com/seed72275b23/agency-go/agency"
)

// Router carries an agent's outgoing messages. A space gives one to each
// agent it adds, through [Connect].
//
// Route must be safe for concurrent use. It returns agency.ErrNoRecipient
// for a point-to-point message when it can tell that no agent has the
// recipient id, and an error when the message may not have been delivered;
// it should return once the message is on its way, never wait for the
// recipient to act on it. A space that bounds the size of a message
// returns an error wrapping agency.ErrMessageTooLarge for one over its
// limit, its text naming the size and the limit; when that message is a
// response, the agent answers its caller with an error of type
// response_too_large (agency.ErrResponseTooLarge) instead, at once.
type Router interface {
	Route(ctx context.Context, m *agency.Message) error
}

// RouterFunc adapts a function to a Router.
type RouterFunc func(ctx context.Context, m *agency.Message) error

// Route calls f.
func (f RouterFunc) Route(ctx context.Context, m *agency.Message) error { return f(ctx, m) }

// BroadcastRouter is a Router that can tell which agents a broadcast
// reached. A space that knows its members (space.Local) gives its agents
// one, so that agency.Survey knows when every agent has answered; over a
// wire, where no process knows who else is there, a Router need not be
// one.
type BroadcastRouter interface {
	Router
	// RouteBroadcast routes m, a broadcast, and returns the ids of the
	// agents that took it in (the sender's too, when it did).
	RouteBroadcast(ctx context.Context, m *agency.Message) (reached []string, err error)
}

// RecipientWatcher is a Router that can tell, while an agent reads a
// stream (agency's Agent.Stream), that the agent streaming to it is gone,
// where silence alone would not say so before the caller's deadline: a
// wire space whose peer process was killed. agency calls WatchRecipient
// for each stream of a remote recipient and stops the stream with the
// error sent on the channel. The space closes the channel once ctx has
// ended (or after the error), and agency waits for that.
type RecipientWatcher interface {
	Router
	WatchRecipient(ctx context.Context, id string) <-chan error
}

// NativeRouter is a Router that can tell that the agent a message goes to
// speaks agency-go's own wire, as every agent of a space.Local does, and
// every agent on an amqpspace exchange unless the space shares it with
// agents of another library (amqpspace's Config.Interop).
//
// agency uses it for streams: a caller that stops reading a stream
// (agency's Agent.Stream) before the answer sends the responder a
// [cancel], which cancels the handler's context, or, if the handler has
// not started yet, keeps it from running. To a recipient for which Native
// reports true the [cancel] goes at once, even if no part has come; to any
// other it goes only once a part has shown that the recipient speaks
// streams, since an agent of another library could take it for a request
// of an action it does not have and answer it with an error. A Router that
// is not a NativeRouter counts as reporting false.
type NativeRouter interface {
	Router
	// Native reports whether the agent with id, if there is one, speaks
	// agency-go's wire. It must be quick and safe for concurrent use.
	Native(id string) bool
}
