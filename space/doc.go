// Package space holds the [Space] contract and [Local], the space whose
// agents live in one process. Package space/spacetest is the conformance
// suite every Space implementation passes; package amqpspace is a Space
// across processes, on RabbitMQ.
//
// A space routes messages between the agents added to it:
//
//	sp := space.NewLocal()
//	defer sp.Close(ctx)
//	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
//		log.Fatal(err)
//	}
//	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", AddArgs{A: 1, B: 2})
//
// Local hands a message to its recipients without encoding it, so a
// received message (and a value in it) must be treated as read-only. It
// knows its members: a Send to an id it does not have is reported to the
// sender's ErrorHandler at once, a Request fails with
// agency.ErrNoRecipient, and agency.Survey returns as soon as every agent
// has answered.
package space
