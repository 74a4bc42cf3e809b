package main

import (
	"io"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/examples/internal/cli/clitest"
)

func TestUsage(t *testing.T) {
	clitest.Usage(t, "chat", func(args []string, stdout, stderr io.Writer) error {
		return run(t.Context(), args, func(string) string { return "" }, strings.NewReader(""), stdout, stderr)
	})
}
