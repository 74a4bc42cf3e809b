package agency_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// codecAddArgs is the argument struct of the wire format's example,
// {"to": "Calculator", "from": "User", "action": {"add": {"a": 1, "b": 2}}}.
type codecAddArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// roundTrip encodes m, decodes the result and returns both.
func roundTrip(t *testing.T, m *agency.Message) ([]byte, *agency.Message) {
	t.Helper()
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON(%+v): %v", m, err)
	}
	got, err := agency.DecodeMessage(b)
	if err != nil {
		t.Fatalf("DecodeMessage(%s): %v", b, err)
	}
	return b, got
}

func TestCodecRoundTripAction(t *testing.T) {
	meta := map[string]any{
		"thoughts": "I should add them",
		"big":      json.Number("123456789012345678901234567890"),
		"neg":      json.Number("-9007199254740993"),
		"float":    json.Number("1.000000000000000000001"),
		"flag":     true,
		"nothing":  nil,
		"trace": map[string]any{
			"span":  "s-1",
			"depth": json.Number("3"),
			"tags":  []any{"a", json.Number("2"), map[string]any{"deep": []any{}}},
		},
		"html": "<a & b>",
	}
	args := json.RawMessage(`{"a":1,"b":{"c":[1,2,3]},"text":"h\u00e9llo"}`)
	m := &agency.Message{
		To: "Calculator", From: "User", ID: "0b6c-1", ParentID: "p-0",
		Meta: meta, Action: "add", Args: args,
	}
	_, got := roundTrip(t, m)
	if got.To != m.To || got.From != m.From || got.ID != m.ID || got.ParentID != m.ParentID || got.Action != m.Action {
		t.Errorf("header fields: got %+v, want %+v", got, m)
	}
	if !reflect.DeepEqual(got.Meta, meta) {
		t.Errorf("meta: got %#v\nwant %#v", got.Meta, meta)
	}
	raw, ok := got.Args.(json.RawMessage)
	if !ok {
		t.Fatalf("args: got %T, want json.RawMessage", got.Args)
	}
	if !bytes.Equal(raw, args) {
		t.Errorf("args bytes: got %s, want %s", raw, args)
	}

	// Encoding the decoded message again gives the same bytes.
	b1, _ := m.MarshalJSON()
	b2, err := got.MarshalJSON()
	if err != nil || !bytes.Equal(b1, b2) {
		t.Errorf("re-encoded: %s (%v), want %s", b2, err, b1)
	}
}

func TestCodecBigIntegerInMetaStaysExact(t *testing.T) {
	const big = "98765432109876543210987654321"
	in := `{"to":"B","from":"A","action":{"__meta__":{"n":` + big + `,"nested":{"m":` + big + `}},"ping":{}}}`
	m, err := agency.DecodeMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := m.Meta["n"].(json.Number); !ok || string(n) != big {
		t.Errorf("meta n: got %#v, want json.Number(%s)", m.Meta["n"], big)
	}
	nested, _ := m.Meta["nested"].(map[string]any)
	if n, ok := nested["m"].(json.Number); !ok || string(n) != big {
		t.Errorf("meta nested.m: got %#v, want json.Number(%s)", nested["m"], big)
	}
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), big); got != 2 {
		t.Errorf("re-encoded %s holds the integer %d times, want 2", b, got)
	}
}

func TestCodecRoundTripGoArgs(t *testing.T) {
	for _, args := range []any{
		codecAddArgs{A: 1, B: 2},
		&codecAddArgs{A: 3, B: 4},
		map[string]any{"a": 1, "b": "two", "c": nil},
		map[string]int{"x": 1},
	} {
		want, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		_, got := roundTrip(t, &agency.Message{To: "B", From: "A", Action: "add", Args: args})
		raw, _ := got.Args.(json.RawMessage)
		if !bytes.Equal(raw, want) {
			t.Errorf("args %#v: decoded %s, want %s", args, raw, want)
		}
	}
}

