package agency

import (
	"encoding/json"
	"reflect"
	"testing"
)

type (
	fastLevel string
	fastArgs  struct {
		S   string    `json:"s,omitempty"`
		L   fastLevel `json:"l,omitempty"`
		I   int       `json:"i,omitempty"`
		I8  int8      `json:"i8,omitempty"`
		U   uint16    `json:"u,omitempty"`
		F   float64   `json:"f,omitempty"`
		F32 float32   `json:"f32,omitempty"`
		B   bool      `json:"b,omitempty"`
	}
)

// The fields decodeObject sets itself come out as encoding/json sets them,
// and what it leaves to encoding/json fails as before.
func TestFastFieldsMatchEncodingJSON(t *testing.T) {
	info, err := typeInfoFor(reflect.TypeFor[fastArgs]())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		`{"s":"plain","l":"info"}`, `{"s":"esc\"aped\u00e9\n"}`, "{\"s\":\"bad \xff utf-8\"}", `{"s":""}`, `{"s":5}`,
		`{"i":0}`, `{"i":-42}`, `{"i":1.5}`, `{"i":1e3}`, `{"i":-0}`, `{"i":9223372036854775807}`, `{"i":9223372036854775808}`,
		`{"i8":127}`, `{"i8":128}`, `{"i8":-128}`, `{"u":65535}`, `{"u":65536}`, `{"u":-1}`, `{"i":"1"}`, `{"i":true}`,
		`{"f":1.5e-3}`, `{"f":-0.0}`, `{"f":1e400}`, `{"f32":3.4e39}`, `{"f32":0.1}`, `{"f":"1"}`,
		`{"b":true}`, `{"b":false}`, `{"b":1}`, `{"b":"true"}`,
	} {
		var fast, ref fastArgs
		errFast := decodeJSONArgs(info, []byte(in), &fast)
		errRef := json.Unmarshal([]byte(in), &ref)
		if (errFast == nil) != (errRef == nil) {
			t.Errorf("%s: error %v, encoding/json %v", in, errFast, errRef)
			continue
		}
		if errFast == nil && fast != ref {
			t.Errorf("%s: %+v, encoding/json %+v", in, fast, ref)
		}
	}
}
