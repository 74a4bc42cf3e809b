package agency_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// helpFor asks target for help as asker and returns each entry decoded as
// generic JSON. With action set, it asks for that action only.
func helpFor(t *testing.T, asker *agency.Agent, target, action string) map[string]map[string]any {
	t.Helper()
	var args any
	if action != "" {
		args = agency.HelpArgs{ActionName: action}
	}
	entries, err := agency.Call[map[string]json.RawMessage](callCtx(t), asker, target, agency.HelpAction, args)
	if err != nil {
		t.Fatalf("help from %q as %q: %v", target, asker.ID(), err)
	}
	out := make(map[string]map[string]any, len(entries))
	for name, raw := range entries {
		var e map[string]any
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("help entry %q is not a JSON object: %s", name, raw)
		}
		out[name] = e
	}
	return out
}

// parseJSON decodes JSON text into generic values, failing the test on error.
func parseJSON(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, text)
	}
	return v
}

func pretty(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// calcAddArgs is the calculator's "add" from the docs: two required
// numbers with descriptions, and an optional note whose validator rule the
// schema shows as maxLength.
type calcAddArgs struct {
	A    float64 `json:"a" jsonschema:"description=first addend"`
	B    float64 `json:"b" jsonschema:"description=second addend"`
	Note string  `json:"note,omitempty" validate:"max=80"`
}

func TestHelpOfCalculatorAdd(t *testing.T) {
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(_ context.Context, a calcAddArgs) (float64, error) { return a.A + a.B, nil },
		agency.Describe("Adds two numbers"),
		agency.Returns("the sum"),
		agency.Example(calcAddArgs{A: 1, B: 2}),
	)
	user := agency.MustNewAgent("User")
	joinLocal(t, calc, user)

	got := helpFor(t, user, "Calculator", "")
	// The whole help value, word for word: description, args schema with
	// required fields and the note's maxLength, returns, access, example.
	want := parseJSON(t, `{"add": {
  "description": "Adds two numbers",
  "args": {"type": "object",
           "properties": {"a": {"type": "number", "description": "first addend"},
                          "b": {"type": "number", "description": "second addend"},
                          "note": {"type": "string", "maxLength": 80}},
           "required": ["a", "b"]},
  "returns": {"type": "number", "description": "the sum"},
  "access": "permitted",
  "examples": [{"to": "Calculator", "action": {"add": {"a": 1, "b": 2}}}]
}}`)
	args, _ := got["add"]["args"].(map[string]any)
	if ap, ok := args["additionalProperties"]; ok {
		if ap != false {
			t.Errorf("additionalProperties = %v, want false", ap)
		}
		delete(args, "additionalProperties")
	}
	if !reflect.DeepEqual(map[string]map[string]any(got), toEntries(want)) {
		t.Errorf("help:\n%s\nwant:\n%s", pretty(got), pretty(want))
	}
}

func toEntries(v any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for k, e := range v.(map[string]any) {
		out[k] = e.(map[string]any)
	}
	return out
}

// The decoder and the schema must agree on what is required: these types mix
// every way a field can be optional or required.
type mixInner struct {
	X int    `json:"x"`
	Y *int   `json:"y"`
	Z string `json:"z,omitempty"`
}

type mixItem struct {
	Name string `json:"name"`
	Tag  string `json:"tag,omitempty"`
}

type mixArgs struct {
	Plain    int       `json:"plain"`
	Omit     int       `json:"omit,omitempty"`
	Ptr      *string   `json:"ptr"`
	OmitReq  string    `json:"omit_req,omitempty" validate:"required"`
	PtrReq   *int      `json:"ptr_req" validate:"required"`
	Inner    mixInner  `json:"inner"`
	InnerPtr *mixInner `json:"inner_ptr"`
	Items    []mixItem `json:"items"`
	OptItems []mixItem `json:"opt_items,omitempty"`
	Skipped  int       `json:"-"`
	hidden   int
}

// mixFull is a mixArgs value with every field given.
const mixFull = `{"plain":1,"omit":2,"ptr":"p","omit_req":"r","ptr_req":3,
 "inner":{"x":1,"y":2,"z":"z"},"inner_ptr":{"x":1,"y":2,"z":"z"},
 "items":[{"name":"n","tag":"t"}],"opt_items":[{"name":"n","tag":"t"}]}`

