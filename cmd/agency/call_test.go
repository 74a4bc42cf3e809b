package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// ls lists the agents of the exchange with their actions, as a table and
// as JSON.
func TestLs(t *testing.T) {
	t.Parallel()
	url, exchange, calc := calcSpace(t)

	r := runAgency(t, url, "--exchange", exchange, "ls")
	if r.code != 0 {
		t.Fatalf("ls exited %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"AGENT", calc + "  add     Adds two numbers", calc + "  divide"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ls printed\n%s\nwithout %q", r.stdout, want)
		}
	}

	r = runAgency(t, url, "--exchange", exchange, "ls", "--json")
	if r.code != 0 {
		t.Fatalf("ls --json exited %d: %s", r.code, r.stderr)
	}
	var agents map[string]map[string]struct {
		Description string          `json:"description"`
		Args        json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &agents); err != nil {
		t.Fatalf("ls --json printed %q: %v", r.stdout, err)
	}
	if got := agents[calc]["add"].Description; got != "Adds two numbers" {
		t.Errorf("ls --json: %s.add has description %q", calc, got)
	}
	if len(agents) != 1 {
		t.Errorf("ls --json lists %d agents, want the one calculator: %s", len(agents), r.stdout)
	}
}

// help shows an agent's actions readably, with an example call.
func TestHelpAgent(t *testing.T) {
	url, exchange, calc := calcSpace(t)
	r := runAgency(t, url, "--exchange", exchange, "help", calc)
	if r.code != 0 {
		t.Fatalf("help exited %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"add(a, b)",
		"a  number, required: first addend",
		"returns: number, the sum",
		"example: agency call " + calc + ` add '{"a":1,"b":2}'`,
		"divide(a, b)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help printed\n%s\nwithout %q", r.stdout, want)
		}
	}
	// A command's help, through the same command.
	r = runAgency(t, "", "help", "call")
	if r.code != 0 || !strings.Contains(r.stdout, "agency call AGENT ACTION [JSON]") {
		t.Errorf("help call: exit %d, printed %q", r.code, r.stdout)
	}
}

// call prints the value on stdout and exits 0, or the error's teachable
// text on stderr and a code of its kind.
func TestCall(t *testing.T) {
	t.Parallel()
	url, exchange, calc := calcSpace(t)
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   string
		inStderr []string
	}{
		{"value", []string{calc, "add", `{"a":1,"b":2}`}, 0, "3\n", nil},
		{"invalid_args", []string{calc, "add", `{"a":"x"}`}, exitInvalidArgs, "",
			[]string{"invalid_args", "a: must be a number, not string", "b: missing required field"}},
		{"permission_denied", []string{calc, "reset"}, exitPermissionDenied, "", []string{"permission_denied"}},
		{"action_failed", []string{calc, "divide", `{"a":1,"b":0}`}, exitActionFailed, "",
			[]string{"action_failed", "division by zero: give a b other than 0"}},
		{"no such action", []string{calc, "multiply", `{}`}, exitNotFound, "",
			[]string{"not_found", "agency help " + calc}},
		{"no such agent", []string{"Nobody-here", "add", `{}`}, exitNotFound, "",
			[]string{`no agent "Nobody-here"`, "agency ls"}},
		{"timeout", []string{"--timeout", "500ms", calc, "sleep"}, exitTimeout, "",
			[]string{"no answer within 500ms", "--timeout"}},
		{"not an object", []string{calc, "add", `[1,2]`}, exitUsage, "", []string{"not a JSON object"}},
		{"too many args", []string{calc, "add", `{}`, "more"}, exitUsage, "", []string{"Usage: agency call"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAgency(t, url, append([]string{"--exchange", exchange, "call"}, tc.args...)...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", r.code, tc.code, r.stderr)
			}
			if r.stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, tc.stdout)
			}
			for _, want := range tc.inStderr {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr %q lacks %q", r.stderr, want)
				}
			}
		})
	}
}

// A misspelt exchange is an error that says so, and leaves nothing on the
// broker; no broker at all is one that says how to get one.
func TestNoSpace(t *testing.T) {
	url, _, _ := calcSpace(t)
	r := runAgency(t, url, "--exchange", "agency-test-no-such-exchange", "ls")
	if r.code != exitFailure || !strings.Contains(r.stderr, `has no exchange "agency-test-no-such-exchange"`) {
		t.Errorf("ls on a missing exchange: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runAgency(t, "amqp://guest:secret@127.0.0.1:1/", "ls")
	if r.code != exitFailure || !strings.Contains(r.stderr, "cannot reach RabbitMQ") || strings.Contains(r.stderr, "secret") {
		t.Errorf("ls without a broker: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Every command has help, and -h exits 0; so does completion.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"ls", "-h"}, {"call", "-h"}, {"help", "-h"},
		{"say", "-h"}, {"tail", "-h"}, {"studio", "-h"}, {"help"},
		{"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"},
	} {
		r := runAgency(t, "", args...)
		if r.code != 0 || r.stdout == "" {
			t.Errorf("agency %s: exit %d, stdout %d bytes, stderr %q", strings.Join(args, " "), r.code, len(r.stdout), r.stderr)
		}
	}
	for _, args := range [][]string{{"nope"}, {"ls", "--nope"}, {"call", "A"}} {
		r := runAgency(t, "", args...)
		if r.code != exitUsage {
			t.Errorf("agency %s: exit %d, want %d; stderr %q", strings.Join(args, " "), r.code, exitUsage, r.stderr)
		}
	}
}
