package agency_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// echoJSON returns its arguments, refusing any without "x".
func echoJSON(_ context.Context, args json.RawMessage) (any, error) {
	var v map[string]any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, err
	}
	if _, ok := v["x"]; !ok {
		return nil, agency.InvalidArgsf("x is required")
	}
	return v, nil
}

func joinJSON(t *testing.T, agents ...*agency.Agent) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	sp := space.NewLocal()
	t.Cleanup(func() { sp.Close(context.Background()) })
	for _, a := range agents {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	return ctx
}

func TestRegisterJSON(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}`)
	a := agency.MustNewAgent("Tools")
	if err := agency.RegisterJSON(a, "echo", schema, echoJSON, agency.Describe("echoes"),
		agency.ReturnsSchema(json.RawMessage(`{"type":"object"}`)), agency.Returns("the arguments")); err != nil {
		t.Fatal(err)
	}
	if err := agency.RegisterJSON(a, "echo", schema, echoJSON); err == nil {
		t.Fatal("a second echo was registered")
	}
	if err := agency.RegisterJSON(a, "bad", json.RawMessage(`[]`), echoJSON); err == nil {
		t.Fatal("a schema that is not an object was taken")
	}
	user := agency.MustNewAgent("User")
	ctx := joinJSON(t, a, user)

	got, err := agency.Call[map[string]float64](ctx, user, "Tools", "echo", map[string]any{"x": 2})
	if err != nil || got["x"] != 2 {
		t.Fatalf("echo = %v, %v", got, err)
	}
	_, err = agency.Call[any](ctx, user, "Tools", "echo", map[string]any{"y": 2})
	if !errors.Is(err, agency.ErrInvalidArgs) || !strings.Contains(err.Error(), "x is required") {
		t.Fatalf("echo without x: %v", err)
	}
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Tools", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := help["echo"]
	if string(h.Args) != string(schema) || h.Description != "echoes" || h.Access != "permitted" ||
		string(h.Returns) != `{"description":"the arguments","type":"object"}` {
		t.Fatalf("help = %+v (args %s, returns %s)", h, h.Args, h.Returns)
	}
	if err := agency.RegisterJSON(a, "late", schema, echoJSON); err == nil {
		t.Fatal("an action was registered on an agent in a space without ChangingActions")
	}
}

func TestChangingActions(t *testing.T) {
	a := agency.MustNewAgent("Bridge", agency.ChangingActions())
	agency.Handle(a, "fixed", func(context.Context, struct{}) (string, error) { return "fixed", nil })
	user := agency.MustNewAgent("User")
	ctx := joinJSON(t, a, user)

	schema := json.RawMessage(`{"type":"object"}`)
	if err := agency.RegisterJSON(a, "fixed", schema, echoJSON); err == nil {
		t.Fatal("RegisterJSON took the name of an action registered with Register")
	}
	if err := agency.RegisterJSON(a, "echo", schema, echoJSON); err != nil {
		t.Fatal(err)
	}
	if got, err := agency.Call[map[string]any](ctx, user, "Bridge", "echo", map[string]any{"x": "a"}); err != nil || got["x"] != "a" {
		t.Fatalf("echo = %v, %v", got, err)
	}
	// Replaced: the next call finds the new handler, help the new schema.
	schema2 := json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)
	if err := agency.RegisterJSON(a, "echo", schema2, func(context.Context, json.RawMessage) (any, error) { return "v2", nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := agency.Call[string](ctx, user, "Bridge", "echo", nil); err != nil || got != "v2" {
		t.Fatalf("echo after replace = %v, %v", got, err)
	}
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Bridge", "help", nil)
	if err != nil || string(help["echo"].Args) != string(schema2) || len(help) != 2 {
		t.Fatalf("help = %v, %v", help, err)
	}
	if names := a.ActionNames(); strings.Join(names, ",") != "echo,fixed" {
		t.Fatalf("ActionNames = %v", names)
	}
	if err := agency.Unregister(a, "echo"); err != nil {
		t.Fatal(err)
	}
	if err := agency.Unregister(a, "echo"); !errors.Is(err, agency.ErrNotFound) {
		t.Fatalf("second Unregister: %v", err)
	}
	if _, err := agency.Call[any](ctx, user, "Bridge", "echo", nil); !errors.Is(err, agency.ErrNotFound) {
		t.Fatalf("echo after Unregister: %v", err)
	}
	help, err = agency.Call[map[string]agency.ActionHelp](ctx, user, "Bridge", "help", nil)
	if _, ok := help["echo"]; err != nil || ok {
		t.Fatalf("help after Unregister = %v, %v", help, err)
	}
	if err := agency.Unregister(user, "x"); err == nil {
		t.Fatal("Unregister on an agent without ChangingActions")
	}
}

func TestRegisterJSONApprove(t *testing.T) {
	a := agency.MustNewAgent("Guarded", agency.ChangingActions())
	user := agency.MustNewAgent("User")
	ctx := joinJSON(t, a, user)
	err := agency.RegisterJSON(a, "op", json.RawMessage(`{"type":"object"}`), echoJSON,
		agency.Approve(func(_ context.Context, args json.RawMessage) (bool, error) {
			return strings.Contains(string(args), "yes"), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agency.Call[any](ctx, user, "Guarded", "op", map[string]any{"x": "yes"}); err != nil {
		t.Fatal(err)
	}
	if _, err := agency.Call[any](ctx, user, "Guarded", "op", map[string]any{"x": "no"}); !errors.Is(err, agency.ErrPermissionDenied) {
		t.Fatalf("refused call: %v", err)
	}
	help, _ := agency.Call[map[string]agency.ActionHelp](ctx, user, "Guarded", "help", nil)
	if help["op"].Access != "requested" {
		t.Fatalf("access = %q", help["op"].Access)
	}
	if err := agency.RegisterJSON(a, "nobody", json.RawMessage(`{"type":"object"}`), echoJSON, agency.AccessForAll(agency.Requested)); err == nil {
		t.Fatal("a requested action with nothing to approve it was registered")
	}
}
