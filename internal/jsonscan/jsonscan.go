// Package jsonscan reads JSON text without decoding it into Go values: it
// checks that a document is valid, and walks a valid one, splitting
// objects into their members and values into their raw text. The
// message codec and the AMQP space's translation of Python-shaped
// messages share it.
//
// Valid accepts exactly what encoding/json.Valid accepts, faster. The
// walking functions (SkipSpace, SkipString, SkipValue, Members) assume
// valid input, check no syntax, and never index past the end of a valid
// document.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// maxDepth is encoding/json's limit on nesting: Valid refuses deeper
// documents, as encoding/json.Valid does.
const maxDepth = 10000

// plain marks the bytes that stand for themselves inside a JSON string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Valid reports whether data is one valid JSON value, with white space
// around it or not.
func Valid(data []byte) bool {
	v := validator{b: data}
	i, ok := v.value(SkipSpace(data, 0), 0)
	return ok && SkipSpace(data, i) == len(data)
}

type validator struct{ b []byte }

// value checks the value at b[i] and returns the index past it.
func (v *validator) value(i, depth int) (int, bool) {
	b := v.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; c {
	case '"':
		return validString(b, i)
	case '{':
		if depth++; depth > maxDepth {
			return i, false
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = validString(b, i); !ok {
				return i, false
			}
			if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = v.value(SkipSpace(b, i+1), depth); !ok {
				return i, false
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case '[':
		if depth++; depth > maxDepth {
			return i, false
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = v.value(i, depth); !ok {
				return i, false
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		return validNumber(b, i)
	}
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// validString checks the string that starts at b[i] (a quote).
func validString(b []byte, i int) (int, bool) {
	for i++; ; {
		// Eight bytes at a time while none of them is a quote, a backslash
		// or a control character; then one at a time.
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			q, e := w^(ones*'"'), w^(ones*'\\')
			// A byte under 0x20, or one that is zero once the quote or the
			// backslash is cancelled out, sets its high bit here.
			if ((w-ones*0x20)&^w|(q-ones)&^q|(e-ones)&^e)&(ones*0x80) != 0 {
				break
			}
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 {
					return i, false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 6
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
}

const ones = 0x0101010101010101

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validNumber checks the number that starts at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// SkipSpace returns the index of the first byte at or after b[i] that is
// not JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index just past the valid string that starts at
// b[i].
func SkipString(b []byte, i int) int {
	for i++; i < len(b); {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		j += i
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		k := j
		for k > i && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
		i = j + 1
	}
	return len(b)
}

// SkipValue returns the index just past the valid value that starts at
// b[i].
func SkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = SkipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}

// Members calls f with each key of the valid JSON object obj (no space
// before its brace), in order, and the raw text of its value, until f
// returns an error, which it returns. A key that does not unquote is
// such an error too.
func Members(obj []byte, f func(key string, raw []byte) error) error {
	return MembersRaw(obj, func(lit, raw []byte) error {
		key, err := Unquote(lit)
		if err != nil {
			return err
		}
		return f(key, raw)
	})
}

// MembersRaw is Members with each key as its literal, quotes and escapes
// included, for callers that can compare it without making a string.
func MembersRaw(obj []byte, f func(lit, raw []byte) error) error {
	i := SkipSpace(obj, 1) // past '{'
	if obj[i] == '}' {
		return nil
	}
	for {
		end := SkipString(obj, i)
		lit := obj[i:end]
		i = SkipSpace(obj, SkipSpace(obj, end)+1) // past ':'
		vend := SkipValue(obj, i)
		if err := f(lit, obj[i:vend]); err != nil {
			return err
		}
		i = SkipSpace(obj, vend)
		if obj[i] == '}' {
			return nil
		}
		i = SkipSpace(obj, i+1) // past ','
	}
}

// Unquote decodes a valid JSON string literal, as encoding/json does
// (invalid UTF-8 becomes U+FFFD).
func Unquote(lit []byte) (string, error) {
	body := lit[1 : len(lit)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), nil
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}

// Plain reports whether the valid JSON string literal lit decodes to its
// bytes between the quotes as they are: no escapes, valid UTF-8.
func Plain(lit []byte) bool {
	body := lit[1 : len(lit)-1]
	return bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body)
}
