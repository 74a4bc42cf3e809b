package agency

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/seed72275b23/agency-go/internal/jsonscan"
)

const metaKey = "__meta__"

// MarshalJSON encodes m in the wire format. It fails for a message that could
// not be decoded again: a bad id, an action name the format reserves, or
// arguments that are not a JSON object.
func (m *Message) MarshalJSON() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	// The arguments first, to size the buffer once; their error, if any,
	// comes after those of __meta__, as it always has.
	args, argsErr := m.encodeArgs()
	var b bytes.Buffer
	b.Grow(len(args) + len(m.To) + len(m.From) + len(m.Action) + len(m.ID) + len(m.ParentID) + 170)
	b.WriteString(`{"to":`)
	writeJSONString(&b, m.To)
	b.WriteString(`,"from":`)
	writeJSONString(&b, m.From)
	b.WriteString(`,"action":{"__meta__":{`)
	n := 0
	field := func(k string) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		writeJSONString(&b, k)
		b.WriteByte(':')
	}
	if m.ID != "" {
		field("id")
		writeJSONString(&b, m.ID)
	}
	if m.ParentID != "" {
		field("parent_id")
		writeJSONString(&b, m.ParentID)
	}
	if !m.Deadline.IsZero() {
		field("deadline")
		// An RFC 3339 time needs no escaping: written in place, no string.
		b.WriteByte('"')
		b.Write(m.Deadline.UTC().AppendFormat(b.AvailableBuffer(), time.RFC3339Nano))
		b.WriteByte('"')
	}
	if m.NoReply {
		field("no_reply")
		b.WriteString("true")
	}
	if m.Stream {
		field("stream")
		b.WriteString("true")
	}
	if m.Seq != 0 {
		field("seq")
		b.Write(strconv.AppendUint(b.AvailableBuffer(), uint64(m.Seq), 10))
	}
	keys := make([]string, 0, len(m.Meta))
	for k := range m.Meta {
		keys = append(keys, k) // validate has refused the framework's own keys
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, err := json.Marshal(m.Meta[k])
		if err != nil {
			return nil, fmt.Errorf("%w: __meta__ %q: %v", ErrMalformedMessage, k, err)
		}
		field(k)
		b.Write(v)
	}
	b.WriteString("},")
	writeJSONString(&b, m.Action)
	b.WriteByte(':')
	if argsErr != nil {
		return nil, argsErr
	}
	if m.Action == ResponseAction || m.Action == PartAction {
		b.WriteString(`{"value":`)
		b.Write(args)
		b.WriteByte('}')
	} else {
		b.Write(args)
	}
	b.WriteString("}}")
	return b.Bytes(), nil
}

// encodeArgs returns the JSON object that stands under the action name;
// for a [response], the value that stands under "value" in that object.
func (m *Message) encodeArgs() ([]byte, error) {
	switch m.Action {
	case ResponseAction, PartAction:
		v, err := marshalValue(m.Args)
		if err != nil {
			what := "response"
			if m.Action == PartAction {
				what = "part"
			}
			return nil, fmt.Errorf("%w: %s value: %v", ErrMalformedMessage, what, err)
		}
		return v, nil
	case ErrorAction:
		ae, _ := m.Err().(*ActionError)
		return json.Marshal(struct {
			Type ErrorType `json:"type"`
			Text string    `json:"error"`
		}{ae.Type, limitErrorText(ae.Text)})
	}
	return encodeArgsObject(m.Args)
}

func marshalValue(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return []byte("null"), nil
		}
		if !jsonscan.Valid(raw) {
			return nil, fmt.Errorf("invalid JSON %.40q", raw)
		}
		return raw, nil
	}
	return json.Marshal(v)
}

