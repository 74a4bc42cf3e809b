package agency

import "context"

// Forward sends m as [Agent.SendMessage] does, for code that sends messages
// on the agent's behalf and keeps each one until it has left: an outbox
// relay (package actions/store), a store-and-forward queue. It differs in
// one case, the absent recipient. SendMessage, as the actor model has it,
// treats a message to an id no agent has as sent and tells the agent's
// ErrorHandler; Forward returns an error matching ErrNoRecipient instead,
// and the ErrorHandler hears nothing, so that the caller can keep the
// message and try again once the recipient is there. The space tells an
// absent recipient where it can, as for Request (always in space.Local,
// through the broker's returns in amqpspace); where it cannot, Forward
// returns nil as SendMessage does.
//
// An agent sending for itself uses Send or SendMessage.
func (a *Agent) Forward(ctx context.Context, m *Message) (id string, err error) {
	c, err := a.prepare(m)
	if err != nil {
		return "", err
	}
	if a.hooks.send != nil && !m.IsResponse() {
		var done func(error)
		ctx, done = a.observeSend(ctx, m, false)
		defer func() { done(err) }()
	}
	a.carryTrace(ctx, m)
	if !a.hooks.wantsResponses() && !m.IsResponse() {
		m.NoReply = true // as in SendMessage
	}
	return m.ID, c.router.Route(ctx, m)
}
