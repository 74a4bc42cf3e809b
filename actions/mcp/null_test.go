package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/seed72275b23/agency-go/agency"
)

// TestNullResults: an action that declares what it returns and returns
// null (a nil map, pointer or slice) gets a result, not an isError one,
// whose structured content is an object that its output schema accepts,
// the check an MCP client such as the TypeScript SDK makes.
func TestNullResults(t *testing.T) {
	nulls := agency.MustNewAgent("Nulls")
	agency.Handle(nulls, "counts", func(context.Context, struct{}) (map[string]int, error) { return nil, nil })
	agency.Handle(nulls, "where", func(context.Context, struct{}) (*Point, error) { return nil, nil })
	agency.Handle(nulls, "list", func(context.Context, struct{}) ([]int, error) { return nil, nil })
	agency.Handle(nulls, "full", func(context.Context, struct{}) ([]int, error) { return []int{1, 2}, nil })
	f := serve(t, nil, nulls)
	tools := f.tools(t)
	for name, want := range map[string]string{
		"Nulls.counts": `{}`,
		"Nulls.where":  `{"x":0,"y":0}`,
		"Nulls.list":   `{"result":null}`,
		"Nulls.full":   `{"result":[1,2]}`,
	} {
		r := f.call(t, name, nil)
		if r.IsError || r.StructuredContent == nil {
			t.Errorf("%s: isError %v, %q, structured %v", name, r.IsError, text(r), r.StructuredContent)
			continue
		}
		got := schemaJSON(r.StructuredContent)
		if got != want {
			t.Errorf("%s: structured content %s, want %s", name, got, want)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(schemaJSON(tools[name].OutputSchema)), &s); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema %s: %v", name, schemaJSON(tools[name].OutputSchema), err)
		}
		var v any
		_ = json.Unmarshal([]byte(got), &v)
		if err := rs.Validate(v); err != nil {
			t.Errorf("%s: structured content %s fails the output schema %s: %v", name, got, schemaJSON(tools[name].OutputSchema), err)
		}
	}
}
