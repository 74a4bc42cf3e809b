package agency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// TestMain fails the package's tests when one leaves a goroutine running.
// It is the package's only TestMain: every test file of package agency_test
// shares it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// joinLocal adds the agents to a new space.Local that is closed when the
// test ends.
func joinLocal(t *testing.T, agents ...*agency.Agent) *space.Local {
	t.Helper()
	s := space.NewLocal()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("closing the space: %v", err)
		}
	})
	for _, a := range agents {
		if err := s.Add(context.Background(), a); err != nil {
			t.Fatalf("adding %q: %v", a.ID(), err)
		}
	}
	return s
}

// callCtx is a request context whose deadline only guards against a hang.
func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// asActionError returns err as an *ActionError of the wanted type, failing
// the test otherwise.
func asActionError(t *testing.T, err error, want agency.ErrorType) *agency.ActionError {
	t.Helper()
	var ae *agency.ActionError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *agency.ActionError", err, err)
	}
	if ae.Type != want {
		t.Fatalf("error type %q, want %q: %s", ae.Type, want, ae.Text)
	}
	return ae
}

// wantMentions fails the test unless text holds each of want.
func wantMentions(t *testing.T, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%q does not mention %q", text, w)
		}
	}
}

// --- registration ---

type regArgs struct {
	A int    `json:"a"`
	B int    `json:"b"`
	N string `json:"n,omitempty" validate:"omitempty,max=3"`
}

func regHandler(_ context.Context, a regArgs) (int, error) { return a.A + a.B, nil }

func TestRegisterRejectsNonStructArgs(t *testing.T) {
	a := agency.MustNewAgent("Reg")
	check := func(name string, register func() error, handle func()) {
		t.Helper()
		err := register()
		if err == nil {
			t.Errorf("%s: Register accepted non-struct arguments", name)
		} else {
			wantMentions(t, err.Error(), "struct")
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Handle did not panic", name)
				}
			}()
			handle()
		}()
	}
	intH := func(context.Context, int) (int, error) { return 0, nil }
	mapH := func(context.Context, map[string]any) (int, error) { return 0, nil }
	ptrH := func(context.Context, *regArgs) (int, error) { return 0, nil }
	sliceH := func(context.Context, []regArgs) (int, error) { return 0, nil }
	check("int", func() error { return agency.Register(a, "i", intH) }, func() { agency.Handle(a, "i", intH) })
	check("map", func() error { return agency.Register(a, "m", mapH) }, func() { agency.Handle(a, "m", mapH) })
	check("pointer to struct", func() error { return agency.Register(a, "p", ptrH) }, func() { agency.Handle(a, "p", ptrH) })
	check("slice", func() error { return agency.Register(a, "s", sliceH) }, func() { agency.Handle(a, "s", sliceH) })
	if names := a.ActionNames(); len(names) != 0 {
		t.Errorf("failed registrations left actions behind: %v", names)
	}
	if err := agency.Register[regArgs, int](a, "nil", nil); err == nil {
		t.Error("Register accepted a nil handler")
	}
}

func TestRegisterDuplicateName(t *testing.T) {
	a := agency.MustNewAgent("Reg")
	if err := agency.Register(a, "add", regHandler); err != nil {
		t.Fatal(err)
	}
	err := agency.Register(a, "add", regHandler, agency.Describe("again"))
	if err == nil {
		t.Fatal("the second registration of add succeeded")
	}
	wantMentions(t, err.Error(), `"add"`, "twice")
	defer func() {
		if recover() == nil {
			t.Error("Handle of a taken name did not panic")
		}
	}()
	agency.Handle(a, "add", regHandler)
}

func TestRegisterReservedNames(t *testing.T) {
	a := agency.MustNewAgent("Reg")
	for _, name := range []string{"help", "[response]", "[error]", "", "__x", "__meta__", "[x]", strings.Repeat("n", 256), "a\xffb"} {
		err := agency.Register(a, name, regHandler)
		if !errors.Is(err, agency.ErrInvalidActionName) {
			t.Errorf("Register(%q) = %v, want ErrInvalidActionName", name, err)
		}
	}
	if names := a.ActionNames(); len(names) != 0 {
		t.Errorf("actions registered under reserved names: %v", names)
	}
	for _, name := range []string{"x__", "a[b]", "ünïcode", "with space", "a.b"} {
		if err := agency.Register(a, name, regHandler); err != nil {
			t.Errorf("Register(%q): %v", name, err)
		}
	}
}

func TestRegisterRejectsRepeatedAndInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []agency.ActionOption
	}{
		{"Describe twice", []agency.ActionOption{agency.Describe("a"), agency.Describe("b")}},
		{"Returns twice", []agency.ActionOption{agency.Returns("a"), agency.Returns("b")}},
		{"Errors twice", []agency.ActionOption{agency.Errors(map[string]string{"x": "y"}), agency.Errors(map[string]string{"z": "w"})}},
		{"Errors empty", []agency.ActionOption{agency.Errors(nil)}},
		{"CustomHelp twice", []agency.ActionOption{agency.CustomHelp(map[string]any{}), agency.CustomHelp(map[string]any{})}},
		{"CustomHelp not an object", []agency.ActionOption{agency.CustomHelp([]string{"help"})}},
		{"AccessForAll twice", []agency.ActionOption{agency.AccessForAll(agency.Permitted), agency.AccessForAll(agency.Denied)}},
		{"AccessForAll and AccessBySender", []agency.ActionOption{
			agency.AccessForAll(agency.Permitted), agency.AccessBySender(map[string]agency.Access{"x": agency.Denied}, agency.Permitted)}},
		{"AccessBySender and AccessFunc", []agency.ActionOption{
			agency.AccessBySender(nil, agency.Denied), agency.AccessFunc(func(*agency.Message) agency.Access { return agency.Permitted })}},
		{"AccessFunc twice", []agency.ActionOption{
			agency.AccessFunc(func(*agency.Message) agency.Access { return agency.Permitted }),
			agency.AccessFunc(func(*agency.Message) agency.Access { return agency.Permitted })}},
		{"AccessFunc nil", []agency.ActionOption{agency.AccessFunc(nil)}},
		{"AccessForAll unknown", []agency.ActionOption{agency.AccessForAll(agency.Access(9))}},
		{"AccessBySender unknown", []agency.ActionOption{agency.AccessBySender(map[string]agency.Access{"x": 9}, agency.Permitted)}},
		{"AccessBySender unknown default", []agency.ActionOption{agency.AccessBySender(nil, agency.Access(9))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := agency.MustNewAgent("Reg")
			err := agency.Register(a, "add", regHandler, tc.opts...)
			if !errors.Is(err, agency.ErrInvalidOption) {
				t.Fatalf("Register = %v, want ErrInvalidOption", err)
			}
			wantMentions(t, err.Error(), `"add"`)
			if names := a.ActionNames(); len(names) != 0 {
				t.Errorf("a failed registration left %v", names)
			}
		})
	}
}

type otherArgs struct {
	X string `json:"x"`
}

func TestRegisterChecksExamples(t *testing.T) {
	for _, tc := range []struct {
		name    string
		example any
		want    []string
	}{
		{"other struct type", otherArgs{X: "1"}, []string{"x: unknown field", "a: missing required field"}},
		{"number", 42, []string{"must be an object"}},
		{"JSON array string", `[1,2]`, []string{"must be an object"}},
		{"unknown field", map[string]any{"a": 1, "b": 2, "c": 3}, []string{"c: unknown field"}},
		{"missing required", `{"a":1}`, []string{"b: missing required field"}},
		{"wrong type", json.RawMessage(`{"a":"one","b":2}`), []string{"a: must be an integer"}},
		{"rule", regArgs{A: 1, B: 2, N: "long"}, []string{"n: breaks rule max=3"}},
		{"rule in pointer", &regArgs{A: 1, B: 2, N: "long"}, []string{"n: breaks rule max=3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := agency.MustNewAgent("Reg")
			err := agency.Register(a, "add", regHandler, agency.Example(regArgs{A: 1, B: 2}), agency.Example(tc.example))
			if err == nil {
				t.Fatalf("Example(%#v) was accepted", tc.example)
			}
			wantMentions(t, err.Error(), append([]string{`"add"`, "example 2"}, tc.want...)...)
			if names := a.ActionNames(); len(names) != 0 {
				t.Errorf("a failed registration left %v", names)
			}
			defer func() {
				if recover() == nil {
					t.Error("Handle did not panic")
				}
			}()
			agency.Handle(a, "add", regHandler, agency.Example(tc.example))
		})
	}
}

