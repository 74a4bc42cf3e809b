package host

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ShellArgs are the arguments of shell_command.
type ShellArgs struct {
	Command string `json:"command" validate:"min=1" jsonschema:"description=the command line to run with sh -c; pipes and redirections work"`
}

// ShellResult is what shell_command returns.
type ShellResult struct {
	Stdout    string `json:"stdout" jsonschema:"description=what the command wrote to standard output"`
	Stderr    string `json:"stderr" jsonschema:"description=what the command wrote to standard error"`
	ExitCode  int    `json:"exit_code" jsonschema:"description=the exit status: 0 for success; -1 if a signal ended the command"`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"description=true when stdout or stderr was longer than the limit and was cut"`
}

// waitDelay bounds how long a killed command's output may keep its pipes
// open, in case a process escaped its process group.
const waitDelay = 2 * time.Second

func (h *Agent) shellCommand(ctx context.Context, args ShellArgs) (ShellResult, error) {
	runCtx, cancel := context.WithTimeout(ctx, h.cfg.shellTimeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "sh", "-c", args.Command)
	cmd.Dir = h.cfg.root // "" is the working directory
	killGroup(cmd)
	cmd.WaitDelay = waitDelay
	stdout := &capped{max: h.cfg.maxBytes}
	stderr := &capped{max: h.cfg.maxBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr // stdin stays empty (the null device)

	err := cmd.Run()
	res := ShellResult{
		Stdout:    stdout.String(),
		Stderr:    stderr.String(),
		Truncated: stdout.cut || stderr.cut,
	}
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return ShellResult{}, fmt.Errorf("shell_command %q was stopped: %w", args.Command, ctx.Err())
	case runCtx.Err() != nil:
		return ShellResult{}, fmt.Errorf("shell_command %q did not finish within %v and was killed; run something shorter, or in the background with its output sent to a file",
			args.Command, h.cfg.shellTimeout)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
		// The command exited but left a process holding its output open.
	default:
		return ShellResult{}, fmt.Errorf("shell_command could not run sh: %w", err)
	}
	return res, nil
}

// capped keeps the first max bytes written to it and drops the rest, without
// failing the writer: a command must not die of a full buffer.
type capped struct {
	buf strings.Builder
	max int64
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - int64(c.buf.Len()); int64(len(p)) > room {
		c.buf.Write(p[:max(room, 0)])
		c.cut = true
	} else {
		c.buf.Write(p)
	}
	return len(p), nil
}

// String returns what was kept, as valid UTF-8 (a cut may split a character).
func (c *capped) String() string {
	return strings.ToValidUTF8(c.buf.String(), "\uFFFD")
}
