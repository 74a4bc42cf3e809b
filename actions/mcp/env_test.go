package mcp_test

import (
	"os"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// TestCommandEnvironment: a server started with mcp.Command gets a few
// variables of this process (PATH, HOME, …) and those given, not its
// secrets.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-not-for-third-parties")
	t.Setenv("AMQP_URL", "amqp://guest:secret@127.0.0.1:5672/")
	t.Setenv("HOME", "/home/tester")
	ctx, _, user := joinTestServer(t)
	getenv := func(name string) string {
		t.Helper()
		v, err := agency.Call[string](ctx, user, "Tools", "getenv", map[string]any{"name": name})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, secret := range []string{"OPENAI_API_KEY", "AMQP_URL"} {
		if v := getenv(secret); v != "(unset)" {
			t.Errorf("the MCP server got %s=%q", secret, v)
		}
	}
	if v := getenv("MCP_TEST_SERVER"); v != "1" {
		t.Errorf("the variable given: %q", v)
	}
	if v := getenv("HOME"); v != "/home/tester" {
		t.Errorf("HOME: %q", v)
	}
	if v := getenv("PATH"); v != os.Getenv("PATH") {
		t.Errorf("PATH: %q", v)
	}
}
