package amqpspace_test

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/internal/testenv"
	"github.com/seed72275b23/agency-go/space"
)

func TestMain(m *testing.M) {
	// The slow tests wait, on the broker, on Python and Go processes and
	// on deadlines, and each has an exchange of its own: four at a time.
	testenv.WaitingTests(4)
	goleak.VerifyTestMain(testenv.RemovingPrograms(m))
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

// wait bounds every wait of these tests: a safety net, not a measure.
const wait = 10 * time.Second

// addAll adds the agents to sp, failing the test if one cannot join.
func addAll(t testing.TB, sp space.Space, agents ...*agency.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, a := range agents {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatalf("Add(%s): %v", a.ID(), err)
		}
	}
}

// echoArgs are the arguments of echo.
type echoArgs struct {
	Text string `json:"text"`
}

// newEcho returns an agent whose echo action answers its text.
func newEcho() *agency.Agent {
	a := agency.MustNewAgent(randomName("Echo"))
	agency.Handle(a, "echo", func(_ context.Context, args echoArgs) (string, error) {
		return args.Text, nil
	})
	return a
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// counter counts calls, safely from any goroutine.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// newAdder returns an agent whose add action sums its arguments and counts
// its calls in c.
func newAdder(prefix string, c *counter) *agency.Agent {
	a := agency.MustNewAgent(randomName(prefix))
	agency.Handle(a, "add", func(_ context.Context, args addArgs) (int, error) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
		return args.A + args.B, nil
	})
	return a
}

// bareChannel returns a channel of a plain amqp091-go connection to the
// broker, closed when the test ends: a client outside any space.
func bareChannel(t *testing.T) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
