package agency_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// A raw action shows its schema in help unchanged, gets its arguments as
// JSON text, and refuses arguments that are not an object before it runs.
func TestRegisterRaw(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","x-foreign":true}},"required":["q"]}`)
	remote := agency.MustNewAgent("Remote")
	var got []string
	agency.HandleRaw(remote, "search", schema, func(_ context.Context, args json.RawMessage) (any, error) {
		got = append(got, string(args))
		return map[string]any{"echo": args}, nil
	}, agency.Describe("Searches elsewhere"), agency.Example(`{"q":"go"}`))
	user := agency.MustNewAgent("User")
	joinLocal(t, remote, user)
	ctx := callCtx(t)

	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Remote", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := help["search"]
	if string(h.Args) != string(schema) || h.Description != "Searches elsewhere" || h.Access != "permitted" {
		t.Fatalf("help = %+v, want the schema as given", h)
	}
	if len(h.Examples) != 1 || !strings.Contains(string(h.Examples[0]), `"search":{"q":"go"}`) {
		t.Fatalf("examples = %s", h.Examples)
	}

	v, err := agency.Call[map[string]json.RawMessage](ctx, user, "Remote", "search", map[string]any{"q": "go"})
	if err != nil || string(v["echo"]) != `{"q":"go"}` {
		t.Fatalf("call = %s, %v", v["echo"], err)
	}
	if _, err := agency.Call[any](ctx, user, "Remote", "search", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := agency.Call[any](ctx, user, "Remote", "search", json.RawMessage(`[1]`)); !errors.Is(err, agency.ErrMalformedMessage) {
		t.Fatalf("an array: %v, want it refused on send", err)
	}
	if len(got) != 2 || got[1] != "{}" {
		t.Fatalf("the handler got %q", got)
	}
}

func TestRegisterRawRefuses(t *testing.T) {
	h := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	a := agency.MustNewAgent("A")
	for name, err := range map[string]error{
		"not an object": agency.RegisterRaw(a, "x", json.RawMessage(`[]`), h),
		"reserved":      agency.RegisterRaw(a, "help", json.RawMessage(`{}`), h),
		"approve":       agency.RegisterRaw(a, "y", json.RawMessage(`{}`), h, agency.Approve(func(context.Context, struct{}) (bool, error) { return true, nil })),
		"requested":     agency.RegisterRaw(a, "z", json.RawMessage(`{}`), h, agency.WithAccess(agency.Requested)),
	} {
		if err == nil {
			t.Errorf("%s: registered", name)
		}
	}
	if err := agency.RegisterRaw(a, "ok", json.RawMessage(`{"type":"object"}`), h); err != nil {
		t.Fatal(err)
	}
	if err := agency.RegisterRaw(a, "ok", json.RawMessage(`{"type":"object"}`), h); err == nil {
		t.Fatal("registered twice")
	}
}
