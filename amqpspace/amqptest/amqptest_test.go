package amqptest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what URL skips or fails with.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

// Skip and Fatalf end the goroutine, as testing.T's do.
func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls URL with r on a goroutine of its own, which Skip and Fatalf end.
func (r *recorder) run() *recorder {
	done := make(chan struct{})
	go func() {
		defer close(done)
		URL(r)
	}()
	<-done
	return r
}

// Without a broker, URL skips with a message that names the URL with its
// password hidden and says how to run the tests, and notes it once where go
// test shows it (internal/testenv writes the note once per package); with
// CI=true it fails instead.
func TestURLWithoutBroker(t *testing.T) {
	t.Setenv("AMQP_URL", "amqp://guest:s3cret@127.0.0.1:1/")
	t.Setenv("CI", "")
	var notes []string
	defer func(f func(string, string)) { note = f }(note)
	note = func(what, msg string) { notes = append(notes, what+": "+msg) }

	r := (&recorder{TB: t}).run()
	if !strings.Contains(r.skipped, "no RabbitMQ at amqp://guest:xxxxx@127.0.0.1:1/") || !strings.Contains(r.skipped, "rabbitmq-server -detached") {
		t.Errorf("URL skipped with %q, want the redacted URL and how to start a broker", r.skipped)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "skipping the tests that need RabbitMQ: "+r.skipped) {
		t.Errorf("URL noted %q, want one note with the skip message", notes)
	}
	for _, s := range append(notes, r.skipped) {
		if strings.Contains(s, "s3cret") {
			t.Errorf("the password shows: %q", s)
		}
	}

	t.Setenv("CI", "true")
	r = (&recorder{TB: t}).run()
	if !strings.Contains(r.failed, "CI=true and no RabbitMQ at amqp://guest:xxxxx@127.0.0.1:1/") || r.skipped != "" {
		t.Errorf("with CI=true, URL failed with %q and skipped with %q", r.failed, r.skipped)
	}
}