// encodeArgsObject encodes action arguments, which must form a JSON object.
func encodeArgsObject(args any) ([]byte, error) {
	if args == nil {
		return []byte("{}"), nil
	}
	b, err := marshalValue(args)
	if err != nil {
		return nil, fmt.Errorf("%w: args: %v", ErrMalformedMessage, err)
	}
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return []byte("{}"), nil
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: args must be a JSON object, not %.40s", ErrMalformedMessage, b)
	}
	return b, nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	if isPlainASCII(s) {
		b.WriteByte('"')
		b.WriteString(s)
		b.WriteByte('"')
		return
	}
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// isPlainASCII reports whether s needs no escaping in a JSON string.
func isPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// validate checks everything about m that its wire form depends on, without
// encoding it.
func (m *Message) validate() error { return m.check(false) }

// check is validate; with fromChecked, m.From is known to be a valid id
// (the sending agent's own, set by prepare) and is not checked again.
func (m *Message) check(fromChecked bool) error {
	if err := validateRecipient(m.To); err != nil {
		return fmt.Errorf("%w: to: %v", ErrMalformedMessage, err)
	}
	if !fromChecked {
		if err := ValidateID(m.From); err != nil {
			return fmt.Errorf("%w: from: %v", ErrMalformedMessage, err)
		}
	}
	if err := validateActionName(m.Action); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedMessage, err)
	}
	for _, k := range [...]string{"id", "parent_id", "deadline", "no_reply", "stream", "seq"} {
		if len(m.Meta) == 0 {
			break
		}
		if _, ok := m.Meta[k]; ok {
			// The framework's own keys live in fields; a copy in Meta would
			// travel in process and vanish on the wire.
			return fmt.Errorf("%w: __meta__ key %q is the framework's: set Message.ID, ParentID, Deadline, NoReply, Stream or Seq", ErrMalformedMessage, k)
		}
	}
	switch m.Action {
	case ErrorAction:
		ae, ok := m.Args.(*ActionError)
		if !ok || ae == nil {
			return fmt.Errorf("%w: an [error] carries an *ActionError, not %T", ErrMalformedMessage, m.Args)
		}
		if ae.Type == "" {
			return fmt.Errorf("%w: an [error] needs a type", ErrMalformedMessage)
		}
	case ResponseAction, PartAction:
	default:
		return checkArgsShape(m.Args)
	}
	return nil
}

// checkArgsShape cheaply rejects Go values that cannot encode to a JSON
// object, so that a message that space.Local never encodes is held to the
// same shape as one that crosses the wire.
func checkArgsShape(args any) error {
	switch a := args.(type) {
	case nil, map[string]any:
		return nil
	case json.RawMessage:
		t := bytes.TrimSpace(a)
		if len(t) == 0 || string(t) == "null" {
			return nil
		}
		if t[0] == '{' {
			if !jsonscan.Valid(t) {
				return fmt.Errorf("%w: args: invalid JSON %.40q", ErrMalformedMessage, t)
			}
			if k, dup := duplicateKey(t); dup {
				return fmt.Errorf("%w: args give %s twice", ErrMalformedMessage, quote(k))
			}
			return nil
		}
		return fmt.Errorf("%w: args must be a JSON object, not %.40s", ErrMalformedMessage, t)
	}
	t := reflect.TypeOf(args)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct:
		return nil
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		return nil
	case t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType):
		return nil // judged when encoded
	}
	return fmt.Errorf("%w: args must encode to a JSON object, not %T", ErrMalformedMessage, args)
}

var jsonMarshalerType = reflect.TypeFor[json.Marshaler]()

