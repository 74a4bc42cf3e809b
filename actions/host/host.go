// Package host offers an agent that acts on the machine it runs on: it runs
// shell commands and reads, writes and lists files. Every one of its actions
// has requested access: each call waits for the approver given to [New],
// typically a human asked at a terminal, and with no approver every call is
// denied.
//
//	h, err := host.New("Host", host.Approver(ask), host.Root("/srv/work"))
//	...
//	err = sp.Add(ctx, h.Agent())
package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// The defaults of the options.
const (
	DefaultShellTimeout = 30 * time.Second
	DefaultMaxBytes     = 1 << 20
)

// Agent is the host agent: the actions shell_command, read_file, write_file
// and list_files, each behind requested access. Create one with [New] and
// add [Agent.Agent] to a space.
type Agent struct {
	agent *agency.Agent
	cfg   config
}

// Option configures the agent in [New]. Each option may be given once.
type Option func(*config) error

type config struct {
	approve      func(context.Context, *agency.Message) bool
	root         string // absolute, symbolic links resolved; "" for none
	rootAsGiven  string // absolute, as given: absolute paths may use either
	rootSet      bool
	shellTimeout time.Duration
	maxBytes     int64
}

// Approver sets the function that decides each call of the agent's actions.
// It receives the incoming message, whose Action names the action and whose
// Args hold the arguments as the caller sent them, not yet decoded or
// validated (in process, the caller's own Go value; encode it with
// json.Marshal to show it). It runs on the agent's goroutine, one call at a
// time, and may block for as long as a human needs; it should return false
// once ctx is done. A panic in it counts as a refusal.
//
// Without an approver every call is denied.
func Approver(f func(ctx context.Context, m *agency.Message) bool) Option {
	return func(c *config) error {
		if c.approve != nil {
			return fmt.Errorf("%w: host.Approver given twice", agency.ErrInvalidOption)
		}
		if f == nil {
			return fmt.Errorf("%w: host.Approver(nil)", agency.ErrInvalidOption)
		}
		c.approve = f
		return nil
	}
}