func TestSchemaRequiredMatchesDecoder(t *testing.T) {
	var calls atomic.Int64
	a := agency.MustNewAgent("Mix")
	agency.Handle(a, "mix", func(_ context.Context, m mixArgs) (int, error) {
		calls.Add(1)
		_ = m.hidden
		return m.Plain, nil
	})
	user := agency.MustNewAgent("User")
	joinLocal(t, a, user)
	schema, _ := helpFor(t, user, "Mix", "mix")["mix"]["args"].(map[string]any)
	if schema == nil {
		t.Fatal("no args schema")
	}

	// The expected sets: a field is required unless its json tag says
	// omitempty or it is a pointer, and validate:"required" makes either
	// required again.
	wantRequired := map[string][]string{
		"":             {"plain", "omit_req", "ptr_req", "inner", "items"},
		"inner":        {"x"},
		"inner_ptr":    {"x"},
		"items[0]":     {"name"},
		"opt_items[0]": {"name"},
	}
	props, _ := schema["properties"].(map[string]any)
	var names []string
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"inner", "inner_ptr", "items", "omit", "omit_req", "opt_items", "plain", "ptr", "ptr_req"}; !slices.Equal(names, want) {
		t.Errorf("properties %v, want %v", names, want)
	}

	full := parseJSON(t, mixFull)
	if _, err := user.Request(callCtx(t), "Mix", "mix", full); err != nil {
		t.Fatalf("the full arguments fail: %v", err)
	}
	// Walk every object in the schema; drop each property in turn from the
	// full arguments and check the decoder's verdict against "required".
	checked := 0
	var walk func(path string, s map[string]any, obj func(any) map[string]any)
	walk = func(path string, s map[string]any, obj func(any) map[string]any) {
		required := stringsOf(s["required"])
		if want := wantRequired[path]; !slices.Equal(required, want) {
			t.Errorf("schema %q: required %v, want %v", path, required, want)
		}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			args := parseJSON(t, mixFull)
			delete(obj(args), name)
			field := name
			if path != "" {
				field = path + "." + name
			}
			_, err := user.Request(callCtx(t), "Mix", "mix", args)
			checked++
			if slices.Contains(required, name) {
				if err == nil {
					t.Errorf("%s is required in the schema, but the decoder accepts it missing", field)
				} else {
					wantMentions(t, err.Error(), field+": missing required field")
				}
			} else if err != nil {
				t.Errorf("%s is optional in the schema, but the decoder says %v", field, err)
			}
			ps, _ := p.(map[string]any)
			sub := func(v any) map[string]any { return obj(v)[name].(map[string]any) }
			switch ps["type"] {
			case "object":
				walk(field, ps, sub)
			case "array":
				items, _ := ps["items"].(map[string]any)
				if items["type"] == "object" {
					walk(field+"[0]", items, func(v any) map[string]any {
						return obj(v)[name].([]any)[0].(map[string]any)
					})
				}
			}
		}
	}
	walk("", schema, func(v any) map[string]any { return v.(map[string]any) })
	if checked != 9+3+3+2+2 {
		t.Errorf("checked %d properties, want 19", checked)
	}
	wantCalls := 1 + 19 - (5 + 1 + 1 + 1 + 1)
	if n := calls.Load(); n != int64(wantCalls) {
		t.Errorf("the handler ran %d times, want %d", n, wantCalls)
	}
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

type ruleSchemaArgs struct {
	N      int      `json:"n" validate:"min=1,max=10"`
	F      float64  `json:"f" validate:"gt=0,lt=1"`
	S      string   `json:"s" validate:"min=2,max=5"`
	L      []int    `json:"l" validate:"min=1,max=3"`
	Code   string   `json:"code" validate:"len=3"`
	Pair   []string `json:"pair" validate:"len=2"`
	Color  string   `json:"color" validate:"oneof=red green 'light blue'"`
	Level  int      `json:"level" validate:"oneof=1 2 3"`
	Email  string   `json:"email" validate:"email"`
	Site   string   `json:"site" validate:"url"`
	Ptr    *int     `json:"ptr,omitempty" validate:"omitempty,min=5"`
	Note   string   `json:"note" jsonschema:"description=a free note"`
	Tagged string   `json:"tagged" jsonschema:"description=with a rule" validate:"max=9"`
}

var goodRuleSchemaArgs = map[string]any{
	"n": 5, "f": 0.5, "s": "abc", "l": []int{1}, "code": "abc", "pair": []string{"a", "b"},
	"color": "light blue", "level": 2, "email": "x@example.com", "site": "https://example.com",
	"note": "", "tagged": "",
}

