package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed72275b23/agency-go/agency"
)

// sayArgs are the arguments of the action say of LLM and human agents.
type sayArgs struct {
	Content string `json:"content"`
}

func newSayCmd(o *options) *cobra.Command {
	var conversation string
	cmd := &cobra.Command{
		Use:   "say AGENT TEXT",
		Short: "Say something to an LLM or human agent and print its answer",
		Long: `say sends TEXT (- reads it from stdin) to AGENT's action say, as LLM agents
(actions/openai) and people (actions/human) offer it, and prints the answer
as it comes: it asks for the answer's parts, which an LLM agent sends as
its model writes them; an agent that sends none is printed when it answers.
Errors end it as call's do, with the same exit codes.

Each say is a conversation of its own, unless --conversation names one: an
agent keeps the history of a conversation for the agent that started it, so
with --conversation the command joins with an id made from the conversation's
(agency-cli.conv-<hash>, unless --id gives one), and a later say with the
same --conversation continues it. Ids on a broker are not authenticated:
anyone on the broker who says with the same --conversation continues, and
reads, that conversation. It is for one person's own use; the broker's users
and permissions are what keep others out.`,
		Example: `  agency say Assistant 'What is 2 + 3?'
  agency say Assistant --conversation trip 'Plan a day in Lyon'
  agency say Assistant --conversation trip 'And the next day?'`,
		Args:              argsUsage(cobra.ExactArgs(2)),
		ValidArgsFunction: completeAgentAction(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := args[1]
			if text == "-" {
				b, err := io.ReadAll(o.stdin)
				if err != nil {
					return err
				}
				text = strings.TrimSpace(string(b))
			}
			if text == "" {
				return usageError("nothing to say: give a text, or - to read it from stdin")
			}
			if conversation != "" && o.id == "" {
				sum := sha256.Sum256([]byte(conversation))
				o.id = cliPrefix + "conv-" + hex.EncodeToString(sum[:4])
			}
			s, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer s.close()
			m := &agency.Message{To: args[0], Action: "say", Args: sayArgs{Content: text}}
			if conversation != "" {
				m.Meta = map[string]any{"conversation": conversation}
			}
			return s.say(cmd.Context(), o, m)
		},
	}
	cmd.Flags().StringVar(&conversation, "conversation", "", "the conversation to continue (its id)")
	return cmd
}

// say sends m, a say, asking for the parts of its answer, and prints each
// text part as it comes; the answer, once whole, ends the line. An agent
// that sends no parts (a person, a Python agent) is printed when it
// answers, as call prints.
func (s *session) say(ctx context.Context, o *options, m *agency.Message) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	agent, action := m.To, m.Action
	shown := false // whether parts were printed, on a line not yet ended
	for r, err := range s.agent.StreamMessage(ctx, m) {
		if err != nil {
			if shown {
				fmt.Fprintln(o.stdout)
			}
			return s.explain(err, agent, action, o)
		}
		v, err := agency.Value[json.RawMessage](r)
		if err != nil {
			return err
		}
		var text string
		isText := json.Unmarshal(v, &text) == nil
		if r.Action == agency.PartAction {
			if isText {
				if _, err := io.WriteString(o.stdout, text); err != nil {
					return err
				}
				shown = true
			}
			continue
		}
		switch {
		case shown: // the answer is what its parts showed
			_, err = fmt.Fprintln(o.stdout)
		case isText:
			_, err = fmt.Fprintln(o.stdout, text)
		default:
			err = printJSON(o.stdout, v)
		}
		return err
	}
	return nil
}
