package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/seed72275b23/agency-go/agency"
)

func newCallCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "call AGENT ACTION [JSON]",
		Short: "Call an action and print its result as JSON",
		Long: `call sends ACTION to AGENT with the arguments JSON (an object; {} when left
out; - reads it from stdin), waits for the answer and prints its value as
JSON on stdout.

An error answer prints its text on stderr, which says what was wrong and how
to call correctly, and exits with a code of its kind: 3 no such agent or
action, 4 invalid_args, 5 permission_denied, 6 action_failed, 7 no answer
within --timeout.`,
		Example: `  agency call Calculator add '{"a":1,"b":2}'
  echo '{"a":1,"b":2}' | agency call Calculator add -
  agency call Calculator help`,
		Args:              argsUsage(cobra.RangeArgs(2, 3)),
		ValidArgsFunction: completeAgentAction(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := "{}"
			if len(args) == 3 {
				raw = args[2]
			}
			if raw == "-" {
				b, err := io.ReadAll(o.stdin)
				if err != nil {
					return err
				}
				raw = string(b)
			}
			params, err := argsObject(raw)
			if err != nil {
				return err
			}
			s, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer s.close()
			v, err := s.call(cmd.Context(), o, args[0], args[1], params)
			if err != nil {
				return err
			}
			return printJSON(o.stdout, v)
		},
	}
}

// argsObject checks that raw is one JSON object.
func argsObject(raw string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, usageError("the arguments are not JSON (%v): give an object, such as '{\"a\":1,\"b\":2}'", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, usageError("the arguments are %s, not a JSON object: give an object, such as '{\"a\":1,\"b\":2}'", raw)
	}
	if dec.More() {
		return nil, usageError("the arguments hold more than one JSON value: give one object")
	}
	return json.RawMessage(raw), nil
}

// call requests action of agent within o.timeout and returns the value of
// its answer, with errors that say what to do.
func (s *session) call(ctx context.Context, o *options, agent, action string, args any) (json.RawMessage, error) {
	return s.request(ctx, o, &agency.Message{To: agent, Action: action, Args: args})
}

// request is call with the whole message in the caller's hands.
func (s *session) request(ctx context.Context, o *options, m *agency.Message) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	agent, action := m.To, m.Action
	m, err := s.agent.RequestMessage(ctx, m)
	if err != nil {
		return nil, s.explain(err, agent, action, o)
	}
	v, err := agency.Value[json.RawMessage](m)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// explain adds to an error of a request what the person at the shell can
// do about it.
func (s *session) explain(err error, agent, action string, o *options) error {
	var ae *agency.ActionError
	switch {
	case errors.Is(err, agency.ErrNoRecipient):
		return fmt.Errorf("no agent %q in %s: `agency ls` lists the agents there: %w", agent, s.where, err)
	case errors.Is(err, agency.ErrTimeout):
		return fmt.Errorf("%s.%s: no answer within %v (set --timeout to wait longer): %w", agent, action, o.timeout, err)
	case errors.As(err, &ae):
		if ae.Type == agency.TypeNotFound {
			return fmt.Errorf("%s.%s: %w\n`agency help %s` lists its actions", agent, action, err, agent)
		}
		return fmt.Errorf("%s.%s: %w", agent, action, err)
	}
	return err
}

// printJSON writes v, a JSON text, indented, to w.
func printJSON(w io.Writer, v json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, v, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
