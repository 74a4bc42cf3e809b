package openai

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	gopenai "github.com/sashabaranov/go-openai"
)

var validToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkNames checks that every key gets a valid name of its own and that
// the names map back to the keys.
func checkNames(t *testing.T, keys []toolKey) map[toolKey]string {
	t.Helper()
	names := toolNames(keys)
	byName := map[string]toolKey{}
	got := map[toolKey]string{}
	for i, n := range names {
		if !validToolName.MatchString(n) {
			t.Errorf("%q.%q: invalid name %q", keys[i].Agent, keys[i].Action, n)
		}
		if other, ok := byName[n]; ok {
			t.Errorf("%q names both %+v and %+v", n, other, keys[i])
		}
		byName[n] = keys[i]
		got[keys[i]] = n
	}
	return got
}

func TestToolNamesReadable(t *testing.T) {
	keys := []toolKey{{"Calculator", "add"}, {"host-1", "read_file"}, {"Weather", "forecast"}}
	names := checkNames(t, keys)
	for _, k := range keys {
		if want := k.Agent + "__" + k.Action; names[k] != want {
			t.Errorf("%+v: %q, want %q", k, names[k], want)
		}
	}
}

func TestToolNamesHostile(t *testing.T) {
	long := strings.Repeat("x", 255)
	keys := []toolKey{
		{"svc.calc", "add"},       // a dot
		{"svc:calc", "add"},       // sanitizes like the one above
		{"svc_calc", "add"},       // and like both, but is readable
		{"Café", "ajouter"},       // non-ASCII
		{"计算器", "加"},              // nothing ASCII at all
		{"计算机", "加"},              // the same length, sanitizes alike
		{long, "add"},             // a 255-byte id
		{long[:254] + "y", "add"}, // differs only at the end
		{"A", long},               // a 255-byte action name
		{"a__b", "c"},             // readable, but "a__b__c"…
		{"a", "b__c"},             // …is also this one's readable name
		{strings.Repeat("a", 40), strings.Repeat("b", 30)}, // readable parts, too long together
		{"amq-like/agent|with\"quotes'", "do it"},
		{"Calculator", "add"},
	}
	names := checkNames(t, keys)

	if names[toolKey{"svc_calc", "add"}] != "svc_calc__add" {
		t.Errorf("the readable key lost its readable name: %q", names[toolKey{"svc_calc", "add"}])
	}
	if names[toolKey{"Calculator", "add"}] != "Calculator__add" {
		t.Errorf("Calculator.add is %q", names[toolKey{"Calculator", "add"}])
	}
	for _, k := range []toolKey{{"a__b", "c"}, {"a", "b__c"}} {
		if names[k] == "a__b__c" {
			t.Errorf("%+v kept the ambiguous name", k)
		}
	}
	// Hashed names still show what they stand for.
	if n := names[toolKey{"svc.calc", "add"}]; !strings.HasPrefix(n, "svc_calc__add_") {
		t.Errorf("svc.calc.add is %q", n)
	}
	if n := names[toolKey{long, "add"}]; !strings.HasPrefix(n, "xxxx") || !strings.Contains(n, "__add_") {
		t.Errorf("the long id gives %q", n)
	}
	t.Logf("names: %v", names)

	// The same set in another order gets the same names.
	rev := make([]toolKey, len(keys))
	for i, k := range keys {
		rev[len(keys)-1-i] = k
	}
	for k, n := range checkNames(t, rev) {
		if names[k] != n {
			t.Errorf("%+v: %q in one order, %q in the other", k, names[k], n)
		}
	}
}

