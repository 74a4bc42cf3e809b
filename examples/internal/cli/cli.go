// Package cli is the command-line convention every example follows
// (docs/examples.md): flags parsed by the flag package, -h that prints the
// usage on stdout and exits 0, and one exit status per kind of end: 0 done,
// 1 failed while running, 2 bad usage (a flag unknown or malformed, flags
// that do not go together, a setting the program needs that is missing).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// The exit statuses.
const (
	StatusOK      = 0
	StatusFailure = 1
	StatusUsage   = 2
)

// ErrUsage is what a bad usage's error wraps: the program exits with
// StatusUsage.
var ErrUsage = errors.New("bad usage")

// usageError is a bad usage: err says what is wrong, and shown whether
// the program has printed it already.
type usageError struct {
	err   error
	shown bool
}

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Usagef returns a bad usage's error, which Exit prints.
func Usagef(format string, args ...any) error {
	return usageError{err: fmt.Errorf(format, args...)}
}

// Parse parses args with fs. On -h it prints summary and the flags on
// stdout and returns flag.ErrHelp; on a bad flag, it prints what is wrong
// and the flags on stderr and returns an error that wraps ErrUsage, which
// Exit does not print again.
func Parse(fs *flag.FlagSet, summary string, args []string, stdout, stderr io.Writer) error {
	fs.Init(fs.Name(), flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, on the right stream
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		printUsage(fs, summary, stdout)
		return flag.ErrHelp
	default: // the flag package has printed the error
		printUsage(fs, summary, stderr)
		return usageError{err: err, shown: true}
	}
}

func printUsage(fs *flag.FlagSet, summary string, w io.Writer) {
	fmt.Fprintf(w, "%s\n\nFlags:\n", strings.TrimRight(summary, "\n"))
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// NoModel prints on w how to give the program a model server (see
// ModelHelp) and returns the bad usage's error, which wraps
// openai.ErrNoEndpoint.
func NoModel(w io.Writer, command string) error {
	fmt.Fprint(w, ModelHelp(command))
	return usageError{err: openai.ErrNoEndpoint, shown: true}
}

// HasModel reports whether the environment names a model server:
// OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any other), either one.
func HasModel(env func(string) string) bool {
	return env("OPENAI_API_KEY") != "" || env("OPENAI_BASE_URL") != ""
}

// ModelHelp says how to give a program a model, for the example run with
// command (such as "go run ./examples/chat").
func ModelHelp(command string) string {
	return fmt.Sprintf(`This needs an OpenAI-compatible model server whose models call tools.

To try it with no key and no server, on a scripted model in this process:

    %[1]s -demo

For OpenAI, set your API key:

    OPENAI_API_KEY=sk-... %[1]s

For any other server (Ollama, vLLM, LM Studio), its base URL and a model:

    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 %[1]s

OPENAI_MODEL chooses the model (default gpt-4o-mini).
`, command)
}

// AMQPConfig is the broker's configuration from the environment
// (amqpspace.ConfigFromEnv: AMQP_URL, or AMQP_HOST, AMQP_PORT, …), with the
// exchange set when exchange is not empty. A bad variable is a bad usage.
func AMQPConfig(exchange string) (amqpspace.Config, error) {
	cfg, err := amqpspace.ConfigFromEnv()
	if err != nil {
		return cfg, usageError{err: err}
	}
	if exchange != "" {
		cfg.Exchange = exchange
	}
	return cfg, nil
}

// Status is the exit status for the error a program ended with.
func Status(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return StatusOK
	case errors.Is(err, ErrUsage):
		return StatusUsage
	default:
		return StatusFailure
	}
}

// Message is what a program named name prints on stderr for the error it
// ended with: nothing where it is already shown.
func Message(name string, err error) string {
	var shown usageError
	switch {
	case Status(err) == StatusOK:
		return ""
	case errors.As(err, &shown) && shown.shown:
		return ""
	default:
		return name + ": " + err.Error() + "\n"
	}
}

// Exit ends a program named name that ended with err: it prints the
// message, if any, on stderr and exits with the status.
func Exit(name string, err error) {
	fmt.Fprint(os.Stderr, Message(name, err))
	os.Exit(Status(err))
}
