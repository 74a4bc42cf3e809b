// Package driver is what a space implementation uses to attach agents to
// it; people who write agents never import it. It stands to package agency
// as database/sql/driver stands to database/sql: package space's Local and
// package amqpspace are built on it, and so would be a space over another
// transport.
//
// A space gives each agent it adds a [Router] for the agent's outgoing
// messages and calls [Connect]; it feeds the agent's incoming messages to
// the [Conn] that Connect returns, calls [Conn.Added] once the agent can be
// reached, and [Conn.Close] (or [CloseAll], for many) to take it out. A
// space that knows its members gives its agents a [BroadcastRouter], so
// that agency.Survey knows when every agent has answered. A space over a
// wire gives its agents a [RecipientWatcher], so that a stream's caller
// learns at once that the agent streaming to it is gone. A space whose
// agents all speak agency-go's wire gives its agents a [NativeRouter], so
// that a stream's caller that stops tells the responder at once.
//
// The space/spacetest package holds the conformance tests every space
// implementation must pass.
package driver
