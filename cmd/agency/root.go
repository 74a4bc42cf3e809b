package main

import (
	"context"
	"errors"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// options are the flags every command shares.
type options struct {
	amqpURL  string
	exchange string
	id       string
	demo     bool
	timeout  time.Duration
	verbose  bool

	stdin          io.Reader
	stdout, stderr io.Writer
}

// run runs the command line args and returns the process's exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	o := &options{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(o)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if isUnknownCommand(err) {
		err = &exitError{code: exitUsage, err: errors.New(err.Error() + "\nRun 'agency -h' for the commands.")}
	}
	report(stderr, err)
	return exitCode(err)
}

// isUnknownCommand tells cobra's error for a command it does not know, the
// one error of a bad command line that reaches run without going through
// our flag and argument checks (cobra gives it no type of its own).
func isUnknownCommand(err error) bool {
	var ee *exitError
	return !errors.As(err, &ee) && strings.HasPrefix(err.Error(), "unknown command ")
}

func newRoot(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:   "agency",
		Short: "See, call and watch a space of agents",
		Long: `agency looks at a space of agents from a shell and a browser: it lists the
agents and their actions, calls them, talks to LLM agents, tails the messages
on the exchange, and serves Studio, a web page of all of it.

The broker comes from the environment: AMQP_URL, or AMQP_HOST, AMQP_PORT,
AMQP_USERNAME, AMQP_PASSWORD and AMQP_VHOST (by default RabbitMQ on localhost
with guest/guest); AMQP_INTEROP=operand-agency for a space shared with Python
agents. --amqp-url and --exchange override it. With --demo every command runs
on a demo space in this process instead, no broker and no key needed: a
Calculator and its Owner, an Assistant, a support team (Triage hands over to
Refunds) and a plan coordinator, the LLM agents on a scripted model.

Data goes to stdout, diagnostics to stderr. Exit codes: 0 success, 1 failure
(no broker, bad configuration), 2 bad command line, 3 no such agent or
action, 4 invalid_args, 5 permission_denied, 6 action_failed, 7 timeout.`,
		Example: `  agency ls
  agency help Calculator
  agency call Calculator add '{"a":1,"b":2}'
  agency tail --json
  agency mcp
  agency --demo studio`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(o.stdout)
	root.SetErr(o.stderr)
	root.SetIn(o.stdin)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: errors.New(err.Error() + "\nRun '" + c.CommandPath() + " -h' for its flags.")}
	})

	pf := root.PersistentFlags()
	pf.StringVar(&o.amqpURL, "amqp-url", "", "the broker's URL, in place of AMQP_URL and its kin (amqp://user:password@host:port/vhost, or amqps://)")
	pf.StringVar(&o.exchange, "exchange", "", "the exchange of the space (default \"agency\")")
	pf.StringVar(&o.id, "id", "", "the id this command's agent joins the space with (default agency-cli.<random>)")
	pf.BoolVar(&o.demo, "demo", false, "run on a demo space in this process: no broker, no key")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for an answer")
	pf.BoolVarP(&o.verbose, "verbose", "v", false, "log connection events to stderr")

	root.AddCommand(
		newLsCmd(o),
		newCallCmd(o),
		newSayCmd(o),
		newTailCmd(o),
		newStudioCmd(o),
		newMCPCmd(o),
	)
	root.SetHelpCommand(newHelpCmd(o, root))
	return root
}

// argsUsage wraps a cobra.PositionalArgs so that its error is a usage
// error.
func argsUsage(f cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := f(cmd, args); err != nil {
			return &exitError{code: exitUsage, err: errors.New(err.Error() + "\nUsage: " + cmd.UseLine())}
		}
		return nil
	}
}
