package agency

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// stdRead is what encoding/json reads from data: the value, with numbers
// as json.Number so that none is lost, or false where it finds no single
// valid JSON value.
func stdRead(data []byte) (any, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// stdWrite spells v as encoding/json does, HTML characters unescaped.
func stdWrite(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // a value encoding/json read encodes again
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// duplicateKeys reports whether some object in the valid JSON data gives a
// key twice, as encoding/json decodes keys. The codec refuses those where
// encoding/json keeps the last, so the two are compared only without them.
func duplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []map[string]bool // the keys of each object open; nil for an array
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	keyNext := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, map[string]bool{})
				keyNext = true
				continue
			case '[':
				stack = append(stack, nil)
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		case string:
			if keyNext && expectKey() {
				if stack[len(stack)-1][t] {
					return true
				}
				stack[len(stack)-1][t] = true
				keyNext = false
				continue
			}
		}
		// A value ended: a key comes next inside an object.
		keyNext = expectKey()
	}
}

// sameJSON reports whether a and b are the same JSON value as encoding/json
// reads them.
func sameJSON(a, b []byte) bool {
	va, okA := stdRead(a)
	vb, okB := stdRead(b)
	return okA && okB && reflect.DeepEqual(va, vb)
}

// FuzzDecodeMessageAgreesWithEncodingJSON checks the codec's hand-written
// JSON reading against encoding/json: it never accepts what encoding/json
// finds invalid; what it accepts, it reads as encoding/json does (the
// header, the action and its arguments); and whether it accepts depends
// only on the JSON value, not on its spelling (white space, escapes, key
// order, numbers' form), so that it refuses nothing for a reason of syntax
// that encoding/json accepts. Where the input gives a key twice the codec
// refuses it by design and the last check is left out.
//
//	go test -run='^$' -fuzz=FuzzDecodeMessageAgreesWithEncodingJSON -fuzztime=30s ./agency/
func FuzzDecodeMessageAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"to":"Calculator","from":"User","action":{"__meta__":{"id":"0b6c","thoughts":"I should add them"},"add":{"a":1,"b":2}}}`,
		`{"to":"*","from":"User","action":{"help":null}}`,
		`{"to":"User","from":"Calculator","action":{"__meta__":{"id":"r","parent_id":"0b6c"},"[response]":{"value":3}}}`,
		`{"to":"User","from":"Calculator","action":{"[error]":{"type":"permission_denied","error":"no"}}}`,
		` {"action":{"x":{ "a" : [ 1 , 2e3, -0.5, 1E-2 ] }},"from":"A","to":"B"} `,
		`{"to":"\u0041","from":"\/B","action":{"n\u00e4me":{"k\"":"\ud83d\ude00"}}}`,
		`{"to":"A","from":"B","action":{"__meta__":{"id":"\u0069d"},"x":{}}}`,
		`{"to":"A","from":"B","action":{"x":{"s":"\ud800"}}}`,
		"{\"to\":\"A\",\"from\":\"B\",\"action\":{\"x\":{\"s\":\"\xff\"}}}",
		"{\"to\":\"A\xff\",\"from\":\"B\",\"action\":{\"x\":{}}}",
		`{"to":"A","from":"B","action":{"x":{}},"to":"C"}`,
		`{"to":"A","from":"B","action":{"x":{"k":1,"k":2}}}`,
		`{"to":"A","from":"B","action":{"x":{}}} x`,
		`{"to":"A","from":"B","action":{"x":{"n":01}}}`,
		`{"to":"A","from":"B","action":{"x":{"s":"a	b"}}}`,
		`{"TO":"A","from":"B","action":{"x":{}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMessage(data)
		std, valid := stdRead(data)
		if !valid {
			if err == nil {
				t.Fatalf("DecodeMessage accepted %q, which encoding/json finds invalid", data)
			}
			return
		}
		if err == nil {
			checkRead(t, data, m, std)
		}
		if duplicateKeys(data) {
			return
		}
		respelled := stdWrite(std)
		m2, err2 := DecodeMessage(respelled)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("the same JSON value, spelled two ways, decoded differently:\n%q: %v\n%q: %v", data, err, respelled, err2)
		}
		if err == nil && (m.To != m2.To || m.From != m2.From || m.ID != m2.ID || m.ParentID != m2.ParentID || m.Action != m2.Action) {
			t.Fatalf("the same JSON value, spelled two ways, decoded to\n%+v\n%+v", m, m2)
		}
	})
}

