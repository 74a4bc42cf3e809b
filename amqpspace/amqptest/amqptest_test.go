package amqptest

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

type buffer struct{ bytes.Buffer }

func (*buffer) Close() error { return nil }

// Without a broker, URL skips with the URL's password hidden, and without
// -v tells the terminal once, however many tests skip.
func TestURLWithoutBroker(t *testing.T) {
	t.Setenv("AMQP_URL", "amqp://guest:s3cret@127.0.0.1:1/")
	t.Setenv("CI", "")
	var tty buffer
	verbose = func() bool { return false }
	terminal = func() (io.WriteCloser, error) { return &tty, nil }

	for range 3 {
		var skipped bool
		t.Run("needs a broker", func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			URL(t)
			t.Error("URL returned without a broker")
		})
		if !skipped {
			t.Fatal("the test was not skipped")
		}
	}
	note := tty.String()
	if strings.Count(note, "\n") != 1 || !strings.Contains(note, "skipping the tests that need RabbitMQ: no RabbitMQ at amqp://guest:xxxxx@127.0.0.1:1/") {
		t.Errorf("the terminal got %q, want one line naming the redacted URL", note)
	}
	if strings.Contains(note, "s3cret") {
		t.Errorf("the note shows the password: %q", note)
	}
}
