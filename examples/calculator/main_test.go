package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
)

const helpHeader = "User received help from Calculator:\n"

// TestRun runs the program and checks what it prints: the help the User
// received, the sum, the invalid_args text, and the permission flow in order.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	text := out.String()
	t.Logf("output:\n%s", text)

	help := parseHelp(t, text)
	checkAddHelp(t, help["add"])
	if got := help["clear"].Access; got != "requested" {
		t.Errorf("clear access = %q, want requested", got)
	}
	if _, ok := help["approve"]; ok {
		t.Error("help from Calculator lists the Owner's approve")
	}

	// After the help, these lines in this order and no others.
	_, rest, _ := strings.Cut(text, "\n}\n")
	want := []string{
		"User: add(1, 2) = 3",
		`User: add with b missing: invalid_args: invalid arguments for "Calculator.add": b: missing required field (send "help" for the argument schema)`,
		`Owner: User asks to run Calculator.clear {"reason":"new day"}: approved`,
		"User: cleared: new day",
		`Owner: User asks to run Calculator.clear {"reason":"once more"}: refused`,
		`User: clear again: permission_denied: "Calculator.clear" not permitted for "User"`,
	}
	got := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("after the help, got lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// parseHelp decodes the help JSON the program printed.
func parseHelp(t *testing.T, text string) map[string]agency.ActionHelp {
	t.Helper()
	start := strings.Index(text, helpHeader)
	end := strings.Index(text, "\n}\n")
	if start < 0 || end < 0 {
		t.Fatalf("no help in the output")
	}
	var help map[string]agency.ActionHelp
	if err := json.Unmarshal([]byte(text[start+len(helpHeader):end+2]), &help); err != nil {
		t.Fatalf("help does not decode: %v", err)
	}
	names := slices.Sorted(maps.Keys(help))
	if !slices.Equal(names, []string{"add", "clear"}) {
		t.Errorf("help lists %v, want [add clear]", names)
	}
	return help
}

// checkAddHelp checks the parts of add's help an LLM relies on to call it.
func checkAddHelp(t *testing.T, h agency.ActionHelp) {
	t.Helper()
	if h.Description != "Adds two numbers" || h.Access != "permitted" {
		t.Errorf("add: description %q, access %q", h.Description, h.Access)
	}
	var args struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
	}
	if err := json.Unmarshal(h.Args, &args); err != nil {
		t.Fatalf("add args schema: %v", err)
	}
	if args.Type != "object" || !slices.Equal(args.Required, []string{"a", "b"}) ||
		args.AdditionalProperties == nil || *args.AdditionalProperties {
		t.Errorf("add args schema = %s", h.Args)
	}
	for name, desc := range map[string]string{"a": "first addend", "b": "second addend"} {
		p := args.Properties[name]
		if p.Type != "number" || p.Description != desc {
			t.Errorf("add args %q = %+v, want a number described %q", name, p, desc)
		}
	}
	var returns struct{ Type, Description string }
	if err := json.Unmarshal(h.Returns, &returns); err != nil || returns.Type != "number" || returns.Description != "the sum" {
		t.Errorf("add returns = %s (%v)", h.Returns, err)
	}
	if len(h.Examples) != 1 {
		t.Fatalf("add examples = %d, want 1", len(h.Examples))
	}
	var ex struct {
		To     string                     `json:"to"`
		Action map[string]json.RawMessage `json:"action"`
	}
	if err := json.Unmarshal(h.Examples[0], &ex); err != nil || ex.To != "Calculator" {
		t.Fatalf("add example = %s (%v)", h.Examples[0], err)
	}
	var exArgs AddArgs
	if err := json.Unmarshal(ex.Action["add"], &exArgs); err != nil || exArgs != (AddArgs{A: 1, B: 2}) {
		t.Errorf("add example args = %s (%v)", ex.Action["add"], err)
	}
}

// TestAddIsPlain calls the action without a space: handlers stay plain.
func TestAddIsPlain(t *testing.T) {
	var c Calculator
	if got, err := c.Add(context.Background(), AddArgs{A: 1, B: 2}); got != 3 || err != nil {
		t.Errorf("Add(1, 2) = %v, %v", got, err)
	}
}
