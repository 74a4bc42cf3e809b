package amqpspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Every message this library writes survives the trip through
// operand/agency's shape unchanged: Go↔Go stays lossless in the
// Python-compatible mode.
func TestPythonShapeRoundTrip(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	msgs := []*agency.Message{
		{To: "Calculator", From: "User", ID: "1", Action: "add", Args: map[string]int{"a": 1, "b": 2}},
		{To: "Calculator", From: "User", ID: "2", Action: "add"},
		{To: agency.Broadcast, From: "User", ID: "3", Action: "help", NoReply: true},
		{To: "Calculator", From: "User", ID: "4", Deadline: deadline, Action: "add",
			Meta: map[string]any{"thoughts": "I should add", "conversation": "c-1", "n": json.Number("12345678901234567890")},
			Args: json.RawMessage(`{"a":1.5,"b":{"deep":[1,"ü",null]}}`)},
		{To: "User", From: "Calculator", ID: "5", ParentID: "4", Action: agency.ResponseAction, Args: 3},
		{To: "User", From: "Calculator", ID: "6", ParentID: "4", Action: agency.ResponseAction},
		{To: "User", From: "Calculator", ID: "7", ParentID: "4", Action: agency.ResponseAction, Args: map[string]any{"name": "x", "args": "y"}},
		{To: "User", From: "Calculator", ID: "8", ParentID: "4", Action: agency.ErrorAction,
			Args: &agency.ActionError{Type: agency.TypePermissionDenied, Text: `"Calculator.add" not permitted for "User"`}},
		{To: "Ünïcode-ü", From: "Sender<&>", ID: "9\u2028", Action: "name", Args: map[string]string{"name": "args"}},
	}
	for _, m := range msgs {
		want, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		py, err := goToPython(want)
		if err != nil {
			t.Fatalf("goToPython(%s): %v", want, err)
		}
		var shape struct {
			Meta   map[string]json.RawMessage `json:"meta"`
			From   string                     `json:"from"`
			To     string                     `json:"to"`
			Action map[string]json.RawMessage `json:"action"`
		}
		if err := json.Unmarshal(py, &shape); err != nil || shape.From != m.From || shape.To != m.To ||
			len(shape.Action) != 2 || string(shape.Action["name"]) != mustJSON(t, m.Action) || shape.Action["args"] == nil {
			t.Errorf("%s: not in operand/agency's shape: %s", want, py)
		}
		if string(shape.Meta["id"]) != mustJSON(t, m.ID) {
			t.Errorf("%s: meta.id in %s", want, py)
		}
		back, isPy, err := pythonToGo(py)
		if err != nil || !isPy {
			t.Fatalf("pythonToGo(%s): %v, %v", py, isPy, err)
		}
		got, err := agency.DecodeMessage(back)
		if err != nil {
			t.Fatalf("decoding %s: %v", back, err)
		}
		again, _ := got.MarshalJSON()
		if !bytes.Equal(again, want) {
			t.Errorf("round trip:\n got %s\nwant %s", again, want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Messages as operand/agency 1.6 writes them (json.dumps of its Message,
// keys in its order, with its spacing) decode to what they mean.
func TestPythonMessagesDecode(t *testing.T) {
	tests := []struct {
		name, body string
		want       agency.Message
	}{
		{"request", `{"meta": {"id": "u-1"}, "from": "Py", "to": "Calc", "action": {"name": "add", "args": {"a": 1, "b": 2}}}`,
			agency.Message{To: "Calc", From: "Py", ID: "u-1", Action: "add", Args: json.RawMessage(`{"a": 1, "b": 2}`)}},
		{"no args", `{"meta": {"id": "u-2"}, "from": "Py", "to": "*", "action": {"name": "help"}}`,
			agency.Message{To: "*", From: "Py", ID: "u-2", Action: "help"}},
		{"null args and parent", `{"meta": {"id": "u-3", "parent_id": null}, "from": "Py", "to": "Calc", "action": {"name": "help", "args": null}}`,
			agency.Message{To: "Calc", From: "Py", ID: "u-3", Action: "help"}},
		{"open meta", `{"meta": {"id": "u-4", "thoughts": "why not", "deadline": "2030-01-02T03:04:05Z"}, "from": "Py", "to": "Calc", "action": {"name": "add", "args": {}}}`,
			agency.Message{To: "Calc", From: "Py", ID: "u-4", Deadline: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Meta: map[string]any{"thoughts": "why not"}, Action: "add", Args: json.RawMessage(`{}`)}},
		{"response", `{"meta": {"parent_id": "g-1", "id": "u-5"}, "from": "Py", "to": "Go", "action": {"name": "[response]", "args": {"value": {"x": [1, 2]}}}}`,
			agency.Message{To: "Go", From: "Py", ID: "u-5", ParentID: "g-1", Action: agency.ResponseAction, Args: json.RawMessage(`{"x": [1, 2]}`)}},
		{"error", `{"meta": {"parent_id": "g-2", "id": "u-6"}, "from": "Py", "to": "Go", "action": {"name": "[error]", "args": {"error": "ValueError: boom"}}}`,
			agency.Message{To: "Go", From: "Py", ID: "u-6", ParentID: "g-2", Action: agency.ErrorAction, Args: &agency.ActionError{Type: agency.TypeActionFailed, Text: "ValueError: boom"}}},
		{"error typed by a Go space", `{"meta":{"id":"g-3","parent_id":"u-7"},"from":"Go","to":"Py","action":{"name":"[error]","args":{"type":"timeout","error":"too late"}}}`,
			agency.Message{To: "Py", From: "Go", ID: "g-3", ParentID: "u-7", Action: agency.ErrorAction, Args: &agency.ActionError{Type: agency.TypeTimeout, Text: "too late"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, isPy, err := pythonToGo([]byte(tt.body))
			if err != nil || !isPy {
				t.Fatalf("pythonToGo: %v, %v", isPy, err)
			}
			got, err := agency.DecodeMessage(body)
			if err != nil {
				t.Fatalf("decoding %s: %v", body, err)
			}
			gotJSON, _ := got.MarshalJSON()
			wantJSON, _ := tt.want.MarshalJSON()
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("got  %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
}

// What is not operand/agency's shape is left to this library's decoder;
// what is, but is broken, is an error that says what is wrong.
func TestPythonMessagesRefused(t *testing.T) {
	for _, body := range []string{
		`{"to":"Calc","from":"Go","action":{"__meta__":{"id":"1"},"add":{"a":1}}}`,
		`{"to":"Calc","from":"Go","action":{"name":{"first":"x"}}}`, // an action called "name"
		`not json`,
		`[1,2]`,
	} {
		if out, isPy, err := pythonToGo([]byte(body)); isPy || out != nil || err != nil {
			t.Errorf("pythonToGo(%s) = %s, %v, %v; want it left alone", body, out, isPy, err)
		}
	}
	for body, want := range map[string]string{
		`{"meta": {"id": "1"}, "from": "Py", "to": "Calc", "action": {"name": "add"}, "extra": 1}`:            `unknown key "extra"`,
		`{"meta": {"id": "1"}, "from": "Py", "to": "Calc", "action": {"name": "add", "kwargs": {}}}`:          `unknown key "kwargs" in "action"`,
		`{"meta": "1", "from": "Py", "to": "Calc", "action": {"name": "add"}}`:                                `"meta" must be an object`,
		`{"meta": {"id": "1"}, "from": "Py", "to": "Calc", "action": "add"}`:                                  `"action" must be an object`,
		`{"meta": {"id": "1"}, "from": "Py", "to": "Calc", "action": {"args": {}}}`:                           `action.name must be a string`,
		`{"meta": {"id": "1"}, "from": "Py", "from": "Calc", "to": "Calc", "action": {"name": "add"}}`:        `"from" given twice`,
		`{"meta": {"id": "1"}, "from": "Py", "to": "Calc", "action": {"name": "__meta__"}}`:                   `reserved`,
		`{"meta": {"id": "1"}, "from": "Py", "to": "Go", "action": {"name": "[error]", "args": {"type": 7}}}`: `[error]`,
	} {
		_, isPy, err := pythonToGo([]byte(body))
		if !isPy || !errors.Is(err, agency.ErrMalformedMessage) || !strings.Contains(err.Error(), want) {
			t.Errorf("pythonToGo(%s): %v, %v; want an error saying %s", body, isPy, err, want)
		}
	}
}

// operand/agency's [error] carries only a text, "<exception class>:
// <message>"; the type is inferred from the texts its Agent raises.
func TestPythonErrorType(t *testing.T) {
	for text, want := range map[string]agency.ErrorType{
		`AttributeError: "nope" not found on "Py"`:                                  agency.TypeNotFound,
		`PermissionError: "Py.secret" not permitted`:                                agency.TypePermissionDenied,
		`TypeError: PyAgent.shout() got an unexpected keyword argument 'txt'`:       agency.TypeInvalidArgs,
		`TypeError: PyAgent.shout() missing 1 required positional argument: 'text'`: agency.TypeInvalidArgs,
		`ValueError: boom`:                                              agency.TypeActionFailed,
		`ValueError: user not found`:                                    agency.TypeActionFailed,
		`AttributeError: 'NoneType' object has no attribute 'x'`:        agency.TypeActionFailed,
		`TypeError: unsupported operand type(s) for +: 'int' and 'str'`: agency.TypeActionFailed,
		``: agency.TypeActionFailed,
	} {
		if got := pythonErrorType(text); got != want {
			t.Errorf("pythonErrorType(%q) = %s, want %s", text, got, want)
		}
	}
}

// help asked by an operand/agency agent is answered in its help format,
// built from the schemas; a CustomHelp entry stays as it is.
func TestPythonHelpFormat(t *testing.T) {
	type addArgs struct {
		A    float64 `json:"a" jsonschema:"description=first addend"`
		B    float64 `json:"b" jsonschema:"description=second addend"`
		Note string  `json:"note,omitempty" validate:"max=80"`
	}
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(context.Context, addArgs) (float64, error) { return 0, nil },
		agency.Describe("Adds two numbers"), agency.Returns("the sum"), agency.Example(addArgs{A: 1, B: 2}))
	agency.Handle(calc, "reset", func(context.Context, struct{}) (bool, error) { return true, nil })
	agency.Handle(calc, "custom", func(context.Context, struct{}) (bool, error) { return true, nil },
		agency.CustomHelp(map[string]any{"anything": "goes", "args": 1}))
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	ctx := context.Background()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		t.Fatal(err)
	}
	r, err := user.Request(ctx, "Calculator", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	py, err := pythonHelpAnswer(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"add":{"description":"Adds two numbers","args":{"a":{"type":"number","description":"first addend"},"b":{"type":"number","description":"second addend"},"note":{"type":"string"}},"returns":{"type":"number","description":"the sum"}},` +
		`"custom":{"anything":"goes","args":1},` +
		`"reset":{"args":{},"returns":{"type":"boolean"}}}`
	if got := string(py.Args.(json.RawMessage)); got != want {
		t.Errorf("help in operand/agency's format:\n got %s\nwant %s", got, want)
	}
	if py.ParentID != r.ParentID || py.From != r.From || py == r {
		t.Errorf("the answer is not a copy of the original")
	}
}

// peek tells the shapes apart, and answers of either shape, from whatever
// can be read.
func TestPeek(t *testing.T) {
	tests := []struct {
		body string
		want envelope
	}{
		{`{"meta": {"id": "1"}, "from": "Py", "to": "Go", "action": {"name": "add"}}`, envelope{python: true, from: "Py", id: "1", action: "add"}},
		{`{"meta": null, "from": "Py"}`, envelope{python: true, from: "Py"}},
		{`{"from": "Py", "action": {"name": "[response]"}}`, envelope{python: true, answer: true, from: "Py", action: "[response]"}},
		{`{"meta": {}, "from": "Py", "action": {"name": "[error]", "args": 5}}`, envelope{python: true, answer: true, from: "Py", action: "[error]"}},
		{`{"from": "Go", "action": {"__meta__": {"id": "1"}, "[error]": []}}`, envelope{answer: true, from: "Go"}},
		{`{"from": "Go", "action": {"add": [1]}}`, envelope{from: "Go"}},
		{`{"from": "Go", "action": {"name": {"x": 1}}}`, envelope{from: "Go"}},
		{`garbage`, envelope{}},
	}
	for _, tt := range tests {
		if got := peek([]byte(tt.body)); got != tt.want {
			t.Errorf("peek(%s) = %+v, want %+v", tt.body, got, tt.want)
		}
	}
}

// Only the answer to the help request an operand/agency agent made is
// converted, once; the memory of requests is bounded.
func TestPythonHelpRemembered(t *testing.T) {
	p := newPyState(InteropOperandAgency)
	ask := &agency.Message{To: "Go", From: "Py", ID: "h-1", Action: agency.HelpAction}
	p.askedHelp("Go", ask)
	other := &agency.Message{To: "Py", From: "Go2", ParentID: "h-1", Action: agency.ResponseAction}
	if p.answersHelp(other) {
		t.Error("an answer from another agent counts")
	}
	answer := &agency.Message{To: "Py", From: "Go", ParentID: "h-1", Action: agency.ResponseAction}
	if !p.answersHelp(answer) {
		t.Error("the answer does not count")
	}
	if p.answersHelp(answer) {
		t.Error("the answer counts twice")
	}
	for i := range maxPyHelp + 10 {
		p.askedHelp("Go", &agency.Message{From: "Py", ID: "x-" + strings.Repeat("i", i%7) + string(rune('a'+i%26)) + time.Duration(i).String(), Action: agency.HelpAction})
	}
	if n := len(p.asked); n > maxPyHelp {
		t.Errorf("%d requests remembered, bound %d", n, maxPyHelp)
	}
	if newPyState("") != nil {
		t.Error("state without the mode")
	}
}

// BenchmarkInteropCodec measures what the Python-compatible mode adds to
// encoding and decoding one request: this library's shape (off) against
// operand/agency's, written and read by the space's own code.
//
//	go test -run '^$' -bench InteropCodec -count 6 ./amqpspace/
func BenchmarkInteropCodec(b *testing.B) {
	type args struct {
		A    float64 `json:"a"`
		B    float64 `json:"b"`
		Note string  `json:"note"`
	}
	m := &agency.Message{To: "Calculator", From: "User", ID: agency.NewID(), Deadline: time.Now().Add(time.Minute),
		Meta: map[string]any{"conversation": "c-1"}, Action: "add", Args: args{1, 2, strings.Repeat("x", 100)}}
	for _, mode := range []Interop{"", InteropOperandAgency} {
		name := string(mode)
		if name == "" {
			name = "off"
		}
		b.Run(name, func(b *testing.B) {
			s := &Space{py: newPyState(mode), log: slog.New(slog.DiscardHandler)}
			mem := &member{s: s, id: "Calculator"}
			b.ReportAllocs()
			for b.Loop() {
				body, err := s.encode(m)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := mem.decode(amqp.Delivery{Body: body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