// checkRead checks that the message the codec decoded from data holds what
// encoding/json reads there (std).
func checkRead(t *testing.T, data []byte, m *Message, std any) {
	t.Helper()
	obj, _ := std.(map[string]any)
	action, _ := obj["action"].(map[string]any)
	if obj == nil || action == nil {
		t.Fatalf("DecodeMessage accepted %q, whose action encoding/json does not read as an object", data)
	}
	if obj["to"] != m.To || obj["from"] != m.From {
		t.Fatalf("DecodeMessage read to %q, from %q in %q; encoding/json reads %q, %q", m.To, m.From, data, obj["to"], obj["from"])
	}
	meta, _ := action["__meta__"].(map[string]any)
	if id, _ := meta["id"].(string); id != m.ID {
		t.Fatalf("DecodeMessage read the id %q in %q; encoding/json reads %q", m.ID, data, id)
	}
	if pid, _ := meta["parent_id"].(string); pid != m.ParentID {
		t.Fatalf("DecodeMessage read the parent id %q in %q; encoding/json reads %q", m.ParentID, data, pid)
	}
	args, ok := action[m.Action]
	if !ok {
		t.Fatalf("DecodeMessage read the action %q in %q; encoding/json reads the keys %v", m.Action, data, keys(action))
	}
	if raw, isRaw := m.Args.(json.RawMessage); isRaw && !m.IsResponse() {
		if !sameJSON(raw, stdWrite(args)) {
			t.Fatalf("DecodeMessage read the arguments %s in %q; encoding/json reads %s", raw, data, stdWrite(args))
		}
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// Arguments that FuzzDecodeArgsAgreesWithEncodingJSON decodes: a field of
// each kind the decoder reads itself (string, integers, number, boolean)
// or hands to encoding/json (pointer, nested struct, slice of structs, map,
// interface), required and optional.
type (
	diffArgs struct {
		I   int            `json:"i"`
		U   uint8          `json:"u,omitempty"`
		F   float64        `json:"f,omitempty"`
		B   bool           `json:"b,omitempty"`
		S   string         `json:"s,omitempty"`
		P   *string        `json:"p,omitempty"`
		In  *diffInner     `json:"in,omitempty"`
		L   []diffInner    `json:"l,omitempty"`
		M   map[string]int `json:"m,omitempty"`
		Any any            `json:"any,omitempty"`
	}
	diffInner struct {
		X    int        `json:"x"`
		Next *diffInner `json:"next,omitempty"`
	}
)

// FuzzDecodeArgsAgreesWithEncodingJSON checks the decoding of arguments,
// which reads plain values itself, against encoding/json (with unknown
// fields disallowed, as the decoder does): it never accepts what
// encoding/json refuses, and what it accepts it decodes to the same value;
// whether it accepts depends only on the JSON value, not on its spelling;
// and it accepts every object that encoding/json reads exactly (one that
// encodes back to the same JSON value: no field missing, no key in another
// case). The decoder refuses, by design, a key given twice, a key in
// another case than the field's and a required field that is null, where
// encoding/json takes them.
//
//	go test -run='^$' -fuzz=FuzzDecodeArgsAgreesWithEncodingJSON -fuzztime=30s ./agency/
func FuzzDecodeArgsAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"i":1}`,
		`{"i":-12,"u":255,"f":1.5e3,"b":true,"s":"abc","p":"x","in":{"x":1,"next":{"x":2}},"l":[{"x":3},{"x":4}],"m":{"a":1},"any":[1,"a",null,{"k":true}]}`,
		`{"i":1,"u":256}`, `{"i":1,"u":-1}`, `{"i":1.0}`, `{"i":1e2}`, `{"i":9223372036854775808}`, `{"i":-0}`,
		`{"i":1,"f":1e400}`, `{"i":1,"f":-0.0}`, `{"i":"1"}`, `{"i":true}`, `{"i":null}`, `{}`, `null`, `[]`, `1`,
		`{"i":1,"s":"\u00e9\n\"\\\/"}`, `{"i":1,"s":"\ud800"}`, "{\"i\":1,\"s\":\"\xff\"}", `{"i":1,"s":1}`,
		`{"I":1}`, `{"i":1,"x":2}`, `{"i":1,"i":2}`, `{"\u0069":1}`, `{"i":1,"in":{"x":1,"y":2}}`, `{"i":1,"in":null}`,
		`{"i":1,"l":[null]}`, `{"i":1,"l":{}}`, `{"i":1,"m":{"a":1,"a":2}}`, `{"i":1,"b":"true"}`, `{"i":1,"p":null}`,
		` { "i" : 1 } `, `{"i":1} x`, `{"i":01}`, `{"i":1,}`,
	} {
		f.Add([]byte(seed))
	}
	info, err := typeInfoFor(reflect.TypeFor[diffArgs]())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got diffArgs
		err := decodeJSONArgs(info, raw, &got)
		std, valid := stdRead(raw)
		if !valid {
			if err == nil {
				t.Fatalf("accepted %q, which encoding/json finds invalid", raw)
			}
			return
		}
		var want diffArgs
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		stdErr := dec.Decode(&want)
		if err == nil {
			if stdErr != nil {
				t.Fatalf("accepted %q, which encoding/json refuses: %v", raw, stdErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %q to\n%+v\nencoding/json to\n%+v", raw, got, want)
			}
		}
		if duplicateKeys(raw) {
			return
		}
		respelled := stdWrite(std)
		var got2 diffArgs
		err2 := decodeJSONArgs(info, respelled, &got2)
		if (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(got, got2) {
			t.Fatalf("the same JSON value, spelled two ways, decoded differently:\n%q: %+v, %v\n%q: %+v, %v", raw, got, err, respelled, got2, err2)
		}
		if stdErr == nil && err != nil {
			if back, _ := stdRead(stdWrite(want)); reflect.DeepEqual(back, std) {
				t.Fatalf("refused %q, which encoding/json reads exactly: %v", raw, err)
			}
		}
	})
}
