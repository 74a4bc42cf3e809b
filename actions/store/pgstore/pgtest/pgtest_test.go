package pgtest

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

// url calls URL with r on a goroutine of its own, which Skip and Fatalf
// end, and returns what URL returned, if it did.
func (r *recorder) url() (got string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = URL(r)
	}()
	<-done
	return got
}

// Without DATABASE_URL, URL is PostgreSQL on localhost.
func TestURLDefault(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("CI", "")
	var notes []string
	defer func(f func(string, string)) { note = f }(note)
	note = func(what, msg string) { notes = append(notes, what+": "+msg) }

	r := &recorder{TB: t}
	got := r.url()
	if r.skipped != "" {
		// No PostgreSQL here: the skip says where it looked.
		if !strings.Contains(r.skipped, "no PostgreSQL at "+DefaultURL) {
			t.Errorf("URL skipped with %q, want it to name %s", r.skipped, DefaultURL)
		}
		return
	}
	if got != DefaultURL || len(notes) != 0 {
		t.Errorf("URL returned %q and noted %q, want %q and no note", got, notes, DefaultURL)
	}
}

// Without a database, URL skips with a message that names the URL with its
// password hidden and says how to run the tests, and notes it once where go
// test shows it; with CI=true it fails instead.
func TestURLWithoutDatabase(t *testing.T) {
	for _, dsn := range []string{
		"postgres://postgres:s3cret@127.0.0.1:1/test",
		"host=127.0.0.1 port=1 user=postgres password=s3cret dbname=test",
	} {
		t.Run(dsn[:8], func(t *testing.T) {
			t.Setenv("DATABASE_URL", dsn)
			t.Setenv("CI", "")
			var notes []string
			defer func(f func(string, string)) { note = f }(note)
			note = func(what, msg string) { notes = append(notes, what+": "+msg) }

			r := &recorder{TB: t}
			r.url()
			if strings.Contains(r.skipped, "\n") || !strings.Contains(r.skipped, "no PostgreSQL at ") || !strings.Contains(r.skipped, "127.0.0.1") || !strings.Contains(r.skipped, "point DATABASE_URL at one") {
				t.Errorf("URL skipped with %q, want one line with the URL and how to start a database", r.skipped)
			}
			if len(notes) != 1 || notes[0] != "skipping the tests that need PostgreSQL: "+r.skipped {
				t.Errorf("URL noted %q, want one note with the skip message", notes)
			}

			t.Setenv("CI", "true")
			r2 := &recorder{TB: t}
			r2.url()
			if !strings.Contains(r2.failed, "CI=true and no PostgreSQL at ") || r2.skipped != "" {
				t.Errorf("with CI=true, URL failed with %q and skipped with %q", r2.failed, r2.skipped)
			}
			for _, s := range append(notes, r.skipped, r2.failed) {
				if strings.Contains(s, "s3cret") {
					t.Errorf("the password shows: %q", s)
				}
			}
		})
	}
}
