// Package amqptest helps tests that need a RabbitMQ broker: it finds one,
// gives each test an exchange of its own, and skips the test with a message
// that says how to run it when no broker answers, unless CI=true, where a
// missing broker fails the test.
//
//	func TestWithBroker(t *testing.T) {
//		sp := amqptest.NewSpace(t, amqpspace.Config{})
//		// … add agents; the space closes and its exchange goes when t ends
//	}
package amqptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/amqpspace"
)

var (
	probeOnce sync.Once
	probeErr  error
)

// URL returns the broker's URL: AMQP_URL, or amqpspace.DefaultURL. When no
// broker answers there, it skips t, or fails it if CI is "true".
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = amqpspace.DefaultURL
	}
	probeOnce.Do(func() {
		c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
		if err != nil {
			probeErr = err
			return
		}
		_ = c.Close()
	})
	if probeErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no RabbitMQ at %s: %v", url, probeErr)
		}
		t.Skipf("no RabbitMQ at %s (%v): start one with `rabbitmq-server -detached`, or point AMQP_URL at one, to run the AMQP tests", url, probeErr)
	}
	return url
}

// Name returns prefix, a dash and a random suffix: ids and names that runs
// sharing a broker do not share.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Exchange returns a fresh exchange name, deleted when t ends, so that
// tests sharing the broker never see each other's messages.
func Exchange(t testing.TB) string {
	t.Helper()
	url := URL(t)
	name := Name("agency-test")
	t.Cleanup(func() {
		c, err := amqp.Dial(url)
		if err != nil {
			return // the broker is gone; nothing to clean
		}
		defer c.Close()
		if ch, err := c.Channel(); err == nil {
			_ = ch.ExchangeDelete(name, false, false)
		}
	})
	return name
}

// NewSpace returns a space on the broker, on an exchange of its own unless
// cfg names one, and closes it when t ends.
func NewSpace(t testing.TB, cfg amqpspace.Config) *amqpspace.Space {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = URL(t)
	}
	if cfg.Exchange == "" {
		cfg.Exchange = Exchange(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := amqpspace.New(ctx, cfg)
	if err != nil {
		t.Fatalf("amqpspace.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("closing the space: %v", err)
		}
	})
	return s
}