// DecodeMessage decodes one message in the wire format. Anything that is not
// that shape is an error wrapping ErrMalformedMessage that says what is
// wrong; no input makes it panic.
func DecodeMessage(data []byte) (*Message, error) {
	m := new(Message)
	if err := m.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalJSON decodes the wire format into m; see [DecodeMessage].
func (m *Message) UnmarshalJSON(data []byte) error {
	// jsonscan.Valid checks the whole input once (as json.Valid would, in
	// one fast pass); the walk below then splits the
	// objects into their members without building maps, matching keys
	// exactly (encoding/json would match struct fields regardless of case)
	// and refusing a key given twice (two parsers could read it two ways).
	if !jsonscan.Valid(data) {
		var v any
		return fmt.Errorf("%w: %s", ErrMalformedMessage, describeTopLevel(data, json.Unmarshal(data, &v)))
	}
	data = bytes.Clone(bytes.TrimSpace(data)) // the message keeps slices of it
	if data[0] != '{' {
		return fmt.Errorf("%w: a message is a JSON object, not %s", ErrMalformedMessage, jsonKindOf(data))
	}
	var to, from, action []byte
	var unknown problems
	err := eachMember(data, func(key string, raw []byte) error {
		var slot *[]byte
		switch key {
		case "to":
			slot = &to
		case "from":
			slot = &from
		case "action":
			slot = &action
		default:
			unknown.add(quote(key))
			return nil
		}
		if *slot != nil {
			return fmt.Errorf("%w: key %q given twice", ErrMalformedMessage, key)
		}
		*slot = raw
		return nil
	})
	if err != nil {
		return err
	}
	if unknown.n > 0 {
		return fmt.Errorf("%w: unknown key %s; a message has only \"to\", \"from\" and \"action\"",
			ErrMalformedMessage, unknown.join(", "))
	}
	var out Message
	var strs wireStrings
	if out.To, err = strs.top(to, "to", wireTo); err != nil {
		return err
	}
	if out.From, err = strs.top(from, "from", wireFrom); err != nil {
		return err
	}
	if isNull(action) {
		return fmt.Errorf("%w: no \"action\" object", ErrMalformedMessage)
	}
	if action[0] != '{' {
		return fmt.Errorf("%w: \"action\" must be an object, not %s", ErrMalformedMessage, jsonKindOf(action))
	}
	if err := validateRecipient(out.To); err != nil {
		return fmt.Errorf("%w: to: %v", ErrMalformedMessage, err)
	}
	if err := ValidateID(out.From); err != nil {
		return fmt.Errorf("%w: from: %v", ErrMalformedMessage, err)
	}
	var meta, args, firstLit []byte
	var first string
	var count int
	var names problems       // from the second name on
	var seen map[string]bool // made at the second name: one is the rule
	// The keys are views of data while the walk runs: the action name is
	// made a string of its own with the others, by strs.
	err = eachMemberView(action, func(key string, lit, raw []byte) error {
		if key == metaKey {
			if meta != nil {
				return fmt.Errorf("%w: key %q given twice", ErrMalformedMessage, key)
			}
			meta = raw
			return nil
		}
		switch {
		case count == 0:
			first, firstLit, args = key, lit, raw
		case seen == nil && key != first:
			seen = map[string]bool{first: true, key: true}
			names.add(truncate(first, maxQuoted)) // listed only when wrong
			names.add(truncate(key, maxQuoted))
		case seen == nil || seen[key]:
			return fmt.Errorf("%w: action %s given twice", ErrMalformedMessage, quote(key))
		default:
			seen[key] = true
			names.add(truncate(key, maxQuoted))
		}
		count++
		return nil
	})
	if err != nil {
		return err
	}
	switch count {
	case 0:
		return fmt.Errorf("%w: the action object names no action", ErrMalformedMessage)
	case 1:
	default:
		slices.Sort(names.items)
		return fmt.Errorf("%w: the action object names %d actions (%s); a message carries exactly one",
			ErrMalformedMessage, names.n, names.join(", "))
	}
	if err := validateActionName(first); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedMessage, err)
	}
	if out.Action, err = strs.set(firstLit, wireAction); err != nil {
		return err
	}
	if meta != nil {
		if err := out.decodeMeta(meta, &strs); err != nil {
			return err
		}
	}
	if err := out.decodeArgs(args); err != nil {
		return err
	}
	strs.done(&out)
	*m = out
	return nil
}

