package amqpspace

// Sharing an exchange with agents of operand/agency 1.6 (Python): the
// message shapes, their translation, and what is never answered. The
// space calls in here from a few marked places: encode from send,
// decode from member.check, unanswerable from member.malformed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/internal/jsonscan"
)

// Interop names a wire dialect a space speaks besides its own; see
// Config.Interop.
type Interop string

// InteropOperandAgency is the dialect of operand/agency 1.6, the Python
// library: every message is written in its shape,
//
//	{"meta": {"id": …, "parent_id": …, …}, "from": …, "to": …,
//	 "action": {"name": …, "args": {…}}}
//
// and both shapes are read. AMQP_INTEROP=operand-agency selects it in
// ConfigFromEnv.
const InteropOperandAgency Interop = "operand-agency"

// Every message is published as text/plain in UTF-8, whatever the mode.
// It is JSON all the same; but operand/agency's consumer (kombu) hands a
// text/plain body to agency as the string agency then parses, whereas it
// decodes an application/json body to a dict, on which agency's receiving
// thread fails and stops for good, silently.
const (
	contentType     = "text/plain"
	contentEncoding = "utf-8"
)

// checkInterop refuses a dialect the space does not speak.
func checkInterop(i Interop) error {
	if i != "" && i != InteropOperandAgency {
		return fmt.Errorf("%w: Interop %q: the only dialect is %q (or none)", ErrInvalidConfig, i, InteropOperandAgency)
	}
	return nil
}

// interopFromEnv sets c.Interop from AMQP_INTEROP.
func (c *Config) interopFromEnv() error {
	v := Interop(strings.TrimSpace(os.Getenv("AMQP_INTEROP")))
	if err := checkInterop(v); err != nil {
		return fmt.Errorf("%w: AMQP_INTEROP=%q: set it to %q to share the exchange with operand/agency (Python) agents, or leave it unset", ErrInvalidConfig, v, InteropOperandAgency)
	}
	c.Interop = v
	return nil
}

// pyState is what a space in the Python-compatible mode remembers: the
// help requests that came from operand/agency agents, whose answers go
// out in operand/agency's help format.
type pyState struct {
	mu    sync.Mutex
	asked map[string]struct{}
	ring  []string // the keys in asked, oldest first, to bound it
	next  int
}

// maxPyHelp bounds the help requests remembered while their answers are
// on their way; a help broadcast is answered by every agent of the
// process, so this is several broadcasts' worth.
const maxPyHelp = 4096

func newPyState(i Interop) *pyState {
	if i != InteropOperandAgency {
		return nil
	}
	return &pyState{asked: make(map[string]struct{}), ring: make([]string, maxPyHelp)}
}

func helpKey(responder, asker, id string) string {
	return responder + "\x00" + asker + "\x00" + id
}

