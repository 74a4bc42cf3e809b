package agency

import "context"

// router carries an agent's outgoing messages: a driver.Router, which a
// space gives each agent it adds (see driver.Router for the contract).
type router interface {
	Route(ctx context.Context, m *Message) error
}

// broadcastRouter is a driver.BroadcastRouter: a router that can tell
// which agents a broadcast reached, so that Survey knows when every agent
// has answered.
type broadcastRouter interface {
	router
	RouteBroadcast(ctx context.Context, m *Message) (reached []string, err error)
}
