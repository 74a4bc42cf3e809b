package amqpspace

import (
	"errors"

	amqp "github.com/rabbitmq/amqp091-go"
)

// queueArgs are the arguments of an agent's queues. With Config.Durable
// they are quorum queues, replicated on the nodes of a cluster (durable,
// neither exclusive nor auto-deleted, as quorum queues must be); without
// it, classic transient queues, which a node that goes down takes with it,
// so that the agent can declare them again on another node. Either way
// they expire QueueExpiry after their last consumer has gone.
func (s *Space) queueArgs() (durable bool, args amqp.Table) {
	args = amqp.Table{"x-expires": s.cfg.QueueExpiry.Milliseconds()}
	if s.cfg.Durable {
		args["x-queue-type"] = "quorum"
		return true, args
	}
	return false, args
}

// declareQueue declares queue q of an agent (only checks it, when
// existing), and refuses it when it has a consumer: what consuming it
// exclusively would meet, closing the channel other agents consume on.
//
// A queue left from a process with the other Durable setting, or from a
// release that declared other queues, exists with another type or
// durability, and the broker refuses to declare it (PRECONDITION_FAILED).
// When it is empty and unused it is deleted and declared afresh; when it
// still holds messages it is used as it is, with a warning, until it
// expires or an operator deletes it: nothing queued is thrown away.
func (s *Space) declareQueue(sub *subscription, q string, existing bool) error {
	durable, args := s.queueArgs()
	// A quorum queue counts the consumers of a connection lost with its
	// node (suspected down) until that node is back: on a reconnect, the
	// agent's own consumer of before is among them, and refusing the queue
	// for it would keep the agent out for as long as the node is down. A
	// fresh Add still refuses a queue with consumers.
	ownGhost := existing && s.cfg.Durable
	check := func(got amqp.Queue, err error) error {
		if err != nil {
			return err
		}
		if got.Consumers > 0 && !ownGhost {
			return &amqp.Error{Code: amqp.AccessRefused, Reason: "the queue has a consumer"}
		}
		return nil
	}
	err := sub.op(func(ch *amqp.Channel) error {
		if existing {
			return check(ch.QueueDeclarePassive(q, durable, false, false, false, args))
		}
		return check(ch.QueueDeclare(q, durable, false, false, false, args))
	})
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.PreconditionFailed {
		return err
	}
	// The refusal closed the channel: the next op opens another.
	err = sub.op(func(ch *amqp.Channel) error {
		if _, err := ch.QueueDelete(q, true, true, false); err != nil {
			return err
		}
		return check(ch.QueueDeclare(q, durable, false, false, false, args))
	})
	if !errors.As(err, &ae) || ae.Code != amqp.PreconditionFailed {
		if err == nil {
			s.log.Info("amqpspace: replaced an empty queue of another type", "queue", q, "durable", s.cfg.Durable)
		}
		return err
	}
	s.log.Warn("amqpspace: a queue of another type holds messages; using it as it is until it expires or is deleted",
		"queue", q, "durable", s.cfg.Durable, "refusal", ae.Reason)
	return sub.op(func(ch *amqp.Channel) error {
		return check(ch.QueueDeclarePassive(q, durable, false, false, false, nil))
	})
}
