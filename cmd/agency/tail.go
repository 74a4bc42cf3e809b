package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newTailCmd(o *options) *cobra.Command {
	var f filter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print every message on the exchange as it passes",
		Long: `tail prints every message that passes on the exchange, one line each, until
it is interrupted: who sent what to whom, the answers with the time they took,
and the errors.

It reads through a queue of its own, exclusive and deleted when tail ends:
the agents get their messages as before, and tail never takes one. Once its
queue is bound it prints "tailing exchange NAME" on stderr, so that a script
knows when to start.

With --json each line is the message as it travelled, the JSON object with
"to", "from" and "action" (and its "__meta__"). --agent keeps the messages to
or from one agent; --action keeps the requests of one action and their answers.

Its queue is bound only with the ids of agents, never with '#', so a request
to an id no agent has still fails at once. It binds the broadcasts, the agency
commands (agency-cli.*), the agents that answer a survey when it starts and
every 5 seconds after, and the sender of every message it sees. Not shown: a
message to an agent that joined since the last survey and has sent nothing
yet; a message to no one (its sender is told); the surveys of agency commands.

With --demo it tails the demo space while a scripted user calls its agents.`,
		Example: `  agency tail
  agency tail --agent Calculator --action add
  agency tail --json | jq -c 'select(.to == "Calculator")'`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer s.close()
			tl := newTimeline()
			ready := func() {
				if s.demo != nil {
					fmt.Fprintln(o.stderr, "tailing the demo space (Ctrl-C stops)")
					go s.demo.play(cmd.Context(), s.agent, o.stderr)
					return
				}
				fmt.Fprintf(o.stderr, "tailing exchange %s\n", s.exchange)
			}
			return s.watch(cmd.Context(), ready, func(at time.Time, body []byte) {
				ev := tl.event(at, body)
				if !f.match(ev) {
					return
				}
				if asJSON {
					fmt.Fprintf(o.stdout, "%s\n", ev.Wire)
				} else {
					fmt.Fprintln(o.stdout, ev.line())
				}
			})
		},
	}
	cmd.Flags().StringVar(&f.agent, "agent", "", "only the messages to or from this agent")
	cmd.Flags().StringVar(&f.action, "action", "", "only the requests of this action, and their answers")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each message as it travelled, as one JSON object a line")
	return cmd
}
