package agency_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// FuzzDecodeMessage checks that no input makes DecodeMessage panic, that
// every failure wraps ErrMalformedMessage, and that whatever it accepts
// encodes again and decodes to the same message.
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range []string{
		// valid
		`{"to":"Calculator","from":"User","action":{"__meta__":{"id":"0b6c","thoughts":"I should add them"},"add":{"a":1,"b":2}}}`,
		`{"to":"*","from":"User","action":{"help":null}}`,
		`{"to":"User","from":"Calculator","action":{"__meta__":{"id":"r","parent_id":"0b6c"},"[response]":{"value":3}}}`,
		`{"to":"User","from":"Calculator","action":{"__meta__":{"id":"r","parent_id":"0b6c"},"[response]":{}}}`,
		`{"to":"User","from":"Calculator","action":{"[response]":{"value":{"x":[1,"a",null,true]}}}}`,
		`{"to":"User","from":"Calculator","action":{"[error]":{"type":"permission_denied","error":"\"Calculator.add\" not permitted for \"User\""}}}`,
		`{"to":"B","from":"A","action":{"__meta__":{"n":123456789012345678901234567890,"deep":{"a":[{"b":1e400}]}},"x":{}}}`,
		`{"to":"B","from":"A","action":{"__meta__":{"s":"\u00e9\ud800<>&"},"x":{"k":"\u0000"}}}`,
		` {"action":{"x":{ "a" : [ 1 , 2 ] }},"from":"A","to":"B"} `,
		`{"to":"ünï","from":"A\u00e9","action":{"n\u00e4me":{}}}`,
		// malformed
		``, `null`, `[]`, `"x"`, `1`, `true`, `{`, `{}`,
		`{"to":"A","from":"B","action":{"add":{}}}}`,
		`{"to":"A","from":"B","action":{"add":{}}} {}`,
		`{"to":"A","from":"B","action":{"add":{}},"x":1}`,
		`{"TO":"A","from":"B","action":{"add":{}}}`,
		`{"to":"A","from":"B","action":{"__meta__":{}}}`,
		`{"to":"A","from":"B","action":{"a":{},"b":{}}}`,
		`{"to":"A","from":"B","action":{"add":[1]}}`,
		`{"to":"A","from":"B","action":{"__x":{}}}`,
		`{"to":"A","from":"B","action":{"__meta__":[],"add":{}}}`,
		`{"to":"A","from":"B","action":{"__meta__":{"id":1},"add":{}}}`,
		`{"to":"A","from":"B","action":{"[error]":{"error":"x"}}}`,
		`{"to":"amq.x","from":"B","action":{"add":{}}}`,
		`{"to":"A","from":"*","action":{"add":{}}}`,
		`{"to":"a b","from":"B#","action":{"add":{}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := agency.DecodeMessage(data)
		if err != nil {
			if m != nil {
				t.Fatalf("DecodeMessage returned a message with its error %v", err)
			}
			if !errors.Is(err, agency.ErrMalformedMessage) {
				t.Fatalf("error %q does not wrap ErrMalformedMessage", err)
			}
			if !strings.HasPrefix(err.Error(), agency.ErrMalformedMessage.Error()+": ") {
				t.Fatalf("error %q says nothing after the sentinel", err)
			}
			return
		}
		b1, err := m.MarshalJSON()
		if err != nil {
			t.Fatalf("decoded %q to %+v, which does not encode: %v", data, m, err)
		}
		m2, err := agency.DecodeMessage(b1)
		if err != nil {
			t.Fatalf("encoded %+v as %s, which does not decode: %v", m, b1, err)
		}
		b2, err := m2.MarshalJSON()
		if err != nil {
			t.Fatalf("second encoding of %+v: %v", m2, err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("not stable:\ninput  %q\nfirst  %s\nsecond %s", data, b1, b2)
		}
		if m2.To != m.To || m2.From != m.From || m2.ID != m.ID || m2.ParentID != m.ParentID || m2.Action != m.Action {
			t.Fatalf("header changed: %+v became %+v", m, m2)
		}
	})
}
