package amqpspace_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The tests talk to a real broker: AMQP_URL, or RabbitMQ on localhost.
// Without one they skip, except under CI=true, where a missing broker is a
// failure (package amqptest).
var (
	brokerURL    = amqptest.URL
	randomName   = amqptest.Name
	testExchange = amqptest.Exchange
	newSpace     = amqptest.NewSpace
)
