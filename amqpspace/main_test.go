package amqpspace_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/amqpspace"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The tests talk to a real broker: AMQP_URL, or RabbitMQ on localhost.
// Without one they skip, except under CI=true, where a missing broker is a
// failure.
var (
	brokerOnce sync.Once
	brokerErr  error
)

func brokerURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = amqpspace.DefaultURL
	}
	brokerOnce.Do(func() {
		c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
		if err != nil {
			brokerErr = err
			return
		}
		_ = c.Close()
	})
	if brokerErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no RabbitMQ at %s: %v", url, brokerErr)
		}
		t.Skipf("no RabbitMQ at %s (%v): start one with `rabbitmq-server -detached`, or point AMQP_URL at one, to run the AMQP tests", url, brokerErr)
	}
	return url
}

// randomName returns prefix and a random suffix.
func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// testExchange returns a fresh exchange name, deleted when the test ends,
// so that tests sharing the broker never see each other's messages.
func testExchange(t testing.TB) string {
	t.Helper()
	url := brokerURL(t)
	name := randomName("agency-test")
	t.Cleanup(func() {
		c, err := amqp.Dial(url)
		if err != nil {
			return
		}
		defer c.Close()
		if ch, err := c.Channel(); err == nil {
			_ = ch.ExchangeDelete(name, false, false)
		}
	})
	return name
}

// newSpace returns a space on its own exchange, closed when the test ends.
func newSpace(t testing.TB, cfg amqpspace.Config) *amqpspace.Space {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = brokerURL(t)
	}
	if cfg.Exchange == "" {
		cfg.Exchange = testExchange(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := amqpspace.New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}