func TestSchemaValidatorRules(t *testing.T) {
	a := agency.MustNewAgent("Rules")
	agency.Handle(a, "rules", func(_ context.Context, r ruleSchemaArgs) (bool, error) { return true, nil })
	user := agency.MustNewAgent("User")
	joinLocal(t, a, user)
	schema, _ := helpFor(t, user, "Rules", "rules")["rules"]["args"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)

	want := map[string]string{
		"n":      `{"type":"integer","minimum":1,"maximum":10}`,
		"f":      `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`,
		"s":      `{"type":"string","minLength":2,"maxLength":5}`,
		"l":      `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`,
		"code":   `{"type":"string","minLength":3,"maxLength":3}`,
		"pair":   `{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":2}`,
		"color":  `{"type":"string","enum":["red","green","light blue"]}`,
		"level":  `{"type":"integer","enum":[1,2,3]}`,
		"email":  `{"type":"string","format":"email"}`,
		"site":   `{"type":"string","format":"uri"}`,
		"ptr":    `{"type":"integer","minimum":5}`,
		"note":   `{"type":"string","description":"a free note"}`,
		"tagged": `{"type":"string","description":"with a rule","maxLength":9}`,
	}
	for name, w := range want {
		if got := props[name]; !reflect.DeepEqual(got, parseJSON(t, w)) {
			t.Errorf("%s: schema %s, want %s", name, pretty(got), w)
		}
	}
	if len(props) != len(want) {
		t.Errorf("%d properties, want %d", len(props), len(want))
	}

	// What the schema promises, the validator enforces: one value just past
	// each bound fails naming the field.
	if _, err := user.Request(callCtx(t), "Rules", "rules", goodRuleSchemaArgs); err != nil {
		t.Fatalf("valid arguments: %v", err)
	}
	for _, tc := range []struct {
		field string
		value any
	}{
		{"n", 0}, {"n", 11}, {"f", 0}, {"f", 1}, {"s", "a"}, {"s", "abcdef"},
		{"l", []int{}}, {"l", []int{1, 2, 3, 4}}, {"code", "ab"}, {"pair", []string{"a"}},
		{"color", "blue"}, {"level", 4}, {"email", "x"}, {"site", "x"}, {"ptr", 4}, {"tagged", "0123456789"},
	} {
		args := map[string]any{}
		for k, v := range goodRuleSchemaArgs {
			args[k] = v
		}
		args[tc.field] = tc.value
		_, err := user.Request(callCtx(t), "Rules", "rules", args)
		if !errors.Is(err, agency.ErrInvalidArgs) {
			t.Errorf("%s=%v: got %v, want invalid_args", tc.field, tc.value, err)
			continue
		}
		wantMentions(t, err.Error(), tc.field+": breaks rule")
	}
}

type sumResult struct {
	Sum   float64 `json:"sum" jsonschema:"description=the total"`
	Terms int     `json:"terms"`
}

