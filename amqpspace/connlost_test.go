package amqpspace

import (
	"errors"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// An operation that the connection's end cut short is a disconnection,
// which the session may not have noticed yet; other refusals are not.
func TestConnectionLost(t *testing.T) {
	for _, c := range []struct {
		err  error
		lost bool
	}{
		{amqp.ErrClosed, true},
		{fmt.Errorf("consuming: %w", &amqp.Error{Code: amqp.ConnectionForced, Reason: "CONNECTION_FORCED - closed by an operator", Server: true}), true},
		{&amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED", Server: true}, false},
		{&amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND", Server: true}, false},
		{errors.New("something else"), false},
	} {
		if got := connectionLost(c.err); got != c.lost {
			t.Errorf("connectionLost(%v) = %v, want %v", c.err, got, c.lost)
		}
	}
}