// decodeMeta reads __meta__: the framework's keys into their fields, the
// others into Meta. The walk reads the framework's keys as they are, and
// decodes only the others into Go values, for a map only when there are
// any. The ids' strings are made by strs.
func (m *Message) decodeMeta(raw json.RawMessage, strs *wireStrings) error {
	if isNull(raw) {
		return nil
	}
	if raw[0] != '{' {
		return fmt.Errorf("%w: __meta__ must be an object, not %s", ErrMalformedMessage, jsonKindOf(raw))
	}
	var meta map[string]any
	err := eachMember(raw, func(k string, v []byte) error { // valid JSON: eachMember fails only as f does
		switch k {
		case "id", "parent_id":
			if v[0] != '"' {
				return fmt.Errorf("%w: __meta__.%s must be a string", ErrMalformedMessage, k)
			}
			var err error
			if k == "id" {
				m.ID, err = strs.set(v, wireID)
			} else {
				m.ParentID, err = strs.set(v, wireParentID)
			}
			return err
		case "deadline":
			var t time.Time
			err := errors.New("not a string")
			if v[0] == '"' {
				var s string
				if s, err = stringView(v); err == nil {
					t, err = time.Parse(time.RFC3339Nano, s)
				}
			}
			if err != nil {
				return fmt.Errorf("%w: __meta__.deadline must be an RFC 3339 time, not %s", ErrMalformedMessage, truncate(metaText(v), maxQuoted))
			}
			m.Deadline = t
		case "no_reply":
			switch string(v) {
			case "true":
				m.NoReply = true
			case "false":
				m.NoReply = false
			default:
				return fmt.Errorf("%w: __meta__.no_reply must be a boolean, not %s", ErrMalformedMessage, truncate(metaText(v), maxQuoted))
			}
		case "stream":
			switch string(v) {
			case "true":
				m.Stream = true
			case "false":
				m.Stream = false
			default:
				return fmt.Errorf("%w: __meta__.stream must be a boolean, not %s", ErrMalformedMessage, truncate(metaText(v), maxQuoted))
			}
		case "seq":
			n, err := strconv.ParseUint(string(v), 10, 32)
			if err != nil {
				return fmt.Errorf("%w: __meta__.seq must be a whole number below 2^32, not %s", ErrMalformedMessage, truncate(metaText(v), maxQuoted))
			}
			m.Seq = uint32(n)
		default:
			var x any
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.UseNumber() // numbers travel unchanged, not rounded through float64
			if err := dec.Decode(&x); err != nil {
				return fmt.Errorf("%w: __meta__.%s: %v", ErrMalformedMessage, quote(k), err)
			}
			if meta == nil {
				meta = make(map[string]any)
			}
			meta[k] = x
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(meta) > 0 {
		m.Meta = meta
	}
	return nil
}

// stringView returns the string the valid JSON string literal lit decodes
// to, for a use that does not keep it: a view of lit's bytes where they
// need no unescaping.
func stringView(lit []byte) (string, error) {
	if body := lit[1 : len(lit)-1]; len(body) > 0 && jsonscan.Plain(lit) {
		return unsafe.String(&body[0], len(body)), nil
	}
	return unquote(lit)
}

// metaText is a meta value as an error shows it: a string's text, or the
// JSON of anything else.
func metaText(v []byte) string {
	if v[0] == '"' {
		if s, err := unquote(v); err == nil {
			return s
		}
	}
	return string(v)
}

func (m *Message) decodeArgs(raw json.RawMessage) error {
	if isNull(raw) {
		raw = nil
	} else if raw[0] != '{' {
		return fmt.Errorf("%w: the arguments of %q must be an object, not %.40s", ErrMalformedMessage, m.Action, raw)
	}
	switch m.Action {
	case ResponseAction, PartAction:
		// What json.Unmarshal into struct{ Value json.RawMessage
		// `json:"value"` } gives, without its reflection: the raw text
		// of the last key that matches "value" regardless of case (as
		// encoding/json matches it), other keys ignored.
		var value []byte
		if raw != nil {
			_ = jsonscan.MembersRaw(raw, func(lit, v []byte) error { // valid JSON: no error
				if isValueKey(lit) {
					value = v
				}
				return nil
			})
		}
		if len(value) > 0 {
			m.Args = json.RawMessage(value)
		}
	case ErrorAction:
		var e struct {
			Type *string `json:"type"`
			Text string  `json:"error"`
		}
		if raw != nil {
			if err := json.Unmarshal(raw, &e); err != nil {
				return fmt.Errorf("%w: [error]: %v", ErrMalformedMessage, err)
			}
		}
		if e.Type == nil || *e.Type == "" {
			return fmt.Errorf("%w: [error] without a \"type\"", ErrMalformedMessage)
		}
		m.Args = &ActionError{Type: ErrorType(*e.Type), Text: e.Text}
	default:
		if k, dup := duplicateKey(raw); dup {
			return fmt.Errorf("%w: the arguments of %q give %s twice", ErrMalformedMessage, m.Action, quote(k))
		}
		if raw != nil {
			m.Args = raw
		}
	}
	return nil
}

// isValueKey reports whether the key literal lit names the "value" of a
// [response] as encoding/json would match it to a field tagged "value".
func isValueKey(lit []byte) bool {
	if jsonscan.Plain(lit) {
		return bytes.EqualFold(lit[1:len(lit)-1], []byte("value"))
	}
	k, err := jsonscan.Unquote(lit)
	return err == nil && strings.EqualFold(k, "value")
}

// wireStrings makes the strings a decoded message keeps of its input (to,
// from, action, id, parent_id) in one allocation rather than one each. Until done,
// those that need no unescaping are views of the input, good for checking
// them; done puts copies in their place, made together, so that the
// message pins no more of its input than their bytes.
type wireStrings struct {
	bodies [5][]byte
	fields [5]wireField
	n      int
}

// wireField names a string field of a Message that wireStrings makes.
type wireField uint8

const (
	wireTo wireField = iota
	wireFrom
	wireAction
	wireID
	wireParentID
)

// top returns the string value of the top-level key of a message, which
// is its field f.
func (w *wireStrings) top(raw []byte, key string, f wireField) (string, error) {
	if isNull(raw) {
		return "", fmt.Errorf("%w: no %q", ErrMalformedMessage, key)
	}
	if raw[0] != '"' {
		return "", fmt.Errorf("%w: %q must be a string, not %s", ErrMalformedMessage, key, jsonKindOf(raw))
	}
	return w.set(raw, f)
}

// set returns the string the valid JSON string literal lit decodes to,
// the value of the message's field f.
func (w *wireStrings) set(lit []byte, f wireField) (string, error) {
	body := lit[1 : len(lit)-1]
	switch {
	case len(body) == 0:
		return "", nil
	case !jsonscan.Plain(lit) || w.n == len(w.bodies): // escaped, or an id given more than once
		return unquote(lit)
	}
	w.bodies[w.n], w.fields[w.n] = body, f
	w.n++
	return unsafe.String(&body[0], len(body)), nil // a view until done
}

// done gives m's fields that are views copies of their own, made in one
// allocation.
func (w *wireStrings) done(m *Message) {
	if w.n == 0 {
		return
	}
	total := 0
	for _, b := range w.bodies[:w.n] {
		total += len(b)
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, b := range w.bodies[:w.n] {
		sb.Write(b)
	}
	all, at := sb.String(), 0
	for i, b := range w.bodies[:w.n] {
		s := all[at : at+len(b)]
		at += len(b)
		switch w.fields[i] {
		case wireTo:
			m.To = s
		case wireFrom:
			m.From = s
		case wireAction:
			m.Action = s
		case wireID:
			m.ID = s
		case wireParentID:
			m.ParentID = s
		}
	}
}

// describeTopLevel says why data is not a JSON object.
func describeTopLevel(data []byte, err error) string {
	var te *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return "empty input; a message is a JSON object"
	case errors.As(err, &te):
		return "a message is a JSON object, not " + jsonKindOf(bytes.TrimSpace(data))
	}
	return "not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKindOf names the kind of a valid JSON value by its first byte.
func jsonKindOf(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// The walk over valid JSON (internal/jsonscan): eachMember and its helpers
// assume jsonscan.Valid has accepted the input, so they check no syntax and
// never index past the end of a valid document.

// eachMember calls f with each key of the JSON object obj, in order, and the
// raw text of its value.
func eachMember(obj []byte, f func(key string, raw []byte) error) error {
	var fErr error
	err := jsonscan.MembersRaw(obj, func(lit, raw []byte) error {
		key, err := keyString(lit)
		if err != nil {
			return err
		}
		fErr = f(key, raw)
		return fErr
	})
	if err != nil && fErr == nil { // a key that did not unquote
		return fmt.Errorf("%w: %v", ErrMalformedMessage, err)
	}
	return err
}

// eachMemberView is eachMember for a walk that keeps no key: a key that
// needs no unescaping is a view of obj's bytes (a string that shares
// them), which the caller copies if it keeps it.
func eachMemberView(obj []byte, f func(key string, lit, raw []byte) error) error {
	var fErr error
	err := jsonscan.MembersRaw(obj, func(lit, raw []byte) error {
		var key string
		if body := lit[1 : len(lit)-1]; len(body) > 0 && jsonscan.Plain(lit) {
			key = unsafe.String(&body[0], len(body))
		} else {
			var err error
			if key, err = jsonscan.Unquote(lit); err != nil {
				return err
			}
		}
		fErr = f(key, lit, raw)
		return fErr
	})
	if err != nil && fErr == nil { // a key that did not unquote
		return fmt.Errorf("%w: %v", ErrMalformedMessage, err)
	}
	return err
}

// keyString unquotes a key's literal; the wire format's own keys come
// without an allocation.
func keyString(lit []byte) (string, error) {
	switch string(lit[1 : len(lit)-1]) {
	case "to":
		return "to", nil
	case "from":
		return "from", nil
	case "action":
		return "action", nil
	case metaKey:
		return metaKey, nil
	case "id":
		return "id", nil
	case "parent_id":
		return "parent_id", nil
	case "deadline":
		return "deadline", nil
	case "no_reply":
		return "no_reply", nil
	case "stream":
		return "stream", nil
	case "seq":
		return "seq", nil
	}
	return jsonscan.Unquote(lit)
}

// duplicateKey returns a key that the valid JSON object obj gives twice at
// its top level. Such arguments could be read two ways (an approver shown
// the first value, the decoder keeping the last), so they are refused where
// they enter.
func duplicateKey(obj []byte) (string, bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return "", false
	}
	var seen keySet
	var dup string
	_ = jsonscan.MembersRaw(obj, func(lit, _ []byte) error {
		if !seen.add(lit) {
			dup, _ = jsonscan.Unquote(lit)
			return errStop
		}
		return nil
	})
	return dup, dup != ""
}

var errStop = errors.New("stop")

// keySet is a set of keys, given as their literals. Arguments are mostly
// small, and a few slots beat a map for them; a map takes over past a
// few keys, so that many keys cost linear time.
type keySet struct {
	few   [16][]byte // the keys, unquoted, while there are few
	n     int
	large map[string]bool
}

// add adds the key with the literal lit, reporting whether it was not
// there yet.
func (s *keySet) add(lit []byte) bool {
	k := lit[1 : len(lit)-1]
	if !jsonscan.Plain(lit) {
		u, _ := jsonscan.Unquote(lit) // a valid literal unquotes
		k = []byte(u)
	}
	switch {
	case s.large != nil:
		if s.large[string(k)] {
			return false
		}
		s.large[string(k)] = true
		return true
	}
	for _, x := range s.few[:s.n] {
		if bytes.Equal(x, k) {
			return false
		}
	}
	if s.n < len(s.few) {
		s.few[s.n] = k
		s.n++
		return true
	}
	s.large = make(map[string]bool, 2*len(s.few))
	for _, x := range s.few {
		s.large[string(x)] = true
	}
	s.large[string(k)] = true
	return true
}

// unquote decodes a JSON string literal.
func unquote(lit []byte) (string, error) {
	s, err := jsonscan.Unquote(lit)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformedMessage, err)
	}
	return s, nil
}