func TestHelpEntryParts(t *testing.T) {
	a := agency.MustNewAgent("Parts")
	agency.Handle(a, "sum", func(_ context.Context, p pairArgs) (sumResult, error) {
		return sumResult{Sum: float64(p.A + p.B), Terms: 2}, nil
	},
		agency.Describe("Adds a and b"),
		agency.Returns("the sum and the number of terms"),
		agency.Errors(map[string]string{"invalid_args": "a or b missing", "overflow": "the sum does not fit"}),
		agency.Example(pairArgs{A: 1, B: 2}),
		agency.Example(`{"a":-1,"b":1}`),
	)
	agency.Handle(a, "text", func(_ context.Context, _ struct{}) (string, error) { return "", nil })
	agency.Handle(a, "anything", func(_ context.Context, _ struct{}) (any, error) { return nil, nil },
		agency.Returns("whatever it finds"))
	custom := map[string]any{"summary": "a custom entry", "usage": []any{"call it"}, "n": 1.0}
	agency.Handle(a, "custom", func(_ context.Context, _ pairArgs) (int, error) { return 0, nil },
		agency.Describe("not shown"), agency.Returns("not shown"), agency.Example(pairArgs{}),
		agency.CustomHelp(custom))
	agency.Handle(a, "custom_json", func(_ context.Context, _ struct{}) (int, error) { return 0, nil },
		agency.CustomHelp(json.RawMessage(`{"raw": true}`)))
	user := agency.MustNewAgent("User")
	joinLocal(t, a, user)

	help := helpFor(t, user, "Parts", "")
	var names []string
	for k := range help {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"anything", "custom", "custom_json", "sum", "text"}; !slices.Equal(names, want) {
		t.Fatalf("help lists %v, want %v (help itself is not listed)", names, want)
	}

	sum := help["sum"]
	if sum["description"] != "Adds a and b" || sum["access"] != "permitted" {
		t.Errorf("sum: %s", pretty(sum))
	}
	wantReturns := parseJSON(t, `{"type":"object","description":"the sum and the number of terms",
		"properties":{"sum":{"type":"number","description":"the total"},"terms":{"type":"integer"}},
		"required":["sum","terms"],"additionalProperties":false}`)
	if !reflect.DeepEqual(sum["returns"], wantReturns) {
		t.Errorf("sum returns %s, want %s", pretty(sum["returns"]), pretty(wantReturns))
	}
	if want := parseJSON(t, `{"invalid_args":"a or b missing","overflow":"the sum does not fit"}`); !reflect.DeepEqual(sum["errors"], want) {
		t.Errorf("sum errors %v, want %v", sum["errors"], want)
	}
	wantExamples := parseJSON(t, `[{"to":"Parts","action":{"sum":{"a":1,"b":2}}},
		{"to":"Parts","action":{"sum":{"a":-1,"b":1}}}]`)
	if !reflect.DeepEqual(sum["examples"], wantExamples) {
		t.Errorf("sum examples %s, want %s", pretty(sum["examples"]), pretty(wantExamples))
	}
	// Each example is itself a message an agent can send.
	for _, ex := range sum["examples"].([]any) {
		b, _ := json.Marshal(ex)
		var m struct {
			To     string                     `json:"to"`
			Action map[string]json.RawMessage `json:"action"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if _, err := user.Request(callCtx(t), m.To, "sum", m.Action["sum"]); err != nil {
			t.Errorf("example %s fails: %v", b, err)
		}
	}

	text := help["text"]
	if want := parseJSON(t, `{"type":"string"}`); !reflect.DeepEqual(text["returns"], want) {
		t.Errorf("text returns %v, want %v", text["returns"], want)
	}
	for _, k := range []string{"description", "errors", "examples"} {
		if _, ok := text[k]; ok {
			t.Errorf("text has %q without the option that sets it: %s", k, pretty(text))
		}
	}
	if want := parseJSON(t, `{"type":"object","properties":{},"additionalProperties":false}`); !reflect.DeepEqual(text["args"], want) {
		t.Errorf("text args %s, want %s", pretty(text["args"]), pretty(want))
	}
	if want := parseJSON(t, `{"description":"whatever it finds"}`); !reflect.DeepEqual(help["anything"]["returns"], want) {
		t.Errorf("anything returns %v, want %v", help["anything"]["returns"], want)
	}

	if !reflect.DeepEqual(help["custom"], custom) {
		t.Errorf("custom entry %s, want exactly %s", pretty(help["custom"]), pretty(custom))
	}
	if want := map[string]any{"raw": true}; !reflect.DeepEqual(help["custom_json"], want) {
		t.Errorf("custom_json entry %v, want %v", help["custom_json"], want)
	}

	// action_name narrows the answer; an unknown name is not_found.
	one := helpFor(t, user, "Parts", "custom")
	if len(one) != 1 || !reflect.DeepEqual(one["custom"], custom) {
		t.Errorf("help for custom: %s", pretty(one))
	}
	_, err := user.Request(callCtx(t), "Parts", agency.HelpAction, agency.HelpArgs{ActionName: "nope"})
	if ae := asActionError(t, err, agency.TypeNotFound); !strings.Contains(ae.Text, `"nope"`) {
		t.Errorf("not_found text %q does not name the action", ae.Text)
	}
	_, err = user.Request(callCtx(t), "Parts", agency.HelpAction, map[string]any{"action": "sum"})
	wantMentions(t, asActionError(t, err, agency.TypeInvalidArgs).Text, "action: unknown field", "action_name")
}

func TestHelpDecodesAsActionHelp(t *testing.T) {
	a := agency.MustNewAgent("Typed")
	agency.Handle(a, "add", func(_ context.Context, a calcAddArgs) (float64, error) { return a.A + a.B, nil },
		agency.Describe("Adds two numbers"), agency.Example(calcAddArgs{A: 1, B: 2}),
		agency.Errors(map[string]string{"x": "y"}))
	user := agency.MustNewAgent("User")
	joinLocal(t, a, user)
	help, err := agency.Call[map[string]agency.ActionHelp](callCtx(t), user, "Typed", agency.HelpAction, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := help["add"]
	if !ok || h.Description != "Adds two numbers" || h.Access != "permitted" || len(h.Examples) != 1 || h.Errors["x"] != "y" {
		t.Fatalf("ActionHelp %+v", h)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(h.Args, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || len(schema.Properties) != 3 || !slices.Equal(schema.Required, []string{"a", "b"}) {
		t.Errorf("args schema %s", h.Args)
	}
}
