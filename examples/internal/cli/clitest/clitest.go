// Package clitest checks that an example follows the command-line
// convention of package cli, in the test's own process.
package clitest

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/examples/internal/cli"
)

// Usage checks that run, the example named name run with args, prints its
// usage on stdout and ends with exit status 0 for -h, and prints what is
// wrong and its usage on stderr and ends with exit status 2 for an unknown
// flag, printing nothing more at the exit.
func Usage(t *testing.T, name string, run func(args []string, stdout, stderr io.Writer) error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run([]string{"-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) || cli.Status(err) != cli.StatusOK || cli.Message(name, err) != "" ||
		!strings.HasPrefix(stdout.String(), "Usage: go run ./examples/"+name) || !strings.Contains(stdout.String(), "\nFlags:\n") || stderr.Len() != 0 {
		t.Errorf("-h: %v, exit status %d\nstdout:\n%s\nstderr:\n%s", err, cli.Status(err), stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	err = run([]string{"-nosuch"}, &stdout, &stderr)
	if cli.Status(err) != cli.StatusUsage || cli.Message(name, err) != "" ||
		!strings.Contains(stderr.String(), "flag provided but not defined: -nosuch") || !strings.Contains(stderr.String(), "Usage: go run ./examples/"+name) || stdout.Len() != 0 {
		t.Errorf("-nosuch: %v, exit status %d\nstdout:\n%s\nstderr:\n%s", err, cli.Status(err), stdout.String(), stderr.String())
	}
}
