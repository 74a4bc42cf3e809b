// Package amqptest helps tests that need a RabbitMQ broker: it finds one,
// gives each test an exchange of its own, and skips the test with a message
// that says how to run it when no broker answers, unless CI=true, where a
// missing broker fails the test.
//
//	func TestWithBroker(t *testing.T) {
//		sp := amqptest.NewSpace(t, amqpspace.Config{})
//		// … add agents; the space closes and its exchange goes when t ends
//	}
//
// StartPython runs agents of operand/agency, the Python library, on an
// exchange, for tests of the two on one broker.
package amqptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

var (
	probeMu sync.Mutex
	probed  = map[string]error{} // broker URL → why it cannot be reached, nil when it can
)

// URL returns the broker's URL: AMQP_URL, or amqpspace.DefaultURL. When no
// broker answers there, it skips t, or fails it if CI is "true". The
// message names the URL without its password, and without -v (where go
// test shows no skip message) it also goes once per package where go test
// shows it, beside the package's "ok" line, so that a run of go test ./...
// does not pass silently without its AMQP tests.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = amqpspace.DefaultURL
	}
	err := probe(url)
	if err == nil {
		return url
	}
	shown := redact(url)
	if testenv.CI() {
		t.Fatalf("CI=true and no RabbitMQ at %s: %v", shown, err)
	}
	msg := fmt.Sprintf("no RabbitMQ at %s (%v): start one with `rabbitmq-server -detached`, or point AMQP_URL at one, to run the AMQP tests", shown, err)
	note("skipping the tests that need RabbitMQ", msg)
	t.Skip(msg)
	return url
}

// note tells of skipped tests where go test shows it; a variable, for this
// package's tests.
var note = testenv.Note

// probe dials url once per process and remembers the answer.
func probe(url string) error {
	probeMu.Lock()
	defer probeMu.Unlock()
	if err, ok := probed[url]; ok {
		return err
	}
	c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err == nil {
		_ = c.Close()
	} else {
		err = errors.New(scrub(err.Error(), url))
	}
	probed[url] = err
	return err
}

// redact returns a broker URL with its password replaced by "xxxxx", for
// test output and logs.
func redact(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// scrub removes the password of url from msg.
func scrub(msg, url string) string {
	if u, err := neturl.Parse(url); err == nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
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
