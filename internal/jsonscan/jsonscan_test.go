package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var samples = []string{
	``, ` `, `{}`, ` { } `, `[]`, `[1,2]`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{a:1}`,
	`"x"`, `"\u00e9\n\"\\\/\b\f\r\t"`, `"\u00g0"`, `"\x"`, `"a` + "\x01" + `"`, `"a` + "\x7f\xff" + `"`,
	`"unterminated`, `"\`, `"\u12`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-12.5e3`, `.5`, `+1`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `nullnull`, `1 2`, `{"a":[{"b":null}]}`,
	`{"to":"Bob","from":"Al","action":{"__meta__":{"id":"x"},"tick":{"n":1}}}`, "\t\r\n[ 1 , 2 ]\n",
	`[[[[]]]]`, `[[[[]]]`, `{"a":{"b":{}}`, `{"a":"b"}}`, "\"\xe9\"", `[1 2]`, `{"a":1,"a":2}`,
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, s := range samples {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", s, got, want)
		}
	}
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			closing := map[string]string{"[": "]", `{"a":`: "}"}[open]
			s := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closing, depth))
			if got, want := Valid(s), json.Valid(s); got != want {
				t.Errorf("Valid at depth %d of %q = %v, encoding/json says %v", depth, open, got, want)
			}
		}
	}
}

// SkipValue and Members agree with encoding/json on where valid values
// end and what an object's members are.
func TestWalk(t *testing.T) {
	obj := []byte(`{"a" : "x\\\"y\\" , "b":[1,{"c":"}"}], "c":-1.5e3,"d":{"e":"\\"},"f":true}`)
	var want map[string]json.RawMessage
	if err := json.Unmarshal(obj, &want); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := Members(obj, func(k string, raw []byte) error {
		n++
		if !bytes.Equal(raw, want[k]) {
			t.Errorf("member %q: %s, want %s", k, raw, want[k])
		}
		return nil
	})
	if err != nil || n != len(want) {
		t.Errorf("%d members, %v; want %d", n, err, len(want))
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range samples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ok := Valid(b)
		if ok != json.Valid(b) {
			t.Fatalf("Valid(%q) = %v, encoding/json disagrees", b, ok)
		}
		if !ok {
			return
		}
		v := bytes.TrimSpace(b)
		if end := SkipValue(v, 0); end != len(v) {
			t.Fatalf("SkipValue(%q) = %d, want %d", v, end, len(v))
		}
		if v[0] == '"' {
			var want string
			_ = json.Unmarshal(v, &want)
			if got, err := Unquote(v); err != nil || got != want {
				t.Fatalf("Unquote(%q) = %q, %v; want %q", v, got, err, want)
			}
		}
		if v[0] == '{' {
			var want map[string]json.RawMessage
			dup := false
			seen := map[string]bool{}
			_ = Members(v, func(k string, raw []byte) error {
				dup = dup || seen[k]
				seen[k] = true
				return nil
			})
			if err := json.Unmarshal(v, &want); err == nil && !dup {
				_ = Members(v, func(k string, raw []byte) error {
					if !bytes.Equal(raw, want[k]) {
						t.Fatalf("member %q of %q: %s, want %s", k, v, raw, want[k])
					}
					return nil
				})
			}
		}
	})
}

func BenchmarkValid(b *testing.B) {
	doc := []byte(`{"to":"Bob","from":"Al","action":{"__meta__":{"id":"x"},"tick":{"n":1,"data":"` + strings.Repeat("x", 4000) + `"}}}`)
	b.Run("jsonscan", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for range b.N {
			Valid(doc)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for range b.N {
			json.Valid(doc)
		}
	})
}