// askedHelp notes a help request from an operand/agency agent to the
// agent responder.
func (p *pyState) askedHelp(responder string, m *agency.Message) {
	if m.ID == "" {
		return // its answer cannot be told from others
	}
	k := helpKey(responder, m.From, m.ID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.ring[p.next]; old != "" {
		delete(p.asked, old)
	}
	p.ring[p.next] = k
	p.next = (p.next + 1) % len(p.ring)
	p.asked[k] = struct{}{}
}

// answersHelp reports whether m answers a help request of an
// operand/agency agent, and forgets the request.
func (p *pyState) answersHelp(m *agency.Message) bool {
	if !m.IsResponse() || m.ParentID == "" {
		return false
	}
	k := helpKey(m.From, m.To, m.ParentID)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.asked[k]
	delete(p.asked, k) // its ring slot goes stale, harmlessly
	return ok
}

// encode returns m's body: this library's wire format, or operand/agency's
// shape in the Python-compatible mode, with a help answer to an
// operand/agency agent in its help format.
func (s *Space) encode(m *agency.Message) ([]byte, error) {
	if s.py == nil {
		return m.MarshalJSON()
	}
	if s.py.answersHelp(m) && m.Action == agency.ResponseAction {
		if r, err := pythonHelpAnswer(m); err == nil {
			m = r
		} else {
			s.log.Warn("amqpspace: help answer left in this library's format", "agent", m.From, "to", m.To, "error", err)
		}
	}
	body, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return goToPython(body)
}

// decode reads a delivery's body: this library's shape, or, in the
// Python-compatible mode, operand/agency's as well. Outside that mode an
// operand/agency message does not decode, and unanswerable drops it.
func (mem *member) decode(d amqp.Delivery) (*agency.Message, error) {
	py := mem.s.py
	if py == nil {
		return agency.DecodeMessage(d.Body)
	}
	body, isPy, err := pythonToGo(d.Body)
	if err != nil {
		return nil, err
	}
	if !isPy {
		return agency.DecodeMessage(d.Body)
	}
	m, err := agency.DecodeMessage(body)
	if err != nil {
		return nil, err
	}
	// A Go process sets an app_id on everything it publishes (its token);
	// kombu, as operand/agency uses it, sets none.
	if m.Action == agency.HelpAction && d.AppId == "" {
		py.askedHelp(mem.id, m)
	}
	return m, nil
}

// unanswerable deals with a delivery that did not decode, when it must not
// be answered the way this library's own malformed messages are, and
// reports whether it did: an operand/agency message outside the
// Python-compatible mode (dropped: the answer would be in a shape it
// cannot read), any unreadable broadcast, and any answer ([response] or
// [error], of either shape: answering answers could loop between two
// spaces) are dropped with one log line naming the sender. In the mode, an
// unreadable operand/agency request is answered with an [error] in its
// shape.
func (mem *member) unanswerable(d amqp.Delivery, broadcast bool, cause error) bool {
	s := mem.s
	env := peek(d.Body)
	switch {
	case env.python && s.py == nil:
		s.log.Warn("amqpspace: dropped an operand/agency (Python) message: the space is not in the Python-compatible mode (Config.Interop, AMQP_INTEROP=operand-agency)",
			"agent", mem.id, "from", env.from, "action", env.action)
		return true
	case broadcast:
		s.log.Warn("amqpspace: dropped an unreadable broadcast", "agent", mem.id, "from", env.from, "error", cause)
		return true
	case env.answer:
		s.log.Warn("amqpspace: dropped an unreadable answer", "agent", mem.id, "from", env.from, "error", cause)
		return true
	case !env.python:
		return false // this library's shape: answered as malformed
	}
	if checkID(env.from) != nil || env.from == mem.id || (d.AppId != s.token && s.local(env.from)) {
		s.log.Warn("amqpspace: dropped a malformed message", "agent", mem.id, "from", env.from, "error", cause, "app_id", d.AppId)
		return true
	}
	reply := &agency.Message{
		To: env.from, From: mem.id, ID: agency.NewID(), ParentID: env.id,
		Action: agency.ErrorAction,
		Args:   &agency.ActionError{Type: agency.TypeInvalidArgs, Text: fmt.Sprintf("%s could not read your message: %v", mem.id, cause)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.PublishTimeout)
	defer cancel()
	if err := s.send(ctx, reply); err != nil {
		s.log.Warn("amqpspace: dropped a malformed message; the error reply failed", "agent", mem.id, "from", env.from, "error", cause, "reply_error", err)
	}
	return true
}

// envelope is what can be read of a message that does not decode.
type envelope struct {
	python bool // operand/agency's shape
	answer bool // a [response], [error], [part] or [cancel], of either shape
	from   string
	id     string // meta.id, in operand/agency's shape
	action string
}

// peek reads what it can of body, whatever its shape. An operand/agency
// message has a top-level "meta", or an "action" whose "name" is a string;
// this library's has neither (its meta is action.__meta__, and what stands
// under an action's name is an object).
func peek(body []byte) envelope {
	var top struct {
		Meta   json.RawMessage            `json:"meta"`
		From   json.RawMessage            `json:"from"`
		Action map[string]json.RawMessage `json:"action"`
	}
	_ = json.Unmarshal(body, &top) // best effort: whatever decodes helps
	var env envelope
	_ = json.Unmarshal(top.From, &env.from)
	var name string
	if raw, ok := top.Action["name"]; ok && json.Unmarshal(raw, &name) == nil {
		env.python, env.action = true, name
	}
	if len(top.Meta) > 0 {
		env.python = true
		var meta struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(top.Meta, &meta)
		env.id = meta.ID
	}
	_, goResponse := top.Action[agency.ResponseAction]
	_, goError := top.Action[agency.ErrorAction]
	_, goPart := top.Action[agency.PartAction]
	_, goCancel := top.Action[agency.CancelAction]
	env.answer = goResponse || goError || goPart || goCancel ||
		(env.python && (name == agency.ResponseAction || name == agency.ErrorAction || name == agency.PartAction || name == agency.CancelAction))
	return env
}

// pythonToGo translates an operand/agency message into this library's
// shape, reporting whether body was in operand/agency's shape at all (if
// not, the result is nil and the caller decodes body as it is). Meta goes
// to action.__meta__ unchanged (id, parent_id and every other key);
// missing or null args are {}; a null id or parent_id is absent; an
// [error] without a type gets the type its text implies.
func pythonToGo(body []byte) ([]byte, bool, error) {
	fail := func(format string, args ...any) ([]byte, bool, error) {
		return nil, true, fmt.Errorf("%w: operand/agency message: %s", agency.ErrMalformedMessage, fmt.Sprintf(format, args...))
	}
	top, err := members(body)
	if err != nil && peek(body).python {
		return fail("%v", err) // a key given twice, say
	}
	if err != nil || !isPythonShape(top) {
		return nil, false, nil // not this shape; the caller's decoder says what is wrong
	}
	for _, k := range top.keys {
		if k != "meta" && k != "from" && k != "to" && k != "action" {
			return fail("unknown key %q; it has only \"meta\", \"from\", \"to\" and \"action\"", k)
		}
	}
	meta, ok := top.get("meta")
	if !ok || meta[0] != '{' {
		return fail("\"meta\" must be an object")
	}
	if meta, err = dropNulls(meta, "id", "parent_id"); err != nil {
		return fail("meta: %v", err)
	}
	raw, _ := top.get("action")
	if len(raw) == 0 || raw[0] != '{' {
		return fail("\"action\" must be an object")
	}
	action, err := members(raw)
	if err != nil {
		return fail("action: %v", err)
	}
	for _, k := range action.keys {
		if k != "name" && k != "args" {
			return fail("unknown key %q in \"action\"; it has only \"name\" and \"args\"", k)
		}
	}
	var name string
	if n, ok := action.get("name"); !ok || json.Unmarshal(n, &name) != nil {
		return fail("action.name must be a string")
	}
	if name == "__meta__" {
		return fail("action.name %q is reserved", name)
	}
	args, ok := action.get("args")
	if !ok || string(args) == "null" {
		args = []byte("{}")
	}
	if name == agency.ErrorAction && args[0] == '{' {
		if args, err = typedError(args); err != nil {
			return fail("[error]: %v", err)
		}
	}
	to, _ := top.get("to")
	from, _ := top.get("from")
	var b bytes.Buffer
	b.Grow(len(body) + 16)
	b.WriteString(`{"to":`)
	b.Write(orNull(to))
	b.WriteString(`,"from":`)
	b.Write(orNull(from))
	b.WriteString(`,"action":{"__meta__":`)
	b.Write(meta)
	b.WriteByte(',')
	writeString(&b, name)
	b.WriteByte(':')
	b.Write(args)
	b.WriteString("}}")
	return b.Bytes(), true, nil
}

func isPythonShape(top object) bool {
	if _, ok := top.get("meta"); ok {
		return true
	}
	raw, ok := top.get("action")
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return false
	}
	action, err := members(raw)
	if err != nil {
		return false
	}
	name, ok := action.get("name")
	return ok && name[0] == '"'
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// typedError returns the arguments of an operand/agency [error] with a
// "type": its own, if it has one (another space in this mode wrote it),
// or the one its text implies.
func typedError(args []byte) ([]byte, error) {
	var e struct {
		Type  *string         `json:"type"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(args, &e); err != nil {
		return nil, err
	}
	var text string
	if len(e.Error) > 0 && json.Unmarshal(e.Error, &text) != nil {
		text = string(e.Error) // not a string: its JSON, rather than nothing
	}
	typ := pythonErrorType(text)
	if e.Type != nil && *e.Type != "" {
		typ = agency.ErrorType(*e.Type)
	}
	return json.Marshal(struct {
		Type agency.ErrorType `json:"type"`
		Text string           `json:"error"`
	}{typ, text})
}

// operand/agency's error texts are "<exception class>: <message>". These
// are the ones its Agent raises itself.
var (
	pyNotFound    = regexp.MustCompile(`^AttributeError: ".*" not found on ".*"$`) // no such action
	pyBadArgument = regexp.MustCompile(`^TypeError: .*\bargument`)                 // the call did not fit the method's signature
)

// pythonErrorType infers an [error]'s type from operand/agency's text,
// which carries none.
func pythonErrorType(text string) agency.ErrorType {
	switch {
	case pyNotFound.MatchString(text):
		return agency.TypeNotFound
	case strings.HasPrefix(text, "PermissionError:"):
		return agency.TypePermissionDenied
	case pyBadArgument.MatchString(text):
		return agency.TypeInvalidArgs
	}
	return agency.TypeActionFailed
}

// goToPython translates a message this library encoded into
// operand/agency's shape: action.__meta__ becomes the top-level meta, with
// every key; the action's name and arguments become action.name and
// action.args. A [response]'s args are {"value": …} in both; an [error]'s
// are {"error": text, "type": type}, of which operand/agency reads the
// text.
func goToPython(body []byte) ([]byte, error) {
	fail := func() error {
		return fmt.Errorf("%w: cannot write %.60s in operand/agency's shape", agency.ErrMalformedMessage, body)
	}
	top, err := members(body)
	if err != nil {
		return nil, fail()
	}
	to, _ := top.get("to")
	from, _ := top.get("from")
	raw, _ := top.get("action")
	action, err := members(raw)
	if err != nil || len(action.keys) != 2 || action.keys[0] != "__meta__" {
		return nil, fail()
	}
	var b bytes.Buffer
	b.Grow(len(body) + 32)
	b.WriteString(`{"meta":`)
	b.Write(action.vals[0])
	b.WriteString(`,"from":`)
	b.Write(orNull(from))
	b.WriteString(`,"to":`)
	b.Write(orNull(to))
	b.WriteString(`,"action":{"name":`)
	writeString(&b, action.keys[1])
	b.WriteString(`,"args":`)
	b.Write(action.vals[1])
	b.WriteString("}}")
	return b.Bytes(), nil
}

// pythonHelpAnswer returns m, a [response] to help, with its value in
// operand/agency's help format: for each action
//
//	{"description": …, "args": {name: {"type": …, "description": …}},
//	 "returns": {"type": …, "description": …}}
//
// built from the action's schemas (args: the properties of the argument
// schema, in order). An entry that is not in this library's format (an
// action's CustomHelp) is left as it is.
func pythonHelpAnswer(m *agency.Message) (*agency.Message, error) {
	value, err := json.Marshal(m.Args)
	if err != nil {
		return nil, err
	}
	if raw, ok := m.Args.(json.RawMessage); ok {
		value = raw
	}
	entries, err := members(value)
	if err != nil {
		return nil, fmt.Errorf("help value: %v", err)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range entries.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, name)
		b.WriteByte(':')
		b.Write(pythonHelpEntry(entries.vals[i]))
	}
	b.WriteByte('}')
	r := *m
	r.Args = json.RawMessage(b.Bytes())
	return &r, nil
}

// pythonHelpEntry converts one action's help entry; see pythonHelpAnswer.
func pythonHelpEntry(entry json.RawMessage) json.RawMessage {
	var h struct {
		Description *string         `json:"description"`
		Args        json.RawMessage `json:"args"`
		Returns     json.RawMessage `json:"returns"`
		Access      *string         `json:"access"`
	}
	if json.Unmarshal(entry, &h) != nil || h.Access == nil || len(h.Args) == 0 {
		return entry // not this library's format: a CustomHelp
	}
	var schema struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(h.Args, &schema) != nil {
		return entry
	}
	var b bytes.Buffer
	b.WriteByte('{')
	if h.Description != nil && *h.Description != "" {
		b.WriteString(`"description":`)
		writeString(&b, *h.Description)
		b.WriteByte(',')
	}
	b.WriteString(`"args":{`)
	if props, err := members(schema.Properties); err == nil {
		for i, name := range props.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(&b, name)
			b.WriteByte(':')
			b.Write(typeAndDescription(props.vals[i]))
		}
	}
	b.WriteByte('}')
	if r := typeAndDescription(h.Returns); len(r) > 2 {
		b.WriteString(`,"returns":`)
		b.Write(r)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// typeAndDescription keeps the "type" and "description" of a JSON Schema.
func typeAndDescription(schema json.RawMessage) []byte {
	var s struct {
		Type        json.RawMessage `json:"type"`
		Description json.RawMessage `json:"description"`
	}
	_ = json.Unmarshal(schema, &s)
	var b bytes.Buffer
	b.WriteByte('{')
	if len(s.Type) > 0 {
		b.WriteString(`"type":`)
		b.Write(s.Type)
	}
	if len(s.Description) > 0 {
		if len(s.Type) > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"description":`)
		b.Write(s.Description)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// object is a JSON object's members, in order.
type object struct {
	keys []string
	vals []json.RawMessage
}

func (o object) get(k string) (json.RawMessage, bool) {
	for i, key := range o.keys {
		if key == k {
			return o.vals[i], true
		}
	}
	return nil, false
}

// members splits the JSON object raw into its members, refusing a key
// given twice: two parsers could read such a message two ways.
func members(raw []byte) (object, error) {
	var o object
	if !jsonscan.Valid(raw) {
		return o, errors.New("not valid JSON")
	}
	// A walk over valid JSON, which needs no syntax checks.
	raw = raw[jsonscan.SkipSpace(raw, 0):]
	if raw[0] != '{' {
		return o, errors.New("not a JSON object")
	}
	o.keys, o.vals = make([]string, 0, 4), make([]json.RawMessage, 0, 4) // a message's parts
	err := jsonscan.Members(raw, func(k string, v []byte) error {
		if _, dup := o.get(k); dup {
			return fmt.Errorf("key %q given twice", k)
		}
		o.keys, o.vals = append(o.keys, k), append(o.vals, v)
		return nil
	})
	return o, err
}

// dropNulls returns the object obj without the given keys where they are
// null.
func dropNulls(obj []byte, keys ...string) ([]byte, error) {
	if !bytes.Contains(obj, []byte("null")) {
		return obj, nil
	}
	o, err := members(obj)
	if err != nil {
		return nil, err
	}
	dropped := func(i int) bool { return string(o.vals[i]) == "null" && slices.Contains(keys, o.keys[i]) }
	some := false
	for i := range o.keys {
		some = some || dropped(i)
	}
	if !some {
		return obj, nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for i, k := range o.keys {
		if dropped(i) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		writeString(&b, k)
		b.WriteByte(':')
		b.Write(o.vals[i])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}
