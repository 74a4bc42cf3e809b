package agency

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a bit too long", 10, "a bit t…"},
		{"ééééé", 8, "éé…"}, // never half a character
	} {
		got := truncate(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	if got := elide("head.middle.middle.middle.tail", 20); got != "head.mi…iddle.tail" || len(got) > 20 {
		t.Errorf("elide = %q (%d bytes)", got, len(got))
	}
	if n := len(limitErrorText(strings.Repeat("x", 1<<20))); n != maxErrorText {
		t.Errorf("limitErrorText of 1 MiB: %d bytes, want %d", n, maxErrorText)
	}
}

func TestProblemsNameTenAndCountTheRest(t *testing.T) {
	var p problems
	for i := range 25 {
		if p.room() != (i < maxProblems) {
			t.Fatalf("room() before problem %d: %v", i+1, p.room())
		}
		p.add(string(rune('a' + i)))
	}
	if got, want := p.join(", "), "a, b, c, d, e, f, g, h, i, j, … and 15 more"; got != want {
		t.Errorf("join = %q, want %q", got, want)
	}
	var one problems
	one.add("x")
	if got := one.join("; "); got != "x" {
		t.Errorf("join of one = %q", got)
	}
}

// Errors about a message's shape name ten problems at most, and cut long
// names.
func TestDecodeErrorsAreBounded(t *testing.T) {
	var actions, keys []string
	for i := range 12 {
		actions = append(actions, `"act`+string(rune('a'+i))+`":{}`)
		keys = append(keys, `"key`+string(rune('a'+i))+`":1`)
	}
	_, err := DecodeMessage([]byte(`{"to":"A","from":"B","action":{` + strings.Join(actions, ",") + `}}`))
	if err == nil || !strings.Contains(err.Error(), "names 12 actions (acta, actb, actc, actd, acte, actf, actg, acth, acti, actj, … and 2 more)") {
		t.Errorf("12 actions: %v", err)
	}
	_, err = DecodeMessage([]byte(`{"to":"A","from":"B","action":{"x":{}},` + strings.Join(keys, ",") + `}`))
	if err == nil || !strings.Contains(err.Error(), `"keyj", … and 2 more`) {
		t.Errorf("12 unknown keys: %v", err)
	}
	long := strings.Repeat("y", 1<<20)
	for _, in := range []string{
		`{"to":"A","from":"B","action":{"x":{}},"` + long + `":1}`,
		`{"to":"A","from":"B","action":{"__` + long + `":{}}}`,
		`{"to":"A","from":"B","action":{"x":{"` + long + `":1,"` + long + `":2}}}`,
		`{"to":"A","from":"B","action":{"__meta__":{"deadline":"` + long + `"},"x":{}}}`,
	} {
		_, err := DecodeMessage([]byte(in))
		if err == nil {
			t.Errorf("a message with a name of 1 MiB decoded")
		} else if len(err.Error()) > 1024 {
			t.Errorf("a message with a name of 1 MiB: error of %d bytes, want one under 1 KiB", len(err.Error()))
		}
	}
}
