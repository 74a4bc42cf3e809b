package agency

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// budget is what receiving one input may cost: a second, plus fifty times
// what encoding/json takes to parse the same bytes into an any. Decoding and
// validating cost time linear in the input's size, a small multiple of that
// parse (the wide seeds take 2 to 10 times as long), and the reference
// slows down with the machine, or the race detector, as the receiving does.
// A cost quadratic in the number of keys is hundreds of times the parse for
// the wide seeds: tens of seconds. The budget is a safety net between the
// two, not a measure of speed.
func budget(data []byte) time.Duration {
	start := time.Now()
	var v any
	_ = json.Unmarshal(data, &v)
	return time.Second + 50*time.Since(start)
}

// Argument types that FuzzReceive decodes into: a field of each kind the
// decoder treats apart (scalar, rule, nested struct, slice of structs, map,
// recursion).
type (
	fuzzArgs struct {
		A     int            `json:"a"`
		S     string         `json:"s,omitempty" validate:"omitempty,max=8"`
		Inner *fuzzInner     `json:"inner,omitempty"`
		List  []fuzzInner    `json:"list,omitempty" validate:"omitempty,dive"`
		Tags  map[string]int `json:"tags,omitempty"`
	}
	fuzzInner struct {
		X    int        `json:"x" validate:"min=0"`
		Next *fuzzInner `json:"next,omitempty"`
	}
)

// receive does to data what an agent does to a message from the wire
// before its handler runs: decode it, then decode and validate its
// arguments. It returns the text of the error its sender would read.
func receive(data []byte) string {
	m, err := DecodeMessage(data)
	if err != nil {
		return err.Error()
	}
	if m.IsResponse() || m.Action == HelpAction {
		return ""
	}
	info, err := typeInfoFor(reflect.TypeFor[fuzzArgs]())
	if err != nil {
		panic(err)
	}
	var args fuzzArgs
	if err := decodeArgs(info, m.Args, &args); err != nil {
		return fmt.Sprintf("invalid arguments for %q: %v", m.To+"."+m.Action, err)
	}
	return ""
}

// wideSeeds are inputs of about 1 MiB with 100,000 keys where the wire
// format allows many: arguments, action names, top-level keys, meta keys,
// list elements; and one key of 1 MiB.
func wideSeeds() [][]byte {
	const n = 100_000
	keys := func(format string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, format, i)
		}
		return b.String()
	}
	head := `{"to":"A","from":"B","action":`
	return [][]byte{
		[]byte(head + `{"act":{"a":1,` + keys(`"k%06d":0`) + `}}}`),
		[]byte(head + `{` + keys(`"act%06d":{}`) + `}}`),
		[]byte(`{"to":"A","from":"B",` + keys(`"k%06d":0`) + `,"action":{"act":{}}}`),
		[]byte(head + `{"__meta__":{` + keys(`"m%06d":0`) + `},"act":{"a":1}}}`),
		[]byte(head + `{"act":{"a":1,"list":[` + keys(`{"x":-%d,"y":0}`) + `]}}}`),
		[]byte(head + `{"act":{"a":1,"tags":{` + keys(`"t%06d":"x"`) + `}}}}`),
		[]byte(head + `{"act":{"a":1,"k":0,"k":1,` + keys(`"k%06d":0`) + `}}}`),
		[]byte(head + `{"act":{"a":1,"` + strings.Repeat("x", 1<<20) + `":0}}}`),
		[]byte(head + `{"act":{"a":1,"inner":` + strings.Repeat(`{"x":1,"next":`, 20_000) + `{}` + strings.Repeat(`}`, 20_000) + `}}}`),
	}
}

// FuzzReceive checks that whatever comes from the wire costs an agent time
// linear in its size (no input takes longer than its budget) and that
// the error its sender gets back is at most 4 KiB. The seeds are the wide
// shapes of wideSeeds; run it with
//
//	go test -run='^$' -fuzz=FuzzReceive -fuzztime=1m ./agency/
func FuzzReceive(f *testing.F) {
	f.Add([]byte(`{"to":"A","from":"B","action":{"act":{"a":1,"s":"short","inner":{"x":1},"list":[{"x":2}],"tags":{"t":1}}}}`))
	f.Add([]byte(`{"to":"A","from":"B","action":{"act":{"a":"one","s":"far too long","inner":{"x":-1,"z":0},"list":[{"x":-2},{"w":1}]}}}`))
	for _, seed := range wideSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		limit := budget(data)
		start := time.Now()
		text := receive(data)
		if d := time.Since(start); d > limit {
			t.Fatalf("an input of %d bytes took %v to receive, over the budget of %v", len(data), d, limit)
		}
		if len(text) > maxErrorText {
			t.Fatalf("an input of %d bytes got an error of %d bytes, over %d: %.200s…", len(data), len(text), maxErrorText, text)
		}
	})
}

// BenchmarkReceiveWide measures receiving (decoding and validating) each
// wide seed of about 1 MiB, against encoding/json parsing the same bytes
// into an any:
//
//	go test -run='^$' -bench=ReceiveWide ./agency/
func BenchmarkReceiveWide(b *testing.B) {
	names := []string{"args", "actions", "top-level", "meta", "list", "map", "twice", "long-key", "deep"}
	for i, seed := range wideSeeds() {
		b.Run(names[i], func(b *testing.B) {
			b.SetBytes(int64(len(seed)))
			for range b.N {
				receive(seed)
			}
		})
		b.Run(names[i]+"/json.Unmarshal", func(b *testing.B) {
			b.SetBytes(int64(len(seed)))
			for range b.N {
				var v any
				_ = json.Unmarshal(seed, &v)
			}
		})
	}
}