// Root confines the file actions to the directory dir, which must exist:
// their paths are relative to it (an absolute path must lie inside it), and
// a path that leaves it, through ".." or a symbolic link, is refused.
// Shell commands run in dir but are not confined to it: a shell can reach
// whatever the process can.
//
// Without Root, relative paths are relative to the process's working
// directory and any path is allowed.
func Root(dir string) Option {
	return func(c *config) error {
		if c.rootSet {
			return fmt.Errorf("%w: host.Root given twice", agency.ErrInvalidOption)
		}
		given, err := filepath.Abs(dir)
		abs := given
		if err == nil {
			abs, err = filepath.EvalSymlinks(given)
		}
		if err != nil {
			return fmt.Errorf("%w: host.Root(%q): %v", agency.ErrInvalidOption, dir, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return fmt.Errorf("%w: host.Root(%q): %v", agency.ErrInvalidOption, dir, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: host.Root(%q): not a directory", agency.ErrInvalidOption, dir)
		}
		c.root, c.rootAsGiven, c.rootSet = abs, given, true
		return nil
	}
}

// ShellTimeout sets how long a shell command may run before it is killed,
// with every process it started. The default is [DefaultShellTimeout].
func ShellTimeout(d time.Duration) Option {
	return func(c *config) error {
		if c.shellTimeout != 0 {
			return fmt.Errorf("%w: host.ShellTimeout given twice", agency.ErrInvalidOption)
		}
		if d <= 0 {
			return fmt.Errorf("%w: host.ShellTimeout(%v): must be positive", agency.ErrInvalidOption, d)
		}
		c.shellTimeout = d
		return nil
	}
}

// MaxBytes sets the size of the largest file read_file returns and how much
// of each of a shell command's stdout and stderr shell_command keeps. The
// default is [DefaultMaxBytes].
func MaxBytes(n int64) Option {
	return func(c *config) error {
		if c.maxBytes != 0 {
			return fmt.Errorf("%w: host.MaxBytes given twice", agency.ErrInvalidOption)
		}
		if n <= 0 {
			return fmt.Errorf("%w: host.MaxBytes(%d): must be positive", agency.ErrInvalidOption, n)
		}
		c.maxBytes = n
		return nil
	}
}

// New returns a host agent with the given id, not yet in a space.
func New(id string, opts ...Option) (*Agent, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil host.Option", agency.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.shellTimeout == 0 {
		c.shellTimeout = DefaultShellTimeout
	}
	if c.maxBytes == 0 {
		c.maxBytes = DefaultMaxBytes
	}
	h := &Agent{cfg: c}
	a, err := agency.NewAgent(id, agency.Hooks(h))
	if err != nil {
		return nil, err
	}
	h.agent = a
	if err := h.register(); err != nil {
		return nil, err
	}
	return h, nil
}

// Agent returns the agent to add to a space.
func (h *Agent) Agent() *agency.Agent { return h.agent }

// RequestPermission implements agency.PermissionRequester: it asks the
// approver, and refuses when there is none.
func (h *Agent) RequestPermission(ctx context.Context, m *agency.Message) bool {
	if h.cfg.approve == nil || ctx.Err() != nil {
		return false
	}
	return h.cfg.approve(ctx, m)
}

func (h *Agent) register() error {
	where := "the working directory"
	if h.cfg.root != "" {
		where = "the root directory " + h.cfg.root
	}
	paths := "Paths are relative to " + where + "."
	if h.cfg.root != "" {
		paths += " Paths outside it are refused."
	}
	return errors.Join(
		agency.Register(h.agent, "shell_command", h.shellCommand,
			agency.Describe(fmt.Sprintf("Runs a command line with sh -c in %s on the host machine and returns its output and exit status. "+
				"A non-zero exit status is a result, not an error. The command is killed after %v; its stdin is empty. "+
				"A human approves each call.", where, h.cfg.shellTimeout)),
			agency.Returns("the command's stdout, stderr and exit code"),
			agency.Errors(map[string]string{
				"action_failed": "the command did not finish in time, or sh could not be started",
			}),
			agency.Example(ShellArgs{Command: "ls -la"}),
			agency.AccessForAll(agency.Requested)),
		agency.Register(h.agent, "read_file", h.readFile,
			agency.Describe(fmt.Sprintf("Reads a UTF-8 text file on the host machine and returns its content. %s "+
				"Files larger than %d bytes are refused. A human approves each call.", paths, h.cfg.maxBytes)),
			agency.Returns("the file's content"),
			agency.Errors(map[string]string{
				"action_failed": "the file does not exist, is a directory, is too large, is not UTF-8 text, or lies outside the root",
			}),
			agency.Example(ReadArgs{Path: "notes.txt"}),
			agency.AccessForAll(agency.Requested)),
		agency.Register(h.agent, "write_file", h.writeFile,
			agency.Describe("Writes text to a file on the host machine, replacing the file if it exists and creating it and any missing parent directories if not. "+
				paths+" A human approves each call."),
			agency.Returns("what was written where"),
			agency.Errors(map[string]string{
				"action_failed": "the file cannot be written, or lies outside the root",
			}),
			agency.Example(WriteArgs{Path: "notes/today.txt", Content: "buy milk\n"}),
			agency.AccessForAll(agency.Requested)),
		agency.Register(h.agent, "list_files", h.listFiles,
			agency.Describe("Lists the entries of a directory on the host machine, sorted by name, without descending into subdirectories. "+
				paths+" A human approves each call."),
			agency.Returns("the directory's entries"),
			agency.Errors(map[string]string{
				"action_failed": "the directory does not exist, is not a directory, or lies outside the root",
			}),
			agency.Example(ListArgs{Path: "."}),
			agency.AccessForAll(agency.Requested)),
	)
}
