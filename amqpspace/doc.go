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
// message (ErrUnconfirmed when that is unknown); a Request to an id no
// queue is bound for fails at once with agency.ErrNoRecipient, and a Send
// to one is reported to the sender's ErrorHandler (the broker returns the
// mandatory message). A message with a deadline expires in the broker when
// the deadline passes. Messages are transient in transient classic
// queues, or persistent in quorum queues with Config.Durable. A message is acknowledged once its agent takes it
// (starts handling it), and Config.Prefetch bounds what an agent holds
// that it has not taken: a slow agent's backlog waits in the broker.
// Config.MaxPendingBytes bounds the same in bytes across all the agents of
// the space.
//
// Faults: a lost connection is rebuilt with backoff, the exchange declared
// again and the agents' queues consumed again (declared and bound afresh
// where they have gone). While the space is
// disconnected, Send, Request and Add fail at once with ErrDisconnected,
// and so do the Requests that were waiting for a response. Config.URLs
// names the nodes of a RabbitMQ cluster: the space connects to one, and to
// another when it loses it.
//
// Wire input that is not a valid message is answered with an "[error]"
// message of type invalid_args, of at most 4 KiB, where a sender can be
// identified (never for a broadcast or an answer), or dropped with a log
// line; the agent serves on.
//
// Interop: messages go out as text/plain in UTF-8, which is what agents of
// operand/agency, the Python library, can receive. With Config.Interop set
// to InteropOperandAgency (AMQP_INTEROP=operand-agency) the space writes
// operand/agency's message shape and reads both, so Go and Python agents
// share one exchange; docs/interop.md in the repository tells what differs.
//
// A process joins a space by creating one on the same broker and exchange,
// and adds its agents; they reach the agents of every other process there:
//
//	sp, err := amqpspace.NewFromEnv(ctx) // AMQP_URL, or RabbitMQ on localhost
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer sp.Close(context.Background())
//	if err := sp.Add(ctx, calc); err != nil {
//		log.Fatal(err)
//	}
//
// docs/amqp.md in the repository is the guide.
package amqpspace
