package planhttp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// openAPI is the served document, with a small JSON Schema checker for
// the subset it uses.
type openAPI struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]map[string]any `json:"schemas"`
	} `json:"components"`
	raw map[string]any
}

func loadOpenAPI(t *testing.T, f *fixture) *openAPI {
	t.Helper()
	resp, data := f.request("GET", "/openapi.json", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d", resp.StatusCode)
	}
	var d openAPI
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &d.raw); err != nil {
		t.Fatal(err)
	}
	return &d
}

func (d *openAPI) response(t *testing.T, path, method, code string) map[string]any {
	t.Helper()
	var op struct {
		Responses map[string]struct {
			Content map[string]struct {
				Schema map[string]any `json:"schema"`
			} `json:"content"`
		} `json:"responses"`
	}
	raw, ok := d.Paths[path][method]
	if !ok {
		t.Fatalf("the document has no %s %s", method, path)
	}
	if err := json.Unmarshal(raw, &op); err != nil {
		t.Fatal(err)
	}
	s := op.Responses[code].Content["application/json"].Schema
	if s == nil {
		t.Fatalf("the document has no %s answer of %s %s", code, method, path)
	}
	return s
}

// validate checks v against schema and returns what is wrong.
func (d *openAPI) validate(schema map[string]any, v any, at string) []string {
	if r, ok := schema["$ref"].(string); ok {
		return d.validate(d.Components.Schemas[strings.TrimPrefix(r, "#/components/schemas/")], v, at)
	}
	var errs []string
	if all, ok := schema["allOf"].([]any); ok {
		for _, s := range all {
			errs = append(errs, d.validate(s.(map[string]any), v, at)...)
		}
	}
	if one, ok := schema["oneOf"].([]any); ok {
		n := 0
		for _, s := range one {
			if len(d.validate(s.(map[string]any), v, at)) == 0 {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Sprintf("%s: matches %d of oneOf", at, n))
		}
	}
	if c, ok := schema["const"]; ok && v != c {
		errs = append(errs, fmt.Sprintf("%s: %v, want %v", at, v, c))
	}
	if e, ok := schema["enum"].([]any); ok && !slices.Contains(e, v) {
		errs = append(errs, fmt.Sprintf("%s: %v not in %v", at, v, e))
	}
	if ty, ok := schema["type"]; ok {
		var types []any
		if s, ok := ty.(string); ok {
			types = []any{s}
		} else {
			types = ty.([]any)
		}
		if !slices.ContainsFunc(types, func(t any) bool { return isType(t.(string), v) }) {
			errs = append(errs, fmt.Sprintf("%s: %v is not %v", at, v, types))
			return errs
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, r := range asList(schema["required"]) {
			if _, ok := x[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: no field %s", at, r))
			}
		}
		if props, ok := schema["properties"].(map[string]any); ok {
			for k, s := range props {
				if fv, ok := x[k]; ok {
					errs = append(errs, d.validate(s.(map[string]any), fv, at+"."+k)...)
				}
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range x {
				errs = append(errs, d.validate(items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func isType(t string, v any) bool {
	switch t {
	case "null":
		return v == nil
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == float64(int64(n))
	case "number":
		_, ok := v.(float64)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	}
	return false
}

// The document and the handler list the same routes; every POST names its
// body's schema, and every answer code the handler gives is documented
// (TestShapes checks the 200 answers against their schemas).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	f := newFixture(t, nil, script()...)
	d := loadOpenAPI(t, f)
	documented := map[string]bool{}
	for p, ops := range d.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	var served []string
	for _, r := range apiRoutes("{plan_id}") {
		p := strings.Replace(r.path, "/agent_messages/s1", "/agent_messages/{session_id}", 1)
		served = append(served, r.method+" "+p)
		if !documented[r.method+" "+p] {
			t.Errorf("%s %s is not in the document", r.method, p)
		}
	}
	for k := range documented {
		if !slices.Contains(served, k) {
			t.Errorf("the document has %s, which the handler does not serve", k)
		}
		method, path, _ := strings.Cut(k, " ")
		probe := strings.NewReplacer("{plan_id}", "p", "{session_id}", "s").Replace(path)
		resp, _ := f.request("OPTIONS", probe, "", nil)
		if !strings.Contains(resp.Header.Get("Allow"), method) {
			t.Errorf("OPTIONS %s: Allow %q lacks %s", probe, resp.Header.Get("Allow"), method)
		}
	}
	// Error answers match the Error schema of the document.
	resp, data := f.request("GET", "/plans?session_id=none", "", u1)
	var v any
	_ = json.Unmarshal(data, &v)
	if errs := d.validate(d.response(t, "/plans", "get", "404"), v, "$"); resp.StatusCode != 404 || len(errs) > 0 {
		t.Errorf("404: %d %v", resp.StatusCode, errs)
	}
	resp, data = f.request("POST", "/input_task", `{}`, u1)
	_ = json.Unmarshal(data, &v)
	if errs := d.validate(d.response(t, "/input_task", "post", "422"), v, "$"); resp.StatusCode != 422 || len(errs) > 0 {
		t.Errorf("422: %d %v", resp.StatusCode, errs)
	}
}
