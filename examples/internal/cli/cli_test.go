package cli

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

func TestParse(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("ex", flag.ExitOnError) // Parse makes it ContinueOnError
		fs.Bool("amqp", false, "run on RabbitMQ")
		return fs
	}
	var stdout, stderr bytes.Buffer
	err := Parse(newFS(), "Usage: ex [flags]\n", []string{"-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) || Status(err) != StatusOK || Message("ex", err) != "" {
		t.Errorf("-h: %v, status %d, message %q", err, Status(err), Message("ex", err))
	}
	if !strings.HasPrefix(stdout.String(), "Usage: ex [flags]\n\nFlags:\n") || !strings.Contains(stdout.String(), "-amqp") || stderr.Len() != 0 {
		t.Errorf("-h printed %q on stdout and %q on stderr", stdout.String(), stderr.String())
	}

	stdout.Reset()
	err = Parse(newFS(), "Usage: ex [flags]\n", []string{"-nosuch"}, &stdout, &stderr)
	if !errors.Is(err, ErrUsage) || Status(err) != StatusUsage || Message("ex", err) != "" {
		t.Errorf("-nosuch: %v, status %d, message %q", err, Status(err), Message("ex", err))
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "flag provided but not defined: -nosuch") || !strings.Contains(stderr.String(), "-amqp") {
		t.Errorf("-nosuch printed %q on stdout and %q on stderr", stdout.String(), stderr.String())
	}
}

func TestStatus(t *testing.T) {
	var help bytes.Buffer
	for _, c := range []struct {
		err     error
		status  int
		message string
	}{
		{nil, StatusOK, ""},
		{Usagef("-only needs -amqp"), StatusUsage, "ex: -only needs -amqp\n"},
		{NoModel(&help, "go run ./examples/ex"), StatusUsage, ""},
		{errors.New("cannot reach RabbitMQ"), StatusFailure, "ex: cannot reach RabbitMQ\n"},
	} {
		if got := Status(c.err); got != c.status {
			t.Errorf("Status(%v) = %d, want %d", c.err, got, c.status)
		}
		if got := Message("ex", c.err); got != c.message {
			t.Errorf("Message(%v) = %q, want %q", c.err, got, c.message)
		}
	}
	if !errors.Is(NoModel(&help, "x"), openai.ErrNoEndpoint) || !strings.Contains(help.String(), "OPENAI_API_KEY=sk-... go run ./examples/ex") || !strings.Contains(help.String(), "go run ./examples/ex -demo") {
		t.Errorf("NoModel printed %q", help.String())
	}
}

// Every example, built and run as a user runs it: -h prints its usage on
// stdout and exits 0; an unknown flag exits 2. (Each example's TestUsage
// checks the same in process; this checks main's exit too, and builds the
// four, so it is one of the long tests.)
func TestExamplesFollowTheConvention(t *testing.T) {
	testenv.Long(t)
	dir := t.TempDir()
	names := []string{"calculator", "chat", "plans", "support"}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "github.com/seed72275b23/agency-go/examples/"+n)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, n := range names {
		run := func(arg string) (int, string, string) {
			cmd := exec.Command(filepath.Join(dir, n), arg)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "OPENAI_API_KEY=", "OPENAI_BASE_URL=")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatalf("%s %s: %v", n, arg, err)
			}
			return code, stdout.String(), stderr.String()
		}
		code, stdout, stderr := run("-h")
		if code != StatusOK || !strings.Contains(stdout, "go run ./examples/"+n) || !strings.Contains(stdout, "Flags:") || stderr != "" {
			t.Errorf("%s -h: exit %d\nstdout:\n%s\nstderr:\n%s", n, code, stdout, stderr)
		}
		code, stdout, stderr = run("-nosuch")
		if code != StatusUsage || !strings.Contains(stderr, "flag provided but not defined: -nosuch") || stdout != "" {
			t.Errorf("%s -nosuch: exit %d\nstdout:\n%s\nstderr:\n%s", n, code, stdout, stderr)
		}
	}
}