func TestCodecMissingOrNullArgsMeanEmptyObject(t *testing.T) {
	m, err := agency.DecodeMessage([]byte(`{"to":"B","from":"A","action":{"add":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Args != nil {
		t.Errorf("args of null: got %#v, want nil (meaning {})", m.Args)
	}
	for _, args := range []any{nil, json.RawMessage(nil), json.RawMessage("null"), (*codecAddArgs)(nil)} {
		b, err := (&agency.Message{To: "B", From: "A", Action: "add", Args: args}).MarshalJSON()
		if err != nil {
			t.Fatalf("args %#v: %v", args, err)
		}
		if want := `{"to":"B","from":"A","action":{"__meta__":{},"add":{}}}`; string(b) != want {
			t.Errorf("args %#v: got %s, want %s", args, b, want)
		}
	}
	m, err = agency.DecodeMessage([]byte(`{"to":"B","from":"A","action":{"__meta__":null,"add":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "" || m.Meta != nil || string(m.Args.(json.RawMessage)) != "{}" {
		t.Errorf("null __meta__: got %+v", m)
	}
}

func TestCodecRoundTripResponse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
		want  string // the value's JSON
	}{
		{"number", 3, `3`},
		{"float", 2.5, `2.5`},
		{"string", "three", `"three"`},
		{"bool", false, `false`},
		{"null", nil, `null`},
		{"raw null", json.RawMessage("null"), `null`},
		{"array", []any{1, "a", nil}, `[1,"a",null]`},
		{"object", map[string]any{"k": map[string]any{"n": 1}}, `{"k":{"n":1}}`},
		{"struct", codecAddArgs{A: 1, B: 2}, `{"a":1,"b":2}`},
		{"big integer", json.Number("123456789012345678901234567890"), `123456789012345678901234567890`},
		{"raw", json.RawMessage(`{"x": [1, 2]}`), `{"x": [1, 2]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &agency.Message{To: "User", From: "Calc", ID: "r-1", ParentID: "q-1",
				Action: agency.ResponseAction, Args: tc.value}
			b, got := roundTrip(t, m)
			if want := `{"to":"User","from":"Calc","action":{"__meta__":{"id":"r-1","parent_id":"q-1"},"[response]":{"value":` +
				tc.want + `}}}`; string(b) != want {
				t.Errorf("wire: got %s, want %s", b, want)
			}
			if got.ID != "r-1" || got.ParentID != "q-1" || !got.IsResponse() || got.Err() != nil {
				t.Errorf("decoded %+v", got)
			}
			raw, ok := got.Args.(json.RawMessage)
			if !ok || string(raw) != tc.want {
				t.Errorf("value: got %#v, want %s", got.Args, tc.want)
			}
			v, err := agency.Value[any](got)
			if err != nil {
				t.Fatal(err)
			}
			var want any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, want) {
				t.Errorf("Value: got %#v, want %#v", v, want)
			}
		})
	}
}

// TestDecodeResponseValueAsEncodingJSON: the value of a [response] from
// the wire is what encoding/json reads into a field tagged "value": the
// key matched regardless of case, the last of several, others ignored.
func TestDecodeResponseValueAsEncodingJSON(t *testing.T) {
	for _, args := range []string{
		`{"value":1}`,
		`{"Value":"two"}`,
		`{"VALUE":3,"value":4}`,
		`{"value":4,"VaLuE":[5, 6]}`,
		`{"value":null}`,
		`{"other":1}`,
		`{}`,
		`{"valu\u0065":{"a": {"b": [7]}}}`,
		`{ "value" : { "x" : "}" } , "y" : 8 }`,
		`{"valueX":9,"xvalue":10}`,
		`{"v\u00e1lue":11}`,
		`null`,
	} {
		body := `{"to":"User","from":"Calc","action":{"__meta__":{"id":"r-1","parent_id":"q-1"},"[response]":` + args + `}}`
		m, err := agency.DecodeMessage([]byte(body))
		if err != nil {
			t.Errorf("%s: %v", args, err)
			continue
		}
		var want struct {
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal([]byte(args), &want); err != nil {
			t.Fatal(err)
		}
		got, _ := m.Args.(json.RawMessage)
		if m.Args != nil && got == nil {
			t.Errorf("%s: Args is a %T", args, m.Args)
		}
		if string(got) != string(want.Value) || (m.Args == nil) != (len(want.Value) == 0) {
			t.Errorf("%s: value %#v, encoding/json reads %q", args, m.Args, want.Value)
		}
	}
}

func TestCodecRoundTripError(t *testing.T) {
	for _, tc := range []struct {
		typ      agency.ErrorType
		sentinel error
	}{
		{agency.TypeNotFound, agency.ErrNotFound},
		{agency.TypePermissionDenied, agency.ErrPermissionDenied},
		{agency.TypeInvalidArgs, agency.ErrInvalidArgs},
		{agency.TypeActionFailed, agency.ErrActionFailed},
		{agency.TypeTimeout, agency.ErrTimeout},
	} {
		t.Run(string(tc.typ), func(t *testing.T) {
			text := `"Calculator.add" said "no" <because>`
			m := &agency.Message{To: "User", From: "Calculator", ID: "e-1", ParentID: "q-1",
				Action: agency.ErrorAction, Args: &agency.ActionError{Type: tc.typ, Text: text}}
			b, got := roundTrip(t, m)
			var wire struct {
				Action map[string]json.RawMessage `json:"action"`
			}
			if err := json.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			var payload map[string]string
			if err := json.Unmarshal(wire.Action[agency.ErrorAction], &payload); err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"type": string(tc.typ), "error": text}; !reflect.DeepEqual(payload, want) {
				t.Errorf("wire payload: got %v, want %v", payload, want)
			}
			err := got.Err()
			var ae *agency.ActionError
			if !errors.As(err, &ae) {
				t.Fatalf("Err() = %#v, want an *ActionError", err)
			}
			if ae.Type != tc.typ || ae.Text != text {
				t.Errorf("decoded error: %+v", ae)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("errors.Is(%v, %v) is false", err, tc.sentinel)
			}
			if got.ParentID != "q-1" || !got.IsResponse() {
				t.Errorf("decoded %+v", got)
			}
		})
	}
}

func TestCodecUnknownErrorTypeIsKept(t *testing.T) {
	m, err := agency.DecodeMessage([]byte(`{"to":"A","from":"B","action":{"[error]":{"type":"rate_limited","error":"slow down"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var ae *agency.ActionError
	if !errors.As(m.Err(), &ae) || ae.Type != "rate_limited" || ae.Text != "slow down" {
		t.Fatalf("got %#v", m.Err())
	}
	if !errors.Is(ae, agency.ErrActionFailed) {
		t.Errorf("an unknown type should match ErrActionFailed")
	}
}

func TestCodecWireBytes(t *testing.T) {
	m := &agency.Message{
		To: "Calculator", From: "User", ID: "0b6c",
		Meta:   map[string]any{"thoughts": "I should add them"},
		Action: "add", Args: codecAddArgs{A: 1, B: 2},
	}
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"to":"Calculator","from":"User","action":{"__meta__":{"id":"0b6c","thoughts":"I should add them"},"add":{"a":1,"b":2}}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	// json.Marshal and json.Unmarshal go through the same codec.
	b2, err := json.Marshal(m)
	if err != nil || string(b2) != want {
		t.Errorf("json.Marshal: %s, %v", b2, err)
	}
	var back agency.Message
	if err := json.Unmarshal([]byte(want), &back); err != nil {
		t.Fatal(err)
	}
	if back.To != "Calculator" || back.From != "User" || back.ID != "0b6c" || back.Action != "add" ||
		back.Meta["thoughts"] != "I should add them" || string(back.Args.(json.RawMessage)) != `{"a":1,"b":2}` {
		t.Errorf("json.Unmarshal: %+v", back)
	}
	if s := m.String(); s != want {
		t.Errorf("String: %s", s)
	}

	errMsg := &agency.Message{To: "User", From: "Calculator", ID: "e", ParentID: "0b6c", Action: agency.ErrorAction,
		Args: &agency.ActionError{Type: agency.TypePermissionDenied, Text: "no"}}
	b, err = errMsg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	const wantErr = `{"to":"User","from":"Calculator","action":{"__meta__":{"id":"e","parent_id":"0b6c"},"[error]":{"type":"permission_denied","error":"no"}}}`
	if string(b) != wantErr {
		t.Errorf("got  %s\nwant %s", b, wantErr)
	}
}

func TestCodecAcceptsValidIDs(t *testing.T) {
	long := strings.Repeat("x", 255)
	for _, tc := range []struct{ to, from string }{
		{agency.Broadcast, "A"},
		{long, long},
		{"Calculator-1.v2_x", "ünïcödé"},
		{"amq", "xamq.y"},
	} {
		m := &agency.Message{To: tc.to, From: tc.from, Action: "ping"}
		_, got := roundTrip(t, m)
		if got.To != tc.to || got.From != tc.from {
			t.Errorf("got %q→%q, want %q→%q", got.From, got.To, tc.from, tc.to)
		}
	}
}

// wireText builds a message with the given to, from and action object texts.
func wireText(to, from, action string) string {
	return `{"to":` + to + `,"from":` + from + `,"action":` + action + `}`
}

func TestDecodeMessageRejectsMalformed(t *testing.T) {
	long := `"` + strings.Repeat("x", 256) + `"`
	ok := `{"add":{}}`
	for _, tc := range []struct {
		name, in string
		want     []string // substrings of the error text
	}{
		{"array", `[1,2]`, []string{"JSON object", "array"}},
		{"string", `"hello"`, []string{"JSON object", "string"}},
		{"number", `42`, []string{"JSON object", "number"}},
		{"bool", `true`, []string{"JSON object", "boolean"}},
		{"null", `null`, []string{"JSON object", "null"}},
		{"empty", ``, []string{"empty"}},
		{"blank", " \n\t", []string{"empty"}},
		{"truncated", `{"to":"A","from":"B","action":{"add":`, []string{"not valid JSON"}},
		{"not JSON", `{to: A}`, []string{"not valid JSON"}},
		{"trailing object", wireText(`"A"`, `"B"`, ok) + `{}`, []string{"after top-level value"}},
		{"trailing brace", wireText(`"A"`, `"B"`, ok) + `}`, []string{"after top-level value"}},
		{"trailing bracket", wireText(`"A"`, `"B"`, ok) + `]`, []string{"after top-level value"}},
		{"trailing word", wireText(`"A"`, `"B"`, ok) + ` x`, []string{"after top-level value"}},
		{"unknown key", `{"to":"A","from":"B","action":{"add":{}},"extra":1}`, []string{`unknown key "extra"`}},
		{"key in other case", `{"TO":"A","from":"B","action":{"add":{}}}`, []string{`unknown key "TO"`}},
		{"no to", `{"from":"B","action":{"add":{}}}`, []string{`no "to"`}},
		{"to null", wireText(`null`, `"B"`, ok), []string{`no "to"`}},
		{"to number", wireText(`1`, `"B"`, ok), []string{`"to" must be a string`}},
		{"no from", `{"to":"A","action":{"add":{}}}`, []string{`no "from"`}},
		{"from object", wireText(`"A"`, `{}`, ok), []string{`"from" must be a string`}},
		{"no action", `{"to":"A","from":"B"}`, []string{`no "action"`}},
		{"action null", wireText(`"A"`, `"B"`, `null`), []string{`no "action"`}},
		{"action array", wireText(`"A"`, `"B"`, `[]`), []string{`"action" must be an object`}},
		{"action string", wireText(`"A"`, `"B"`, `"add"`), []string{`"action" must be an object`}},
		{"action empty", wireText(`"A"`, `"B"`, `{}`), []string{"names no action"}},
		{"only meta", wireText(`"A"`, `"B"`, `{"__meta__":{"id":"x"}}`), []string{"names no action"}},
		{"two actions", wireText(`"A"`, `"B"`, `{"add":{},"sub":{}}`), []string{"2 actions", "add", "sub", "exactly one"}},
		{"args key twice", wireText(`"A"`, `"B"`, `{"add":{"a":1,"b":2,"a":3}}`), []string{`give "a" twice`}},
		{"same action twice", wireText(`"A"`, `"B"`, `{"add":{"a":1},"add":{"a":2}}`), []string{`action "add" given twice`}},
		{"meta twice", wireText(`"A"`, `"B"`, `{"__meta__":{},"add":{},"__meta__":{}}`), []string{`key "__meta__" given twice`}},
		{"to twice", `{"to":"A","to":"C","from":"B","action":{"add":{}}}`, []string{`key "to" given twice`}},
		{"action twice", `{"to":"A","from":"B","action":{"add":{}},"action":{"sub":{}}}`, []string{`key "action" given twice`}},
		{"args array", wireText(`"A"`, `"B"`, `{"add":[1,2]}`), []string{`arguments of "add" must be an object`}},
		{"args string", wireText(`"A"`, `"B"`, `{"add":"a=1"}`), []string{`arguments of "add" must be an object`}},
		{"args number", wireText(`"A"`, `"B"`, `{"add":1}`), []string{`arguments of "add" must be an object`}},
		{"args true", wireText(`"A"`, `"B"`, `{"add":true}`), []string{`arguments of "add" must be an object`}},
		{"reserved __x", wireText(`"A"`, `"B"`, `{"__x":{}}`), []string{"__x", "reserved"}},
		{"reserved [foo]", wireText(`"A"`, `"B"`, `{"[foo]":{}}`), []string{"[foo]", "reserved"}},
		{"empty action name", wireText(`"A"`, `"B"`, `{"":{}}`), []string{"action name", "empty"}},
		{"meta array", wireText(`"A"`, `"B"`, `{"__meta__":[],"add":{}}`), []string{"__meta__ must be an object"}},
		{"meta string", wireText(`"A"`, `"B"`, `{"__meta__":"id","add":{}}`), []string{"__meta__ must be an object"}},
		{"id number", wireText(`"A"`, `"B"`, `{"__meta__":{"id":7},"add":{}}`), []string{"__meta__.id must be a string"}},
		{"id null", wireText(`"A"`, `"B"`, `{"__meta__":{"id":null},"add":{}}`), []string{"__meta__.id must be a string"}},
		{"parent_id object", wireText(`"A"`, `"B"`, `{"__meta__":{"parent_id":{}},"add":{}}`), []string{"__meta__.parent_id must be a string"}},
		{"deadline number", wireText(`"A"`, `"B"`, `{"__meta__":{"deadline":5},"add":{}}`), []string{"__meta__.deadline must be an RFC 3339 time, not 5"}},
		{"deadline not a time", wireText(`"A"`, `"B"`, `{"__meta__":{"deadline":"soon"},"add":{}}`), []string{"__meta__.deadline must be an RFC 3339 time, not soon"}},
		{"no_reply string", wireText(`"A"`, `"B"`, `{"__meta__":{"no_reply":"yes"},"add":{}}`), []string{"__meta__.no_reply must be a boolean, not yes"}},
		{"no_reply 1", wireText(`"A"`, `"B"`, `{"__meta__":{"no_reply":1},"add":{}}`), []string{"__meta__.no_reply must be a boolean, not 1"}},
		{"error without type", wireText(`"A"`, `"B"`, `{"[error]":{"error":"x"}}`), []string{`[error] without a "type"`}},
		{"error empty type", wireText(`"A"`, `"B"`, `{"[error]":{"type":"","error":"x"}}`), []string{`[error] without a "type"`}},
		{"error null", wireText(`"A"`, `"B"`, `{"[error]":null}`), []string{`[error] without a "type"`}},
		{"error type number", wireText(`"A"`, `"B"`, `{"[error]":{"type":1}}`), []string{"[error]"}},
		{"error array", wireText(`"A"`, `"B"`, `{"[error]":[]}`), []string{`arguments of "[error]" must be an object`}},
		{"response array", wireText(`"A"`, `"B"`, `{"[response]":[3]}`), []string{`arguments of "[response]" must be an object`}},

		{"to empty", wireText(`""`, `"B"`, ok), []string{"to:", "empty"}},
		{"to star inside", wireText(`"a*b"`, `"B"`, ok), []string{"to:", `'*'`}},
		{"to hash", wireText(`"a#b"`, `"B"`, ok), []string{"to:", `'#'`}},
		{"to space", wireText(`"a b"`, `"B"`, ok), []string{"to:", `' '`}},
		{"to tab", wireText(`"a\tb"`, `"B"`, ok), []string{"to:", `'\t'`}},
		{"to newline", wireText(`"a\n"`, `"B"`, ok), []string{"to:", `'\n'`}},
		{"to amq.", wireText(`"amq.gen"`, `"B"`, ok), []string{"to:", "amq."}},
		{"to long", wireText(long, `"B"`, ok), []string{"to:", "256 bytes", "255"}},
		{"from empty", wireText(`"A"`, `""`, ok), []string{"from:", "empty"}},
		{"from star", wireText(`"A"`, `"*"`, ok), []string{"from:", `'*'`}},
		{"from star inside", wireText(`"A"`, `"x*"`, ok), []string{"from:", `'*'`}},
		{"from hash", wireText(`"A"`, `"#"`, ok), []string{"from:", `'#'`}},
		{"from space", wireText(`"A"`, `" B"`, ok), []string{"from:", `' '`}},
		{"from nbsp", wireText(`"A"`, `"a\u00a0b"`, ok), []string{"from:", "contains"}},
		{"from amq.", wireText(`"A"`, `"amq.B"`, ok), []string{"from:", "amq."}},
		{"from long", wireText(`"A"`, long, ok), []string{"from:", "256 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := agency.DecodeMessage([]byte(tc.in))
			if err == nil {
				t.Fatalf("DecodeMessage(%s) = %+v, want an error", tc.in, m)
			}
			if m != nil {
				t.Errorf("DecodeMessage returned a message with its error: %+v", m)
			}
			if !errors.Is(err, agency.ErrMalformedMessage) {
				t.Errorf("error %q does not wrap ErrMalformedMessage", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			// UnmarshalJSON fails the same way and leaves its target alone.
			keep := agency.Message{To: "keep", Action: "keep"}
			if err := json.Unmarshal([]byte(tc.in), &keep); err == nil {
				t.Errorf("json.Unmarshal accepted %s", tc.in)
			}
			if keep.To != "keep" || keep.Action != "keep" {
				t.Errorf("a failed decode changed its target: %+v", keep)
			}
		})
	}
}

// arrayMarshaler encodes to a JSON array although it is a struct.
type arrayMarshaler struct{}

func (arrayMarshaler) MarshalJSON() ([]byte, error) { return []byte(`[1]`), nil }

func TestMarshalRefusesUndecodable(t *testing.T) {
	good := func() *agency.Message { return &agency.Message{To: "A", From: "B", Action: "add"} }
	for _, tc := range []struct {
		name string
		edit func(m *agency.Message)
		want string
	}{
		{"to empty", func(m *agency.Message) { m.To = "" }, "to:"},
		{"to star inside", func(m *agency.Message) { m.To = "x*" }, "to:"},
		{"to hash", func(m *agency.Message) { m.To = "x#" }, "to:"},
		{"to space", func(m *agency.Message) { m.To = "x y" }, "to:"},
		{"to amq.", func(m *agency.Message) { m.To = "amq.x" }, "to:"},
		{"to long", func(m *agency.Message) { m.To = strings.Repeat("a", 256) }, "to:"},
		{"to invalid UTF-8", func(m *agency.Message) { m.To = "a\xffb" }, "to:"},
		{"from empty", func(m *agency.Message) { m.From = "" }, "from:"},
		{"from broadcast", func(m *agency.Message) { m.From = agency.Broadcast }, "from:"},
		{"from hash", func(m *agency.Message) { m.From = "#" }, "from:"},
		{"action empty", func(m *agency.Message) { m.Action = "" }, "action name"},
		{"action reserved __", func(m *agency.Message) { m.Action = "__meta__" }, "reserved"},
		{"action reserved [", func(m *agency.Message) { m.Action = "[foo]" }, "reserved"},
		{"args slice", func(m *agency.Message) { m.Args = []int{1, 2} }, "JSON object"},
		{"args string", func(m *agency.Message) { m.Args = `{"a":1}` }, "JSON object"},
		{"args number", func(m *agency.Message) { m.Args = 5 }, "JSON object"},
		{"args bool", func(m *agency.Message) { m.Args = true }, "JSON object"},
		{"args pointer to int", func(m *agency.Message) { n := 1; m.Args = &n }, "JSON object"},
		{"args raw array", func(m *agency.Message) { m.Args = json.RawMessage(`[1]`) }, "JSON object"},
		{"args raw invalid", func(m *agency.Message) { m.Args = json.RawMessage(`{"a":`) }, "invalid JSON"},
		{"meta id", func(m *agency.Message) { m.Meta = map[string]any{"id": "x"} }, `"id" is the framework's`},
		{"meta parent_id", func(m *agency.Message) { m.Meta = map[string]any{"parent_id": "x"} }, `"parent_id" is the framework's`},
		{"meta deadline", func(m *agency.Message) { m.Meta = map[string]any{"deadline": "soon"} }, `"deadline" is the framework's`},
		{"meta no_reply", func(m *agency.Message) { m.Meta = map[string]any{"no_reply": true} }, `"no_reply" is the framework's`},
		{"args marshal to array", func(m *agency.Message) { m.Args = arrayMarshaler{} }, "JSON object"},
		{"args unencodable", func(m *agency.Message) { m.Args = map[string]any{"c": make(chan int)} }, "args"},
		{"error without ActionError", func(m *agency.Message) { m.Action, m.Args = agency.ErrorAction, "boom" }, "*ActionError"},
		{"error nil", func(m *agency.Message) { m.Action, m.Args = agency.ErrorAction, nil }, "*ActionError"},
		{"error nil pointer", func(m *agency.Message) { m.Action, m.Args = agency.ErrorAction, (*agency.ActionError)(nil) }, "*ActionError"},
		{"error plain error", func(m *agency.Message) { m.Action, m.Args = agency.ErrorAction, errors.New("x") }, "*ActionError"},
		{"error without type", func(m *agency.Message) {
			m.Action, m.Args = agency.ErrorAction, &agency.ActionError{Text: "x"}
		}, "type"},
		{"response unencodable", func(m *agency.Message) { m.Action, m.Args = agency.ResponseAction, func() {} }, "response value"},
		{"response invalid raw", func(m *agency.Message) {
			m.Action, m.Args = agency.ResponseAction, json.RawMessage(`{`)
		}, "response value"},
		{"meta unencodable", func(m *agency.Message) { m.Meta = map[string]any{"f": func() {}} }, "__meta__"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := good()
			tc.edit(m)
			b, err := m.MarshalJSON()
			if err == nil {
				t.Fatalf("MarshalJSON(%+v) = %s, want an error", m, b)
			}
			if !errors.Is(err, agency.ErrMalformedMessage) {
				t.Errorf("error %q does not wrap ErrMalformedMessage", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if s := m.String(); !strings.HasPrefix(s, "<unencodable message") {
				t.Errorf("String() = %q", s)
			}
		})
	}
}

// TestDecodeMessageSpacingAndEscapes decodes a message written with white
// space between every token, escaped keys and strings holding the
// characters the decoder's walk treats specially.
func TestDecodeMessageSpacingAndEscapes(t *testing.T) {
	in := " \n{ \"to\" :\t\"A\" , \"from\" : \"B\" ,\r\n \"action\" : { \"__meta__\" : { \"id\" : \"x\" , " +
		"\"note\" : \"}]\\\",{[\" } , \"a\\u0064d\" : { \"s\" : \"{\\\"}\" , \"l\" : [ 1 , { \"k\" : \"]\" } ] } } } \n"
	m, err := agency.DecodeMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if m.To != "A" || m.From != "B" || m.ID != "x" || m.Action != "add" {
		t.Fatalf("got to=%q from=%q id=%q action=%q", m.To, m.From, m.ID, m.Action)
	}
	if got := m.Meta["note"]; got != "}]\",{[" {
		t.Errorf("meta note = %q", got)
	}
	var args struct {
		S string `json:"s"`
		L []any  `json:"l"`
	}
	if err := json.Unmarshal(m.Args.(json.RawMessage), &args); err != nil {
		t.Fatal(err)
	}
	if args.S != `{"}` || len(args.L) != 2 {
		t.Errorf("args = %+v", args)
	}
}

// TestDecodeMessageKeepsNoReference shows a decoded message owns its bytes:
// a transport may reuse its read buffer as soon as DecodeMessage returns.
// The strings of a decoded message come out the same whether they were
// escaped on the wire or not, mixed in any order; an id given twice in
// __meta__ is the last one, as it always was.
func TestDecodeMessageStrings(t *testing.T) {
	in := `{"action":{"__meta__":{"parent_id":"p\u002d1","id":"first","deadline":"2026-11-26T01:02:03.5Z","id":"second"},` +
		`"[response]":{"value":1}},"from":"Calc\u00e9","to":"User"}`
	m, err := agency.DecodeMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if m.To != "User" || m.From != "Calcé" || m.ID != "second" || m.ParentID != "p-1" {
		t.Errorf("got to=%q from=%q id=%q parent_id=%q", m.To, m.From, m.ID, m.ParentID)
	}
	if want := time.Date(2026, 11, 26, 1, 2, 3, 5e8, time.UTC); !m.Deadline.Equal(want) {
		t.Errorf("deadline %v, want %v", m.Deadline, want)
	}
}

func TestDecodeMessageKeepsNoReference(t *testing.T) {
	buf := []byte(`{"to":"A","from":"B","action":{"add":{"a":1}}}`)
	m, err := agency.DecodeMessage(buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = ' '
	}
	if got := string(m.Args.(json.RawMessage)); got != `{"a":1}` {
		t.Fatalf("args after the buffer was reused: %q", got)
	}
}

// TestCodecDeadline: a message's deadline travels as __meta__.deadline, an
// RFC 3339 time in UTC, and comes back as the same instant.
func TestCodecDeadline(t *testing.T) {
	dl := time.Date(2026, 11, 21, 8, 30, 15, 123456789, time.FixedZone("CET", 3600))
	m := &agency.Message{To: "Calculator", From: "User", ID: "x", Deadline: dl, Action: "add"}
	data, got := roundTrip(t, m)
	if want := `"__meta__":{"id":"x","deadline":"2026-11-21T07:30:15.123456789Z"}`; !strings.Contains(string(data), want) {
		t.Errorf("wire form %s does not hold %s", data, want)
	}
	if !got.Deadline.Equal(dl) || got.Meta != nil {
		t.Errorf("decoded deadline %v (meta %v), want %v", got.Deadline, got.Meta, dl)
	}
	for _, bad := range []string{`"tomorrow"`, `17`, `null`} {
		in := `{"to":"A","from":"B","action":{"__meta__":{"deadline":` + bad + `},"add":{}}}`
		if _, err := agency.DecodeMessage([]byte(in)); !errors.Is(err, agency.ErrMalformedMessage) {
			t.Errorf("deadline %s: %v, want ErrMalformedMessage", bad, err)
		}
	}
}

// TestCodecNoReply: a sender that takes no responses says so as
// __meta__.no_reply, a boolean, absent when false.
func TestCodecNoReply(t *testing.T) {
	m := &agency.Message{To: "Calculator", From: "User", ID: "x", NoReply: true, Action: "add"}
	data, got := roundTrip(t, m)
	if want := `"__meta__":{"id":"x","no_reply":true}`; !strings.Contains(string(data), want) {
		t.Errorf("wire form %s does not hold %s", data, want)
	}
	if !got.NoReply || got.Meta != nil {
		t.Errorf("decoded NoReply %v (meta %v), want true", got.NoReply, got.Meta)
	}
	m.NoReply = false
	if data, _ := roundTrip(t, m); strings.Contains(string(data), "no_reply") {
		t.Errorf("wire form %s mentions no_reply", data)
	}
	for _, bad := range []string{`"yes"`, `1`, `null`} {
		in := `{"to":"A","from":"B","action":{"__meta__":{"no_reply":` + bad + `},"add":{}}}`
		if _, err := agency.DecodeMessage([]byte(in)); !errors.Is(err, agency.ErrMalformedMessage) {
			t.Errorf("no_reply %s: %v, want ErrMalformedMessage", bad, err)
		}
	}
}
