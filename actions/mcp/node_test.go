package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/internal/testenv"
	"github.com/seed72275b23/agency-go/space"
)

// nodeBin returns the path of an installed MCP package's command in
// testdata/node_modules. Without Node or the packages, the test fails
// under CI=true and skips otherwise.
func nodeBin(t *testing.T, name string) string {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join("testdata", "node_modules", ".bin", name))
	_, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Node.js and the MCP test packages are needed (npm ci --prefix actions/mcp/testdata): %v", err)
		}
		const msg = "needs Node.js and the MCP test packages: npm ci --prefix actions/mcp/testdata"
		testenv.Note("MCP TypeScript packages", msg)
		t.Skip(msg)
	}
	return bin
}

// joinNode joins the MCP server the command starts as agent Server.
func joinNode(t *testing.T, command string, args ...string) (context.Context, *mcp.Client, *agency.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	c, err := mcp.NewClient(ctx, "Server", mcp.Command(nil, command, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sp := space.NewLocal()
	t.Cleanup(func() { sp.Close(context.Background()) })
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{c.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, c, user
}

// callJSON calls Server.action and returns the value as JSON text.
func callJSON(t *testing.T, ctx context.Context, user *agency.Agent, action string, args any) string {
	t.Helper()
	v, err := agency.Call[json.RawMessage](ctx, user, "Server", action, args)
	if err != nil {
		t.Fatalf("Server.%s(%v): %v", action, args, err)
	}
	return string(v)
}

// TestEverythingServer joins @modelcontextprotocol/server-everything and
// calls its tools, one for each shape of schema it offers.
func TestEverythingServer(t *testing.T) {
	t.Parallel()
	ctx, _, user := joinNode(t, nodeBin(t, "mcp-server-everything"))
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Server", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The schemas pass through as the server gave them.
	if args := string(help["get-sum"].Args); !strings.Contains(args, `"required":["a","b"]`) || !strings.Contains(args, "draft-07") {
		t.Fatalf("get-sum's args: %s", args)
	}
	if ret := string(help["get-structured-content"].Returns); !strings.Contains(ret, "temperature") {
		t.Fatalf("get-structured-content's returns: %s", ret)
	}

	cases := []struct {
		action string
		args   any
		want   string
	}{
		{"echo", map[string]any{"message": "hi"}, "hi"},                                                      // a required string
		{"get-sum", map[string]any{"a": 2, "b": 3}, "5"},                                                     // numbers
		{"get-env", map[string]any{}, "PATH"},                                                                // no arguments
		{"get-tiny-image", nil, `"type":"image"`},                                                            // image content
		{"get-annotated-message", map[string]any{"messageType": "success", "includeImage": true}, `"image"`}, // an enum and a boolean
		{"get-resource-links", map[string]any{"count": 2}, `"resource_link"`},                                // a number with bounds
		{"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 1}, `"resource"`},    // enums with defaults
		{"get-structured-content", map[string]any{"location": "Chicago"}, `"temperature"`},                   // an output schema
		{"gzip-file-as-resource", map[string]any{"name": "a.gz", "data": "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte("hello")), "outputType": "resource"}, `"resource"`}, // format uri, an enum
		{"trigger-long-running-operation", map[string]any{"duration": 0.2, "steps": 2}, "completed"},                                                                                              // progress on its side
	}
	for _, c := range cases {
		if got := callJSON(t, ctx, user, c.action, c.args); !strings.Contains(got, c.want) {
			t.Errorf("Server.%s: %.300s does not contain %s", c.action, got, c.want)
		}
	}
	// Validated here, by the schema the server gave: a number where a
	// string is due, a value outside an enum, a number out of bounds.
	for _, bad := range []struct {
		action string
		args   any
	}{
		{"echo", map[string]any{"message": 3}},
		{"get-annotated-message", map[string]any{"messageType": "loud"}},
		{"get-resource-links", map[string]any{"count": 50}},
		{"get-sum", map[string]any{"a": 1}},
	} {
		_, err := agency.Call[any](ctx, user, "Server", bad.action, bad.args)
		if !errors.Is(err, agency.ErrInvalidArgs) {
			t.Errorf("Server.%s(%v): %v, want invalid_args", bad.action, bad.args, err)
		}
	}
	if _, err := agency.Call[any](ctx, user, "Server", "no-such-tool", nil); !errors.Is(err, agency.ErrNotFound) {
		t.Errorf("an unknown tool: %v", err)
	}
}

// TestFilesystemServer joins @modelcontextprotocol/server-filesystem on a
// directory of its own and calls its tools: strings, arrays of strings,
// arrays of objects, enums, booleans and optional numbers.
func TestFilesystemServer(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, _, user := joinNode(t, nodeBin(t, "mcp-server-filesystem"), dir)
	p := func(name string) string { return filepath.Join(dir, name) }
	cases := []struct {
		action string
		args   any
		want   string
	}{
		{"list_allowed_directories", nil, dir},
		{"read_text_file", map[string]any{"path": p("a.txt"), "head": 2}, `one\ntwo`},
		{"read_multiple_files", map[string]any{"paths": []string{p("a.txt")}}, "three"},
		{"write_file", map[string]any{"path": p("b.txt"), "content": "bee"}, "b.txt"},
		{"edit_file", map[string]any{"path": p("b.txt"), "edits": []map[string]string{{"oldText": "bee", "newText": "wasp"}}, "dryRun": false}, "wasp"},
		{"create_directory", map[string]any{"path": p("sub")}, "sub"},
		{"move_file", map[string]any{"source": p("b.txt"), "destination": p("sub/c.txt")}, "c.txt"},
		{"list_directory", map[string]any{"path": dir}, "[DIR] sub"},
		{"list_directory_with_sizes", map[string]any{"path": dir, "sortBy": "size"}, "a.txt"},
		{"directory_tree", map[string]any{"path": dir, "excludePatterns": []string{"*.md"}}, "c.txt"},
		{"search_files", map[string]any{"path": dir, "pattern": "**/*.txt"}, "c.txt"},
		{"get_file_info", map[string]any{"path": p("a.txt")}, "size"},
	}
	for _, c := range cases {
		if got := callJSON(t, ctx, user, c.action, c.args); !strings.Contains(got, c.want) {
			t.Errorf("Server.%s: %.300s does not contain %s", c.action, got, c.want)
		}
	}
	if b, _ := os.ReadFile(p("sub/c.txt")); string(b) != "wasp" {
		t.Errorf("sub/c.txt holds %q", b)
	}
	// The server's own refusal is an action error with its text.
	_, err = agency.Call[any](ctx, user, "Server", "read_text_file", map[string]any{"path": "/etc/passwd"})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "denied") {
		t.Errorf("a path outside the directory: %v", err)
	}
	_, err = agency.Call[any](ctx, user, "Server", "list_directory_with_sizes", map[string]any{"path": dir, "sortBy": "colour"})
	if !errors.Is(err, agency.ErrInvalidArgs) {
		t.Errorf("sortBy outside its enum: %v", err)
	}
}
