// Package amqpspace is a [space.Space] whose agents live in many processes,
// on many hosts, that share a RabbitMQ exchange. It behaves as space.Local
// does and passes the same conformance suite, space/spacetest; what it adds
// is what a network needs.
//
// Topology: one durable topic exchange (Config.Exchange, "agency" by
// default). A message to agent X is published with routing key X,
// mandatory and with publisher confirms; a broadcast with routing key
// "__broadcast__". Agent X consumes queue X, bound with X, and queue
// X-broadcast, bound with "__broadcast__", exclusively: the broker lets one
// consumer hold them, which is what makes an id unique across processes
// (space.ErrAgentExists).
//
// Delivery: Send and Request return once the broker has confirmed the
// message; a Request to an id no queue is bound for fails at once with
// agency.ErrNoRecipient. A message is acknowledged once its agent takes
// it (starts handling it), and Config.Prefetch bounds what an agent holds
// that it has not taken: a slow agent's backlog waits in the broker.
//
// Faults: a lost connection is rebuilt with backoff, and the exchange,
// queues, bindings and consumers declared again. While the space is
// disconnected, Send, Request and Add fail at once with ErrDisconnected.
//
// Wire input that is not a valid message is answered with an "[error]"
// message of type invalid_args where a sender can be identified, or
// dropped with a log line; the agent serves on.
//
// docs/amqp.md in the repository is the guide.
package amqpspace
