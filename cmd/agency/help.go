package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed72275b23/agency-go/agency"
)

// newHelpCmd replaces cobra's help command: "agency help call" is the help
// of the command call, and "agency help Calculator" that of the agent
// Calculator, as it answers help.
func newHelpCmd(o *options, root *cobra.Command) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "help [COMMAND | AGENT]",
		Short: "Show the help of a command, or of an agent in the space",
		Long: `help COMMAND shows the help of one of these commands. help AGENT asks the
agent for its help and shows each action it offers you: what it does, its
arguments with their types and rules, what it returns and an example call.
A command's name wins over an agent's: for an agent named like a command,
use ` + "`agency call AGENT help`" + `, which prints the help as JSON.`,
		Example: `  agency help call
  agency help Calculator
  agency help Calculator --json`,
		Args:              argsUsage(cobra.MaximumNArgs(1)),
		ValidArgsFunction: completeAgentAction(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return root.Help()
			}
			if c, rest, err := root.Find(args); err == nil && c != root && len(rest) == 0 {
				return c.Help()
			}
			s, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer s.close()
			v, err := s.call(cmd.Context(), o, args[0], agency.HelpAction, nil)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(o.stdout, v)
			}
			return writeHelp(o.stdout, args[0], v)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the help as the agent sent it, as JSON")
	return cmd
}

// writeHelp writes the help value an agent answered, readably.
func writeHelp(w io.Writer, agent string, v json.RawMessage) error {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(v, &entries); err != nil {
		return printJSON(w, v) // not the usual shape: show it as it is
	}
	if len(entries) == 0 {
		fmt.Fprintf(w, "%s offers you no action.\n", agent)
		return nil
	}
	fmt.Fprintf(w, "%s offers you %d action(s):\n", agent, len(entries))
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		var h agency.ActionHelp
		if err := json.Unmarshal(entries[name], &h); err != nil {
			// An action with help of its own shape (CustomHelp).
			fmt.Fprintf(w, "\n%s\n", name)
			var buf bytes.Buffer
			_ = json.Indent(&buf, entries[name], "    ", "  ")
			fmt.Fprintf(w, "    %s\n", buf.String())
			continue
		}
		writeAction(w, agent, name, h)
	}
	return nil
}

// writeAction writes one action's help entry.
func writeAction(w io.Writer, agent, name string, h agency.ActionHelp) {
	params := schemaFields(h.Args)
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.name
	}
	fmt.Fprintf(w, "\n%s(%s)", name, strings.Join(names, ", "))
	if h.Access != "" && h.Access != "permitted" {
		fmt.Fprintf(w, "  [access: %s]", h.Access)
	}
	fmt.Fprintln(w)
	if h.Description != "" {
		fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(h.Description, "\n", "\n    "))
	}
	if len(params) > 0 {
		fmt.Fprintln(w, "    arguments:")
		width := 0
		for _, p := range params {
			width = max(width, len(p.name))
		}
		for _, p := range params {
			fmt.Fprintf(w, "      %-*s  %s\n", width, p.name, p.detail())
		}
	}
	if ret := schemaSummary(h.Returns); ret != "" {
		fmt.Fprintf(w, "    returns: %s\n", ret)
	}
	for k, text := range h.Errors {
		fmt.Fprintf(w, "    error %s: %s\n", k, text)
	}
	for _, ex := range h.Examples {
		if args, ok := exampleArgs(ex, name); ok {
			fmt.Fprintf(w, "    example: agency call %s %s '%s'\n", agent, name, args)
		}
	}
}

// field is one property of an arguments schema.
type field struct {
	name     string
	required bool
	schema   map[string]any
}

// detail describes f's type, rules and description.
func (f field) detail() string {
	parts := []string{schemaType(f.schema)}
	if f.required {
		parts = append(parts, "required")
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems", "format", "pattern"} {
		if v, ok := f.schema[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if enum, ok := f.schema["enum"].([]any); ok {
		vals := make([]string, len(enum))
		for i, v := range enum {
			b, _ := json.Marshal(v)
			vals[i] = string(b)
		}
		parts = append(parts, "one of "+strings.Join(vals, ", "))
	}
	text := strings.Join(parts, ", ")
	if d, ok := f.schema["description"].(string); ok && d != "" {
		text += ": " + d
	}
	return text
}

// schemaFields returns the properties of an object schema in the order the
// schema lists them.
func schemaFields(raw json.RawMessage) []field {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(raw, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	var props map[string]map[string]any
	if json.Unmarshal(s.Properties, &props) != nil {
		return nil
	}
	var fields []field
	for _, name := range objectKeys(s.Properties) {
		fields = append(fields, field{name: name, required: slices.Contains(s.Required, name), schema: props[name]})
	}
	return fields
}

// objectKeys returns the keys of a JSON object in their order.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

// schemaType names the type a schema describes.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		if t == "array" {
			if items, ok := s["items"].(map[string]any); ok {
				return "array of " + schemaType(items)
			}
		}
		return t
	case []any:
		names := make([]string, len(t))
		for i, v := range t {
			names[i] = fmt.Sprint(v)
		}
		return strings.Join(names, " or ")
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	return "any"
}

// schemaSummary describes a returns schema in a few words.
func schemaSummary(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s map[string]any
	if json.Unmarshal(raw, &s) != nil {
		return string(raw)
	}
	text := schemaType(s)
	if d, ok := s["description"].(string); ok && d != "" {
		text += ", " + d
	}
	return text
}

// exampleArgs returns the arguments of an example message of action name,
// compact.
func exampleArgs(ex json.RawMessage, name string) (string, bool) {
	var m struct {
		Action map[string]json.RawMessage `json:"action"`
	}
	if json.Unmarshal(ex, &m) != nil {
		return "", false
	}
	args, ok := m.Action[name]
	if !ok {
		return "", false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, args) != nil {
		return "", false
	}
	return buf.String(), true
}
