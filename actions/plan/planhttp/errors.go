package planhttp

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// fieldError is one entry of a 422 answer, as FastAPI writes it.
type fieldError struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
}

// httpError is an answer other than 200: FastAPI's shape, {"detail": …},
// with a string or, for 422, a list of fieldErrors.
type httpError struct {
	status    int
	detail    any
	header    http.Header
	requestID string // of a 5xx, logged with the error
}

func (e *httpError) Error() string { return fmt.Sprintf("%d: %v", e.status, e.detail) }

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status: status, detail: fmt.Sprintf(format, args...)}
}

func invalid(errs ...fieldError) *httpError {
	return &httpError{status: http.StatusUnprocessableEntity, detail: errs}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"detail":"the answer could not be encoded"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, e *httpError) {
	for k, vs := range e.header {
		w.Header()[k] = vs
	}
	body := map[string]any{"detail": e.detail}
	if e.requestID != "" {
		body["request_id"] = e.requestID
	}
	writeJSON(w, e.status, body)
}

// internal is a 500 that says nothing of err: err is logged with a new
// request id, which the answer carries, so that a person can find it.
func (h *handler) internal(r *http.Request, err any) *httpError {
	id := newRequestID()
	h.cfg.logger.Error("planhttp: internal error", "request_id", id, "method", r.Method, "path", r.URL.Path, "error", err)
	e := errorf(http.StatusInternalServerError, "Internal Server Error (request id %s: the server's log says more)", id)
	e.requestID = id
	return e
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// maxID is the longest id (user, plan, session, step) in bytes.
const maxID = 255

// checkID says what makes v, the id called name, one that no store keeps
// or none was given: text that is not valid UTF-8, a NUL byte, more than
// maxID bytes. It is "" for a good id.
func checkID(name, v string) string {
	switch {
	case !utf8.ValidString(v):
		return name + ": not valid UTF-8"
	case strings.IndexByte(v, 0) >= 0:
		return name + ": holds a NUL byte"
	case len(v) > maxID:
		return fmt.Sprintf("%s: longer than %d bytes", name, maxID)
	}
	return ""
}

// badID is the 400 of an id from a path or a query that checkID refuses.
func badID(where, name, v string) *httpError {
	if why := checkID(name, v); why != "" {
		return errorf(http.StatusBadRequest, "%s: %s", where, why)
	}
	return nil
}

// kind is the JSON type a body field takes.
type kind int

const (
	str kind = iota
	boolean
)

// field describes a field of a request body.
type field struct {
	name     string
	kind     kind
	required bool
	max      int // bytes, for strings
	nonEmpty bool
	id       bool // an id: checked by checkID, refused with 400
}

// body is a decoded request body: the fields described, by name.
type body struct {
	strs  map[string]string
	bools map[string]bool
}

// decodeBody reads r's JSON body (at most limit bytes) and checks it
// against fields: missing required fields, wrong types and too long
// strings are a 422 naming each field; a body that is not a JSON object is
// a 400, one over the limit a 413. Fields not described are ignored, as
// pydantic does.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, fields []field) (*body, *httpError) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, errorf(http.StatusRequestEntityTooLarge, "body: larger than the limit of %d bytes", limit)
		}
		return nil, errorf(http.StatusBadRequest, "body: %v", err)
	}
	// Checked on the bytes as they came: decoding would replace what is
	// not UTF-8 with U+FFFD, and the text stored would not be the text sent.
	if !utf8.Valid(data) {
		return nil, errorf(http.StatusBadRequest, "body: not valid UTF-8 (at byte %d)", invalidAt(data))
	}
	// A \u escape of half a surrogate pair would be decoded as U+FFFD:
	// refused as invalid UTF-8 is.
	if at := loneSurrogate(data); at >= 0 {
		return nil, errorf(http.StatusBadRequest, "body: a lone surrogate escape (at byte %d), which is no character", at)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, invalid(fieldError{Loc: []string{"body"}, Msg: "field required", Type: "value_error.missing"})
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, errorf(http.StatusBadRequest, "body: not valid JSON (at byte %d): %v", syn.Offset, err)
		}
		return nil, errorf(http.StatusBadRequest, "body: must be a JSON object")
	}
	b := &body{strs: map[string]string{}, bools: map[string]bool{}}
	var errs []fieldError
	var bad []string
	for _, f := range fields {
		v, ok := raw[f.name]
		if !ok || string(v) == "null" {
			if f.required {
				errs = append(errs, fieldError{Loc: []string{"body", f.name}, Msg: "field required", Type: "value_error.missing"})
			}
			continue
		}
		switch f.kind {
		case str:
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				errs = append(errs, fieldError{Loc: []string{"body", f.name}, Msg: "str type expected", Type: "type_error.str"})
				continue
			}
			if f.max > 0 && len(s) > f.max {
				errs = append(errs, fieldError{Loc: []string{"body", f.name}, Msg: fmt.Sprintf("ensure this value has at most %d bytes (of UTF-8)", f.max), Type: "value_error.any_str.max_length"})
				continue
			}
			if f.nonEmpty && s == "" {
				errs = append(errs, fieldError{Loc: []string{"body", f.name}, Msg: "ensure this value has at least 1 characters", Type: "value_error.any_str.min_length"})
				continue
			}
			if f.id {
				if why := checkID(f.name, s); why != "" {
					bad = append(bad, why)
					continue
				}
			} else if strings.IndexByte(s, 0) >= 0 {
				// PostgreSQL's text cannot hold it; SQLite answers alike.
				bad = append(bad, f.name+": holds a NUL byte")
				continue
			}
			b.strs[f.name] = s
		case boolean:
			var x bool
			if err := json.Unmarshal(v, &x); err != nil {
				errs = append(errs, fieldError{Loc: []string{"body", f.name}, Msg: "value could not be parsed to a boolean", Type: "type_error.bool"})
				continue
			}
			b.bools[f.name] = x
		}
	}
	if len(bad) > 0 {
		return nil, errorf(http.StatusBadRequest, "body: %s", strings.Join(bad, "; "))
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	return b, nil
}

// loneSurrogate is the offset of the first \u escape in a JSON string of
// data that is half a surrogate pair without its other half, or -1. data
// need not be valid JSON (the decoder says what else is wrong).
func loneSurrogate(data []byte) int {
	in := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			in = !in
		case c == '\\' && in:
			if i+1 < len(data) && data[i+1] == 'u' {
				r, ok := hex4(data, i+2)
				switch {
				case ok && utf16.IsSurrogate(r) && r < 0xdc00:
					if lo, ok := hex4(data, i+8); i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' && ok && lo >= 0xdc00 && lo <= 0xdfff {
						i += 11
						continue
					}
					return i
				case ok && utf16.IsSurrogate(r):
					return i
				}
			}
			i++ // the escaped byte
		}
	}
	return -1
}

// hex4 reads the four hex digits at data[i:], if they are there.
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// invalidAt is the offset of the first byte of data that is not UTF-8.
func invalidAt(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}