func TestRegisterAcceptsExamples(t *testing.T) {
	a := agency.MustNewAgent("Reg")
	err := agency.Register(a, "add", regHandler,
		agency.Example(regArgs{A: 1, B: 2}),
		agency.Example(&regArgs{A: 3, B: 4, N: "abc"}),
		agency.Example(map[string]any{"a": 5, "b": 6}),
		agency.Example(`{"a": 7, "b": 8}`),
		agency.Example(json.RawMessage(`{"a":9,"b":10,"n":"x"}`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	u := agency.MustNewAgent("User")
	joinLocal(t, a, u)
	help, err := agency.Call[map[string]agency.ActionHelp](callCtx(t), u, "Reg", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, ex := range help["add"].Examples {
		var v any
		if err := json.Unmarshal(ex, &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []string{
		`{"to":"Reg","action":{"add":{"a":1,"b":2}}}`,
		`{"to":"Reg","action":{"add":{"a":3,"b":4,"n":"abc"}}}`,
		`{"to":"Reg","action":{"add":{"a":5,"b":6}}}`,
		`{"to":"Reg","action":{"add":{"a":7,"b":8}}}`,
		`{"to":"Reg","action":{"add":{"a":9,"b":10,"n":"x"}}}`,
	}
	if len(got) != len(want) {
		t.Fatalf("help lists %d examples, want %d: %s", len(got), len(want), help["add"].Examples)
	}
	for i := range want {
		var w any
		if err := json.Unmarshal([]byte(want[i]), &w); err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(got[i], w) {
			t.Errorf("example %d: got %v, want %s", i+1, got[i], want[i])
		}
	}
}

// jsonEqual compares two decoded JSON values.
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func TestRegisterAfterJoiningFails(t *testing.T) {
	a := agency.MustNewAgent("Joined")
	agency.Handle(a, "add", regHandler)
	s := joinLocal(t, a)
	err := agency.Register(a, "sub", regHandler)
	if err == nil {
		t.Fatal("Register succeeded on an agent in a space")
	}
	wantMentions(t, err.Error(), `"sub"`, "space")
	if err := s.Remove(callCtx(t), "Joined"); err != nil {
		t.Fatal(err)
	}
	if err := agency.Register(a, "sub", regHandler); err == nil {
		t.Error("Register succeeded on an agent that has been in a space")
	}
	if got := a.ActionNames(); len(got) != 1 || got[0] != "add" {
		t.Errorf("ActionNames = %v, want [add]", got)
	}
}

// The first action lives in the agent itself, the others beside it: a
// registration that fails leaves nothing behind wherever it was to go, and
// every action, the first, those in the list and those past the point from
// which the agent looks them up in a map, is called and listed in help.
func TestRegisterKeepsEveryActionWhereverItLives(t *testing.T) {
	a := agency.MustNewAgent("Many")
	failFirst := agency.Register(a, "a0", regHandler, agency.Describe("x"), agency.Describe("y"))
	if !errors.Is(failFirst, agency.ErrInvalidOption) {
		t.Fatalf("the first Register = %v, want ErrInvalidOption", failFirst)
	}
	if names := a.ActionNames(); len(names) != 0 {
		t.Fatalf("a failed first registration left %v", names)
	}
	const n = 12 // past the map's threshold
	var want []string
	for i := range n {
		name := fmt.Sprintf("a%d", i)
		want = append(want, name)
		agency.Handle(a, name, func(context.Context, pairArgs) (string, error) { return name, nil })
		if i == 1 {
			// A failed registration past the first leaves nothing either.
			if err := agency.Register(a, "bad", regHandler, agency.Returns("x"), agency.Returns("y")); err == nil {
				t.Fatal("Register with Returns twice succeeded")
			}
		}
	}
	if err := agency.Register(a, "a0", regHandler); err == nil {
		t.Error("the first action's name was taken again")
	}
	got := a.ActionNames()
	if len(got) != n {
		t.Fatalf("ActionNames = %v, want %d names", got, n)
	}
	asker := agency.MustNewAgent("Asker")
	joinLocal(t, a, asker)
	for _, name := range want {
		r, err := agency.Call[string](callCtx(t), asker, "Many", name, pairArgs{})
		if err != nil || r != name {
			t.Errorf("%s answered %q, %v", name, r, err)
		}
	}
	help, err := asker.Request(callCtx(t), "Many", agency.HelpAction, nil)
	if err != nil {
		t.Fatal(err)
	}
	text, err := json.Marshal(help.Args)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		wantMentions(t, string(text), `"`+name+`"`)
	}
	if strings.Contains(string(text), `"bad"`) {
		t.Errorf("help lists the failed registration: %s", text)
	}
}

// --- arguments ---

type pairArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

type optionalArgs struct {
	Req  string  `json:"req"`
	Opt  string  `json:"opt,omitempty"`
	Zero int     `json:"zero,omitzero"`
	Ptr  *int    `json:"ptr"`
	PStr *string `json:"pstr,omitempty"`
}

type typedArgs struct {
	I  int            `json:"i"`
	F  float64        `json:"f"`
	S  string         `json:"s"`
	Bo bool           `json:"bo"`
	L  []int          `json:"l"`
	M  map[string]int `json:"m"`
	T  time.Time      `json:"t"`
}

type ruleArgs struct {
	Count int    `json:"count" validate:"min=1,max=10"`
	Code  string `json:"code" validate:"len=3"`
	Color string `json:"color" validate:"oneof=red green"`
	Email string `json:"email" validate:"email"`
	Site  string `json:"site" validate:"url"`
}

var goodRules = map[string]any{"count": 5, "code": "abc", "color": "red", "email": "a@example.com", "site": "https://example.com/x"}

type innerArgs struct {
	X   int `json:"x"`
	Opt int `json:"opt,omitempty"`
}

type itemArgs struct {
	Y string `json:"y"`
}

type nestedArgs struct {
	Inner innerArgs   `json:"inner"`
	Items []itemArgs  `json:"items"`
	Ptrs  []*itemArgs `json:"ptrs,omitempty"`
	Maybe *innerArgs  `json:"maybe,omitempty"`
}

// argsAgent is an agent whose actions echo their decoded arguments and count
// their calls.
type argsAgent struct {
	calls atomic.Int64
}

func echoHandler[A any](c *argsAgent) func(context.Context, A) (A, error) {
	return func(_ context.Context, a A) (A, error) {
		c.calls.Add(1)
		return a, nil
	}
}

func newArgsAgents(t *testing.T) (*argsAgent, *agency.Agent) {
	t.Helper()
	c := &argsAgent{}
	a := agency.MustNewAgent("Args")
	agency.Handle(a, "pair", echoHandler[pairArgs](c))
	agency.Handle(a, "optional", echoHandler[optionalArgs](c))
	agency.Handle(a, "typed", echoHandler[typedArgs](c))
	agency.Handle(a, "rules", echoHandler[ruleArgs](c))
	agency.Handle(a, "nested", echoHandler[nestedArgs](c))
	agency.Handle(a, "none", echoHandler[struct{}](c))
	u := agency.MustNewAgent("User")
	joinLocal(t, a, u)
	return c, u
}

// badArgs calls action with args, expects invalid_args and returns its text.
func badArgs(t *testing.T, u *agency.Agent, action string, args any) string {
	t.Helper()
	_, err := u.Request(callCtx(t), "Args", action, args)
	if !errors.Is(err, agency.ErrInvalidArgs) {
		t.Fatalf("%s(%s): got %v, want invalid_args", action, showArgs(args), err)
	}
	ae := asActionError(t, err, agency.TypeInvalidArgs)
	wantMentions(t, ae.Text, `"Args.`+action+`"`)
	return ae.Text
}

func showArgs(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.RawMessage:
		return string(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

func rawArgs(s string) json.RawMessage { return json.RawMessage(s) }

func TestArgsStrictDecoding(t *testing.T) {
	c, u := newArgsAgents(t)

	text := badArgs(t, u, "pair", rawArgs(`{"a":1,"b":2,"c":3}`))
	wantMentions(t, text, "c: unknown field", "a, b")
	text = badArgs(t, u, "none", rawArgs(`{"x":1}`))
	wantMentions(t, text, "x: unknown field", "takes no arguments")
	text = badArgs(t, u, "nested", rawArgs(`{"inner":{"x":1,"z":2},"items":[]}`))
	wantMentions(t, text, "inner.z: unknown field")
	text = badArgs(t, u, "nested", rawArgs(`{"inner":{"x":1},"items":[{"y":"a"},{"y":"b","w":1}]}`))
	wantMentions(t, text, "items[1].w: unknown field")
	text = badArgs(t, u, "typed", rawArgs(`{"i":1,"f":1,"s":"","bo":true,"l":[],"m":{},"t":"2024-01-01T00:00:00Z","I":2}`))
	wantMentions(t, text, "I: unknown field")

	if n := c.calls.Load(); n != 0 {
		t.Errorf("handlers ran %d times on invalid arguments", n)
	}
}

func TestArgsRequired(t *testing.T) {
	c, u := newArgsAgents(t)
	ctx := callCtx(t)

	text := badArgs(t, u, "pair", rawArgs(`{"a":1}`))
	wantMentions(t, text, "b: missing required field")
	if strings.Contains(text, "a:") {
		t.Errorf("%q names a, which was given", text)
	}
	text = badArgs(t, u, "pair", rawArgs(`{"a":1,"b":null}`))
	wantMentions(t, text, "b: missing required field")
	text = badArgs(t, u, "pair", nil)
	wantMentions(t, text, "a: missing required field", "b: missing required field")
	if n := c.calls.Load(); n != 0 {
		t.Fatalf("handlers ran %d times on invalid arguments", n)
	}

	got, err := agency.Call[pairArgs](ctx, u, "Args", "pair", rawArgs(`{"a":0,"b":0}`))
	if err != nil || got != (pairArgs{}) {
		t.Errorf(`pair {"a":0,"b":0} = %+v, %v`, got, err)
	}

	// omitempty, omitzero and pointer fields are optional.
	opt, err := agency.Call[optionalArgs](ctx, u, "Args", "optional", rawArgs(`{"req":""}`))
	if err != nil || opt.Req != "" || opt.Ptr != nil || opt.PStr != nil {
		t.Errorf(`optional {"req":""} = %+v, %v`, opt, err)
	}
	opt, err = agency.Call[optionalArgs](ctx, u, "Args", "optional", rawArgs(`{"req":"r","opt":"o","zero":3,"ptr":4,"pstr":"p"}`))
	if err != nil || opt.Req != "r" || opt.Opt != "o" || opt.Zero != 3 || opt.Ptr == nil || *opt.Ptr != 4 || opt.PStr == nil || *opt.PStr != "p" {
		t.Errorf("optional, all given = %+v, %v", opt, err)
	}
	text = badArgs(t, u, "optional", rawArgs(`{"opt":"o","ptr":1}`))
	wantMentions(t, text, "req: missing required field")
	for _, name := range []string{"opt:", "zero:", "ptr:", "pstr:"} {
		if strings.Contains(text, name) {
			t.Errorf("%q names the optional field %s", text, name)
		}
	}
	if n := c.calls.Load(); n != 3 {
		t.Errorf("handlers ran %d times, want 3", n)
	}
}

func TestArgsWrongTypesNamed(t *testing.T) {
	c, u := newArgsAgents(t)
	text := badArgs(t, u, "typed", rawArgs(`{"i":"1","f":true,"s":2,"bo":"yes","l":{},"m":[],"t":"yesterday"}`))
	wantMentions(t, text,
		"i: must be an integer, not string",
		"f: must be a number, not bool",
		"s: must be a string, not number",
		"bo: must be a boolean, not string",
		"l: must be an array, not object",
		"m: must be an object, not array",
		"t:",
	)
	text = badArgs(t, u, "typed", rawArgs(`{"i":1.5,"f":1,"s":"","bo":true,"l":["x"],"m":{"k":"v"},"t":"2024-01-01T00:00:00Z"}`))
	wantMentions(t, text, "i: must be an integer, not number 1.5",
		"l: an element must be an integer, not string", "m: a value must be an integer, not string")
	text = badArgs(t, u, "nested", rawArgs(`{"inner":[],"items":{}}`))
	wantMentions(t, text, "inner: must be an object", "items: must be an array")
	text = badArgs(t, u, "pair", rawArgs(`{"A":1,"b":2}`))
	wantMentions(t, text, "A: unknown field", "a: missing required field")
	if n := c.calls.Load(); n != 0 {
		t.Errorf("handlers ran %d times on invalid arguments", n)
	}
}

func TestArgsValidatorRules(t *testing.T) {
	c, u := newArgsAgents(t)
	ctx := callCtx(t)
	if _, err := u.Request(ctx, "Args", "rules", goodRules); err != nil {
		t.Fatalf("valid rules arguments: %v", err)
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for k, v := range goodRules {
			m[k] = v
		}
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		field string
		value any
		rule  string
	}{
		{"count", 0, "min=1"},
		{"count", 11, "max=10"},
		{"code", "ab", "len=3"},
		{"code", "abcd", "len=3"},
		{"color", "blue", "oneof=red green"},
		{"email", "not-an-email", "email"},
		{"site", "not a url", "url"},
	} {
		text := badArgs(t, u, "rules", with(tc.field, tc.value))
		wantMentions(t, text, tc.field+": breaks rule "+tc.rule)
	}
	// Every bad field is named in one error.
	text := badArgs(t, u, "rules", map[string]any{"count": 20, "code": "", "color": "", "email": "x", "site": "y"})
	wantMentions(t, text, "count: breaks rule max=10", "code: breaks rule len=3", "color: breaks rule oneof",
		"email: breaks rule email", "site: breaks rule url")
	// Decoding problems of several fields come together too.
	text = badArgs(t, u, "rules", rawArgs(`{"count":"x","code":1,"extra":true}`))
	wantMentions(t, text, "count: must be an integer", "code: must be a string", "extra: unknown field",
		"color: missing required field", "email: missing required field", "site: missing required field")
	if n := c.calls.Load(); n != 1 {
		t.Errorf("handlers ran %d times, want 1", n)
	}
}

func TestArgsNestedRequired(t *testing.T) {
	c, u := newArgsAgents(t)
	ctx := callCtx(t)
	text := badArgs(t, u, "nested", rawArgs(`{"inner":{},"items":[{"y":"a"},{}]}`))
	wantMentions(t, text, "inner.x: missing required field", "items[1].y: missing required field")
	for _, bad := range []string{"inner.opt", "items[0]"} {
		if strings.Contains(text, bad) {
			t.Errorf("%q names %s, which is fine", text, bad)
		}
	}
	text = badArgs(t, u, "nested", rawArgs(`{"items":[]}`))
	wantMentions(t, text, "inner: missing required field")
	text = badArgs(t, u, "nested", rawArgs(`{"inner":{"x":1},"items":[{"y":"a"}],"ptrs":[null,{}],"maybe":{}}`))
	wantMentions(t, text, "ptrs[1].y: missing required field", "maybe.x: missing required field")
	if strings.Contains(text, "ptrs[0]") {
		t.Errorf("%q names a null pointer element", text)
	}
	got, err := agency.Call[nestedArgs](ctx, u, "Args", "nested", rawArgs(`{"inner":{"x":0},"items":[{"y":""},{"y":"b"}],"maybe":{"x":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Inner.X != 0 || len(got.Items) != 2 || got.Items[1].Y != "b" || got.Maybe == nil || got.Maybe.X != 2 {
		t.Errorf("decoded %+v", got)
	}
	if n := c.calls.Load(); n != 1 {
		t.Errorf("handlers ran %d times, want 1", n)
	}
}

func TestArgsTypedGoValues(t *testing.T) {
	c, u := newArgsAgents(t)
	ctx := callCtx(t)

	// space.Local hands the value over as it is: no decoding, so no
	// required-field check, but the validator still runs.
	in := nestedArgs{Items: []itemArgs{{Y: "q"}}}
	got, err := agency.Call[nestedArgs](ctx, u, "Args", "nested", in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Inner != in.Inner || len(got.Items) != 1 || got.Items[0] != in.Items[0] {
		t.Errorf("typed nested: got %+v, want %+v", got, in)
	}
	good := ruleArgs{Count: 1, Code: "xyz", Color: "green", Email: "b@example.org", Site: "http://example.org"}
	for _, args := range []any{good, &good} {
		r, err := agency.Call[ruleArgs](ctx, u, "Args", "rules", args)
		if err != nil || r != good {
			t.Errorf("typed rules %T: %+v, %v", args, r, err)
		}
	}
	bad := good
	bad.Count, bad.Email = 0, "nope"
	for _, args := range []any{bad, &bad} {
		text := badArgs(t, u, "rules", args)
		wantMentions(t, text, "count: breaks rule min=1", "email: breaks rule email")
	}
	if n := c.calls.Load(); n != 3 {
		t.Errorf("handlers ran %d times, want 3", n)
	}

	// A map, a different struct and a nil pointer go through JSON.
	p, err := agency.Call[pairArgs](ctx, u, "Args", "pair", map[string]any{"a": 1, "b": 2})
	if err != nil || p != (pairArgs{A: 1, B: 2}) {
		t.Errorf("map args: %+v, %v", p, err)
	}
	p, err = agency.Call[pairArgs](ctx, u, "Args", "pair", map[string]int{"a": 3, "b": 4})
	if err != nil || p != (pairArgs{A: 3, B: 4}) {
		t.Errorf("map[string]int args: %+v, %v", p, err)
	}
	text := badArgs(t, u, "pair", map[string]any{"a": 1, "b": "2"})
	wantMentions(t, text, "b: must be an integer, not string")
	text = badArgs(t, u, "pair", struct {
		A int `json:"a"`
	}{1})
	wantMentions(t, text, "b: missing required field")
	text = badArgs(t, u, "pair", (*pairArgs)(nil))
	wantMentions(t, text, "a: missing required field", "b: missing required field")
	if n := c.calls.Load(); n != 5 {
		t.Errorf("handlers ran %d times, want 5", n)
	}
}

func TestArgsFromTheWire(t *testing.T) {
	// A message decoded from the wire carries its arguments as raw JSON.
	c, u := newArgsAgents(t)
	m, err := agency.DecodeMessage([]byte(`{"to":"Args","from":"User","action":{"pair":{"a":1,"b":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := u.RequestMessage(callCtx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	p, err := agency.Value[pairArgs](r)
	if err != nil || p != (pairArgs{A: 1, B: 2}) {
		t.Errorf("got %+v, %v", p, err)
	}
	m, err = agency.DecodeMessage([]byte(`{"to":"Args","from":"User","action":{"none":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.RequestMessage(callCtx(t), m); err != nil {
		t.Errorf("null arguments of an action that takes none: %v", err)
	}
	m, err = agency.DecodeMessage([]byte(`{"to":"Args","from":"User","action":{"pair":{"a":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = u.RequestMessage(callCtx(t), m)
	wantMentions(t, asActionError(t, err, agency.TypeInvalidArgs).Text, "b: missing required field")
	if n := c.calls.Load(); n != 2 {
		t.Errorf("handlers ran %d times, want 2", n)
	}
}

// Types help cannot describe fail at registration: the schema reflector
// panics on some and recurses without end (a fatal stack overflow) on a type
// that contains itself. CustomHelp, which replaces the schema, lifts this.
type (
	treeArgs struct {
		Name     string     `json:"name"`
		Children []treeArgs `json:"children,omitempty"`
	}
	linkArgs struct {
		Next *linkArgs `json:"next,omitempty"`
	}
	byNameArgs struct {
		Kids map[string]byNameArgs `json:"kids,omitempty"`
	}
	complexArgs struct {
		Z complex128 `json:"z"`
	}
	hiddenLoopArgs struct {
		Name string          `json:"name"`
		Loop *hiddenLoopArgs `json:"-"`
	}
)

func TestRegisterRejectsTypesHelpCannotDescribe(t *testing.T) {
	a := agency.MustNewAgent("Reg")
	for name, register := range map[string]func() error{
		"slice of itself": func() error {
			return agency.Register(a, "tree", func(context.Context, treeArgs) (int, error) { return 0, nil })
		},
		"pointer to itself": func() error {
			return agency.Register(a, "link", func(context.Context, linkArgs) (int, error) { return 0, nil })
		},
		"map of itself": func() error {
			return agency.Register(a, "byname", func(context.Context, byNameArgs) (int, error) { return 0, nil })
		},
		"complex number": func() error {
			return agency.Register(a, "complex", func(context.Context, complexArgs) (int, error) { return 0, nil })
		},
		"recursive result": func() error {
			return agency.Register(a, "grow", func(context.Context, regArgs) (treeArgs, error) { return treeArgs{}, nil })
		},
	} {
		err := register()
		if err == nil {
			t.Errorf("%s: Register accepted a type help cannot describe", name)
			continue
		}
		wantMentions(t, err.Error(), "help cannot describe", "CustomHelp")
	}
	if names := a.ActionNames(); len(names) != 0 {
		t.Errorf("failed registrations left actions behind: %v", names)
	}
	// A field json hides is not part of the schema, so its type may loop.
	if err := agency.Register(a, "hidden", func(context.Context, hiddenLoopArgs) (int, error) { return 0, nil }); err != nil {
		t.Errorf("a loop behind json:\"-\": %v", err)
	}

	// With CustomHelp the recursive type serves, and help answers.
	b := agency.MustNewAgent("Tree")
	agency.Handle(b, "tree", func(_ context.Context, args treeArgs) (int, error) { return len(args.Children), nil },
		agency.CustomHelp(map[string]any{"description": "counts children"}))
	u := agency.MustNewAgent("User")
	joinLocal(t, b, u)
	ctx := callCtx(t)
	if n, err := agency.Call[int](ctx, u, "Tree", "tree", map[string]any{"name": "root", "children": []any{map[string]any{"name": "leaf"}}}); err != nil || n != 1 {
		t.Errorf("tree: %v, %v", n, err)
	}
	if h := helpFor(t, u, "Tree", ""); h["tree"]["description"] != "counts children" {
		t.Errorf("help: %v", h)
	}
}

// A validate tag that names no rule, or a rule with a bad parameter, fails
// at registration; the validator would panic at the first call.
func TestRegisterRejectsBadValidateTags(t *testing.T) {
	type misspelt struct {
		N int `json:"n" validate:"mni=3"`
	}
	type badParam struct {
		N int `json:"n" validate:"min=three"`
	}
	a := agency.MustNewAgent("Reg")
	err := agency.Register(a, "misspelt", func(context.Context, misspelt) (int, error) { return 0, nil })
	if err == nil {
		t.Error("Register accepted validate:\"mni=3\"")
	} else {
		wantMentions(t, err.Error(), `"misspelt"`, "mni")
	}
	if err := agency.Register(a, "badparam", func(context.Context, badParam) (int, error) { return 0, nil }); err == nil {
		t.Error("Register accepted validate:\"min=three\"")
	}
	if names := a.ActionNames(); len(names) != 0 {
		t.Errorf("failed registrations left actions behind: %v", names)
	}
}

// panicsWhenEncoded is an in-process argument whose encoding panics.
type panicsWhenEncoded struct{}

func (panicsWhenEncoded) MarshalJSON() ([]byte, error) { panic("cannot encode") }

// help arguments whose encoding panics are action_failed; the agent keeps
// serving.
func TestHelpSurvivesPanickingArgs(t *testing.T) {
	a := agency.MustNewAgent("Target")
	agency.Handle(a, "ping", func(context.Context, struct{}) (string, error) { return "pong", nil })
	u := agency.MustNewAgent("User")
	joinLocal(t, a, u)
	ctx := callCtx(t)
	_, err := u.Request(ctx, "Target", agency.HelpAction, map[string]any{"action_name": panicsWhenEncoded{}})
	wantMentions(t, asActionError(t, err, agency.TypeActionFailed).Text, "panicked", "cannot encode")
	if v, err := agency.Call[string](ctx, u, "Target", "ping", nil); err != nil || v != "pong" {
		t.Errorf("ping after help panicked: %q, %v", v, err)
	}
}

// Respond through a handler's context kept past the agent's removal is
// ErrNotAdded, as Send is: a removed agent sends nothing.
func TestRespondAfterRemovalFails(t *testing.T) {
	kept := make(chan context.Context, 1)
	w := agency.MustNewAgent("Worker")
	agency.Handle(w, "work", func(ctx context.Context, _ struct{}) (int, error) {
		kept <- ctx
		return 1, nil
	})
	u := agency.MustNewAgent("User")
	s := joinLocal(t, w, u)
	if _, err := u.Request(callCtx(t), "Worker", "work", nil); err != nil {
		t.Fatal(err)
	}
	ctx := <-kept
	if err := s.Remove(callCtx(t), "Worker"); err != nil {
		t.Fatal(err)
	}
	if err := agency.Respond(ctx, 2); !errors.Is(err, agency.ErrNotAdded) {
		t.Errorf("Respond after removal: %v, want ErrNotAdded", err)
	}
	if err := agency.RespondError(ctx, errors.New("late")); !errors.Is(err, agency.ErrNotAdded) {
		t.Errorf("RespondError after removal: %v, want ErrNotAdded", err)
	}
}

// TestArgsDecodeAndRuleProblemsTogether shows one invalid_args names every
// bad field: those that failed to decode and those that decoded but broke a
// rule, each once.
func TestArgsDecodeAndRuleProblemsTogether(t *testing.T) {
	c, u := newArgsAgents(t)
	text := badArgs(t, u, "rules", rawArgs(`{"count":"five","code":"toolong","color":"red","email":"nope","site":"https://example.com"}`))
	wantMentions(t, text, "count: must be an integer", "code: breaks rule len=3", "email: breaks rule email")
	if n := strings.Count(text, "count:"); n != 1 {
		t.Errorf("count is named %d times, want once: %s", n, text)
	}
	if c.calls.Load() != 0 {
		t.Error("the handler ran on invalid arguments")
	}
}

type hiddenEmbed struct {
	Secret string `json:"secret"`
}

type withHiddenEmbed struct {
	*hiddenEmbed
	Name string `json:"name"`
}

// TestArgsEmbeddedUnexportedPointer follows encoding/json, which skips an
// embedded pointer to an unexported struct type: its fields are neither
// required nor accepted, and decoding never panics on it.
func TestArgsEmbeddedUnexportedPointer(t *testing.T) {
	a := agency.MustNewAgent("Args")
	var got atomic.Value
	agency.Handle(a, "embed", func(_ context.Context, args withHiddenEmbed) (string, error) {
		got.Store(args.Name)
		return args.Name, nil
	})
	u := agency.MustNewAgent("User")
	joinLocal(t, a, u)
	if _, err := agency.Call[string](callCtx(t), u, "Args", "embed", rawArgs(`{"name":"x"}`)); err != nil {
		t.Fatalf("valid arguments: %v", err)
	}
	_, err := u.Request(callCtx(t), "Args", "embed", rawArgs(`{"name":"x","secret":"s"}`))
	ae := asActionError(t, err, agency.TypeInvalidArgs)
	wantMentions(t, ae.Text, "secret: unknown field")
}

// TestSendRejectsInvalidRawArgs holds space.Local, which never encodes, to
// the wire's rule: raw arguments must be one valid JSON object.
func TestSendRejectsInvalidRawArgs(t *testing.T) {
	a := agency.MustNewAgent("Args")
	agency.Handle(a, "pair", func(context.Context, struct{}) (int, error) { return 0, nil })
	u := agency.MustNewAgent("User")
	joinLocal(t, a, u)
	for _, raw := range []string{`{"a":`, `{"a":1}}`, `{"a":1} x`} {
		if _, err := u.Send(callCtx(t), "Args", "pair", rawArgs(raw)); !errors.Is(err, agency.ErrMalformedMessage) {
			t.Errorf("Send with args %s: %v, want ErrMalformedMessage", raw, err)
		}
	}
}

// TestArgsDepthLimit shows a recursive argument type (served with
// CustomHelp) is decoded to a bounded depth, so a deep chain is refused by
// name instead of costing time quadratic in its length.
func TestArgsDepthLimit(t *testing.T) {
	a := agency.MustNewAgent("Chain")
	agency.Handle(a, "link", func(_ context.Context, args linkArgs) (int, error) {
		n := 0
		for l := args.Next; l != nil; l = l.Next {
			n++
		}
		return n, nil
	}, agency.CustomHelp(map[string]any{"description": "counts links"}))
	u := agency.MustNewAgent("User")
	joinLocal(t, a, u)
	chain := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"next":`, n) + "{}" + strings.Repeat("}", n))
	}
	if got, err := agency.Call[int](callCtx(t), u, "Chain", "link", chain(10)); err != nil || got != 10 {
		t.Fatalf("a chain of 10: %d, %v", got, err)
	}
	_, err := u.Request(callCtx(t), "Chain", "link", chain(5000))
	ae := asActionError(t, err, agency.TypeInvalidArgs)
	wantMentions(t, ae.Text, "nested deeper than 64 objects")
}

// TestArgsNumberErrorsSayTheRange shows a whole number that does not fit an
// integer field is named with the field's range, and a bad map key as a key.
func TestArgsNumberErrorsSayTheRange(t *testing.T) {
	type rangeArgs struct {
		U uint8          `json:"u,omitempty"`
		I int8           `json:"i,omitempty"`
		N int            `json:"n,omitempty"`
		L []uint16       `json:"l,omitempty"`
		M map[int]string `json:"m,omitempty"`
	}
	a := agency.MustNewAgent("Args")
	agency.Handle(a, "range", func(context.Context, rangeArgs) (int, error) { return 0, nil })
	u := agency.MustNewAgent("User")
	joinLocal(t, a, u)
	_, err := u.Request(callCtx(t), "Args", "range", rawArgs(`{"u":300,"i":-129,"n":1.5,"l":[70000],"m":{"x":"y"}}`))
	ae := asActionError(t, err, agency.TypeInvalidArgs)
	wantMentions(t, ae.Text,
		"u: must be an integer from 0 to 255, not number 300",
		"i: must be an integer from -128 to 127, not number -129",
		"n: must be an integer, not number 1.5",
		"l: an element must be an integer from 0 to 65535, not number 70000",
		`m: a key must be an integer, not "x"`)
}

// TestArgsKeyGivenTwice refuses arguments that give a key twice, at every
// door: Send in process, and the decoder for nested objects, so that no
// approver or policy can be shown one value while the handler gets another.
func TestArgsKeyGivenTwice(t *testing.T) {
	c, u := newArgsAgents(t)
	if _, err := u.Send(callCtx(t), "Args", "pair", rawArgs(`{"a":1,"b":2,"a":3}`)); !errors.Is(err, agency.ErrMalformedMessage) {
		t.Errorf("Send with a key twice: %v, want ErrMalformedMessage", err)
	}
	text := badArgs(t, u, "nested", rawArgs(`{"inner":{"x":1,"x":2},"items":[{"y":"a","y":"b"}]}`))
	wantMentions(t, text, "inner.x: given twice", "items[0].y: given twice")
	if c.calls.Load() != 0 {
		t.Error("the handler ran")
	}
}
