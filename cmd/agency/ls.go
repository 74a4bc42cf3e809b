package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed72275b23/agency-go/agency"
)

func newLsCmd(o *options) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the agents in the space and their actions",
		Long: `ls asks every agent in the space for help and lists the agents and the
actions each offers, one action a line. With --json it prints the answers as
one JSON object, agent id to action name to help entry, for scripts.

On a broker no process knows who else is there: ls lists the agents that
answered until none has answered for a moment.`,
		Example: `  agency ls
  agency ls --json | jq 'keys'`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer s.close()
			agents, err := s.survey(cmd.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.Marshal(agents)
				if err != nil {
					return err
				}
				return printJSON(o.stdout, b)
			}
			if len(agents) == 0 {
				fmt.Fprintf(o.stderr, "no agent answered in %s\n", s.where)
				return nil
			}
			tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tACTION\tDESCRIPTION")
			for _, id := range slices.Sorted(maps.Keys(agents)) {
				actions := agents[id]
				if len(actions) == 0 {
					fmt.Fprintf(tw, "%s\t-\t(no action it offers you)\n", id)
				}
				for _, name := range slices.Sorted(maps.Keys(actions)) {
					h := actions[name]
					desc := firstLine(h.Description)
					if h.Access != "" && h.Access != "permitted" {
						desc += " [access: " + h.Access + "]"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", id, name, desc)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agents and their actions' help as JSON")
	return cmd
}

// survey lists the agents in the space but this command's, within
// o.timeout.
func (s *session) survey(ctx context.Context, o *options) (map[string]map[string]agency.ActionHelp, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	agents, err := agency.Survey(ctx, s.agent)
	if errors.Is(err, agency.ErrTimeout) && len(agents) > 0 {
		// Some answered: list them, and say that the list may be short.
		fmt.Fprintf(o.stderr, "agency: the survey took longer than --timeout %v; the list may lack agents\n", o.timeout)
		err = nil
	}
	if s.demo == nil {
		// Other agency commands on the exchange answer too; they are
		// not what a person looks for.
		for id := range agents {
			if strings.HasPrefix(id, cliPrefix) {
				delete(agents, id)
			}
		}
	}
	return agents, err
}

// firstLine returns the first line of text.
func firstLine(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	return line
}
