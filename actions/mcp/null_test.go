package mcp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
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

// TestNullResultsTypeScript: the official TypeScript client, which checks
// structured content against the output schema, takes the null results.
func TestNullResultsTypeScript(t *testing.T) {
	t.Parallel()
	nodeBin(t, "mcp-server-everything") // skips without Node and the packages
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nulls := agency.MustNewAgent("Nulls")
	agency.Handle(nulls, "counts", func(context.Context, struct{}) (map[string]int, error) { return nil, nil })
	agency.Handle(nulls, "where", func(context.Context, struct{}) (*Point, error) { return nil, nil })
	agency.Handle(nulls, "list", func(context.Context, struct{}) ([]int, error) { return nil, nil })
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	srv, err := mcp.NewServer("Bridge", mcp.Rediscover(0, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{nulls, srv.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	out, err := exec.CommandContext(ctx, "node", filepath.Join("testdata", "calls.mjs"), hs.URL, "Nulls.counts", "Nulls.where", "Nulls.list").Output()
	if err != nil {
		t.Fatalf("calls.mjs: %v", err)
	}
	var got map[string]struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Thrown            string          `json:"thrown"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("calls.mjs printed %q", out)
	}
	for _, name := range []string{"Nulls.counts", "Nulls.where", "Nulls.list"} {
		if r := got[name]; r.IsError || r.Thrown != "" || r.StructuredContent == nil {
			t.Errorf("%s as the TypeScript client got it: isError %v, thrown %q, structured %s", name, r.IsError, r.Thrown, r.StructuredContent)
		}
	}
}
