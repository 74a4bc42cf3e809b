package main

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completeTimeout bounds the survey a completion makes: a shell waits for
// it.
const completeTimeout = 3 * time.Second

// completeAgentAction completes an agent's id, then one of its actions,
// from a survey of the space.
func completeAgentAction(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 1 || (cmd.Name() == "help" && len(args) > 0) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		quiet := *o
		quiet.stderr = io.Discard
		quiet.verbose = false
		quiet.timeout = completeTimeout
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		defer cancel()
		s, err := quiet.open(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		defer s.close()
		agents, err := s.survey(ctx, &quiet)
		if err != nil && len(agents) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		if len(args) == 0 {
			for _, id := range slices.Sorted(maps.Keys(agents)) {
				if strings.HasPrefix(id, toComplete) {
					out = append(out, id)
				}
			}
		} else {
			for _, name := range slices.Sorted(maps.Keys(agents[args[0]])) {
				if strings.HasPrefix(name, toComplete) {
					out = append(out, cobra.CompletionWithDesc(name, firstLine(agents[args[0]][name].Description)))
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