// Random ids from an alphabet rich in characters that sanitize alike.
func TestToolNamesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aA_-.:/é漢__b")
	word := func(max int) string {
		n := 1 + r.IntN(max)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for round := range 50 {
		seen := map[toolKey]bool{}
		var keys []toolKey
		for range 200 {
			k := toolKey{word(1 + round%80), word(6)}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		checkNames(t, keys)
	}
}

func TestToolSet(t *testing.T) {
	specs := []toolSpec{
		{Agent: "svc.calc", Action: "add", Description: "d1", Params: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"}}}`)},
		{Agent: "Weather", Action: "forecast", Description: "d2", Params: json.RawMessage(`{"type":"object"}`)},
	}
	ts, err := newToolSet(specs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts.tools) != 2 {
		t.Fatalf("%d tools", len(ts.tools))
	}
	for i, tool := range ts.tools {
		if tool.Type != gopenai.ToolTypeFunction || tool.Function.Description != specs[i].Description {
			t.Errorf("tool %d: %+v", i, tool)
		}
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			Function struct {
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(b, &back); err != nil || !sameJSON(back.Function.Parameters, specs[i].Params) {
			t.Errorf("tool %d encodes its parameters as %s", i, back.Function.Parameters)
		}
		if k := ts.byName[tool.Function.Name]; k != (toolKey{specs[i].Agent, specs[i].Action}) {
			t.Errorf("%q maps back to %+v", tool.Function.Name, k)
		}
	}
}

// Help entries that CustomHelp shaped otherwise still become tools: any
// object as arguments, the entry itself in the description.
func TestToolSpecsCustomHelp(t *testing.T) {
	help := map[string]json.RawMessage{
		"add":    json.RawMessage(`{"description":"Adds","args":{"type":"object","properties":{}},"access":"permitted"}`),
		"legacy": json.RawMessage(`{"usage":"send {\"n\": 1}"}`),
		"odd":    json.RawMessage(`{"description":"Odd","args":"a string, not a schema"}`),
		"weird":  json.RawMessage(`{"description":42}`),
	}
	specs := toolSpecs("Svc", help)
	if len(specs) != 4 {
		t.Fatalf("%d specs", len(specs))
	}
	for _, s := range specs {
		switch s.Action {
		case "add":
			if !sameJSON(s.Params, []byte(`{"type":"object","properties":{}}`)) || !strings.Contains(s.Description, "Adds") {
				t.Errorf("add: %+v", s)
			}
		default:
			if string(s.Params) != `{"type":"object"}` || !strings.Contains(s.Description, string(help[s.Action])) {
				t.Errorf("%s: %+v", s.Action, s)
			}
		}
		if !strings.Contains(s.Description, `"Svc"`) {
			t.Errorf("%s: the description does not name the agent: %q", s.Action, s.Description)
		}
	}
}

// An operand/agency (Python) agent lists its arguments where a schema
// would be; they become the properties of an object schema, which a model
// API accepts. A Go schema with an argument named "type" stays as it is.
func TestToolSpecsPythonHelp(t *testing.T) {
	help := map[string]json.RawMessage{
		"shout": json.RawMessage(`{"description":"Shouts","args":{"text":{"type":"string","description":"what to shout"}},"returns":{"type":"string"}}`),
		"typed": json.RawMessage(`{"description":"Takes an argument named type","args":{"type":{"type":"string"}}}`),
		"none":  json.RawMessage(`{"description":"No arguments","args":{}}`),
		"go":    json.RawMessage(`{"description":"Go","args":{"type":"object","properties":{"type":{"type":"string"}},"required":["type"]}}`),
	}
	want := map[string]string{
		"shout": `{"type":"object","properties":{"text":{"type":"string","description":"what to shout"}}}`,
		"typed": `{"type":"object","properties":{"type":{"type":"string"}}}`,
		"none":  `{"type":"object","properties":{}}`,
		"go":    `{"type":"object","properties":{"type":{"type":"string"}},"required":["type"]}`,
	}
	for _, s := range toolSpecs("PyAgent", help) {
		if !sameJSON(s.Params, []byte(want[s.Action])) {
			t.Errorf("%s: parameters %s, want %s", s.Action, s.Params, want[s.Action])
		}
	}
}

func TestTrimHistory(t *testing.T) {
	msg := func(role, content string) Message { return Message{Role: role, Content: content} }
	conv := []Message{
		msg("user", "1"), msg("assistant", "2"),
		msg("user", "3"),
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "a"}, {ID: "b"}}},
		{Role: "tool", ToolCallID: "a"}, {Role: "tool", ToolCallID: "b"},
		msg("assistant", "4"),
	}
	for n, want := range map[int]string{
		100: "user,assistant,user,assistant,tool,tool,assistant",
		5:   "user,assistant,tool,tool,assistant",
		4:   "assistant,tool,tool,assistant",
		3:   "assistant", // never tool results without their call
		2:   "assistant",
		1:   "assistant",
	} {
		var roles []string
		for _, m := range trimHistory(conv, n) {
			roles = append(roles, m.Role)
		}
		if got := strings.Join(roles, ","); got != want {
			t.Errorf("History(%d): %s, want %s", n, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	for n := range 21 {
		c := clip(s, n)
		if !strings.HasPrefix(s, strings.TrimSuffix(c, "…")) || !utf8.ValidString(c) {
			t.Errorf("clip(%d) = %q", n, c)
		}
	}
}
