package main

import (
	"io"
	"testing"

	"github.com/seed72275b23/agency-go/examples/internal/cli/clitest"
)

func TestUsage(t *testing.T) {
	clitest.Usage(t, "a2a", func(args []string, stdout, stderr io.Writer) error {
		return run(t.Context(), args, stdout, stderr)
	})
}
