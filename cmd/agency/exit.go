package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/seed72275b23/agency-go/agency"
)

// Exit codes: scripts branch on them (docs/cli.md lists them).
const (
	exitOK               = 0
	exitFailure          = 1 // anything else: no broker, bad configuration
	exitUsage            = 2 // a wrong flag, argument or JSON
	exitNotFound         = 3 // no such agent, or no such action
	exitInvalidArgs      = 4 // invalid_args
	exitPermissionDenied = 5 // permission_denied
	exitActionFailed     = 6 // action_failed
	exitTimeout          = 7 // no answer in time
)

// exitError is an error with the exit code it ends the command with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError is an error of the command line.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode returns the code err ends the command with.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, agency.ErrNoRecipient), errors.Is(err, agency.ErrNotFound):
		return exitNotFound
	case errors.Is(err, agency.ErrInvalidArgs):
		return exitInvalidArgs
	case errors.Is(err, agency.ErrPermissionDenied):
		return exitPermissionDenied
	case errors.Is(err, agency.ErrActionFailed):
		return exitActionFailed
	case errors.Is(err, agency.ErrTimeout):
		return exitTimeout
	}
	return exitFailure
}

// report writes err to w as the command's last word.
func report(w io.Writer, err error) {
	fmt.Fprintln(w, "agency:", err)
}
