package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPDemoOverStdio starts `agency --demo mcp` as an MCP client would
// and lists and calls the demo's Calculator through it.
func TestMCPDemoOverStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(exe, "--demo", "mcp")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to agency --demo mcp: %v (stderr: %s)", err, stderr.String())
	}
	defer cs.Close()

	// The server surveys the space as it joins; the demo's agents are
	// there from the start.
	var names []string
	for range 50 {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names = names[:0]
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		if slices.Contains(names, "Calculator.add") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.Contains(names, "Calculator.add") {
		t.Fatalf("tools %v, want Calculator.add among them", names)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "Calculator.add", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("Calculator.add: %+v", res)
	}
	text, _ := res.Content[0].(*sdk.TextContent)
	if text == nil || strings.TrimSpace(text.Text) != "3" {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("Calculator.add {1, 2} gave %s, want 3", b)
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "Calculator.add", Arguments: map[string]any{"a": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	text, _ = res.Content[0].(*sdk.TextContent)
	if !res.IsError || text == nil || !strings.Contains(text.Text, "invalid_args") && !strings.Contains(text.Text, "number") {
		b, _ := json.Marshal(res)
		t.Fatalf("Calculator.add {a: x} gave %s, want an isError result that says what is wrong", b)
	}
}

func TestMCPRefusesHTTPBeyondLoopback(t *testing.T) {
	r := runAgency(t, "", "--demo", "mcp", "--http", "0.0.0.0:0")
	if r.code != exitUsage || !strings.Contains(r.stderr, "loopback") {
		t.Fatalf("agency mcp --http 0.0.0.0:0: exit %d, stderr %q; want %d and a word on loopback", r.code, r.stderr, exitUsage)
	}
}
