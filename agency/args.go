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
	"sync"
	"time"

	"github.com/go-playground/validator/v10"

	"github.com/seed72275b23/agency-go/internal/jsonscan"
)

// typeInfo is what decoding, validating and describing an argument type
// needs, derived once per type and shared by every action that uses it.
type typeInfo struct {
	typ      reflect.Type
	plan     *structPlan
	validate bool // some field carries validator rules
	nilable  bool // some required field, at some depth, can be nil in Go

	schemaOnce sync.Once
	schema     json.RawMessage
	schemaErr  error
}

// structPlan lists a struct type's JSON fields as encoding/json sees them.
type structPlan struct {
	fields   map[string]*fieldPlan
	order    []*fieldPlan // declaration order
	names    []string     // sorted, for error texts
	required []string     // declaration order
}

type fieldPlan struct {
	name     string
	index    []int
	typ      reflect.Type
	rules    string // the validate tag
	required bool
	elem     *structPlan // for a struct field, or the element of a slice field
	slice    bool
	strict   bool     // holds structs of its own, so unknown keys must be caught
	pos      int      // its place in structPlan.order
	fast     fastKind // a plain string, number or boolean, decoded without encoding/json
}

// fastKind is a kind of field decodeObject reads itself, where the JSON
// value is plain: a string without escapes, an integer without fraction or
// exponent, a number, a boolean. Anything else goes to encoding/json,
// which gives the same result and the error texts.
type fastKind uint8

const (
	fastNone fastKind = iota
	fastString
	fastInt
	fastUint
	fastFloat
	fastBool
)

// fastKindOf returns how a field of type t, with the json tag options
// opts, can be decoded without encoding/json.
func fastKindOf(t reflect.Type, opts string) fastKind {
	if strings.Contains(","+opts+",", ",string,") || decodesItself(t) {
		return fastNone
	}
	switch t.Kind() {
	case reflect.String:
		return fastString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fastInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fastUint
	case reflect.Float32, reflect.Float64:
		return fastFloat
	case reflect.Bool:
		return fastBool
	}
	return fastNone
}

var typeInfos sync.Map // reflect.Type → *typeInfo

func typeInfoFor(t reflect.Type) (*typeInfo, error) {
	if v, ok := typeInfos.Load(t); ok {
		return v.(*typeInfo), nil
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("arguments must be a struct type, not %v", t)
	}
	info := &typeInfo{typ: t}
	info.plan = buildPlan(t, map[reflect.Type]*structPlan{}, &info.validate)
	info.nilable = info.plan.nilable(map[*structPlan]bool{})
	v, _ := typeInfos.LoadOrStore(t, info)
	return v.(*typeInfo), nil
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()
	timeType            = reflect.TypeFor[time.Time]()
)

// decodesItself reports whether t decodes through its own method, so that
// its fields are not ours to plan.
func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t == timeType || p.Implements(jsonUnmarshalerType) || p.Implements(textUnmarshalerType)
}

func buildPlan(t reflect.Type, seen map[reflect.Type]*structPlan, hasRules *bool) *structPlan {
	if p, ok := seen[t]; ok {
		return p
	}
	p := &structPlan{fields: map[string]*fieldPlan{}}
	seen[t] = p
	var embedded []*fieldPlan
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		rules := sf.Tag.Get("validate")
		if rules != "" && rules != "-" {
			*hasRules = true
		}
		ft := sf.Type
		base := ft
		if base.Kind() == reflect.Pointer {
			base = base.Elem()
		}
		if sf.Anonymous && name == "" && ft.Kind() == reflect.Pointer && !sf.IsExported() {
			continue // encoding/json cannot allocate it, and skips it too
		}
		if sf.Anonymous && name == "" && base.Kind() == reflect.Struct && !decodesItself(base) {
			// Promoted fields, as encoding/json sees them; shallower names win.
			sub := buildPlan(base, seen, hasRules)
			for _, f := range sub.order {
				g := *f
				g.index = append([]int{i}, f.index...)
				embedded = append(embedded, &g)
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := &fieldPlan{name: name, index: []int{i}, typ: ft, rules: rules, strict: holdsStruct(ft, map[reflect.Type]bool{}), fast: fastKindOf(ft, opts)}
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		f.required = (!omit && ft.Kind() != reflect.Pointer) || hasRule(rules, "required")
		switch {
		case base.Kind() == reflect.Struct && !decodesItself(base):
			f.elem = buildPlan(base, seen, hasRules)
		case (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && structElem(ft.Elem()) != nil:
			f.elem, f.slice = buildPlan(structElem(ft.Elem()), seen, hasRules), ft.Kind() == reflect.Slice
			if !f.slice {
				f.elem = nil // fixed-size arrays decode as plain values
			}
		}
		p.add(f)
	}
	for _, f := range embedded {
		if _, taken := p.fields[f.name]; !taken {
			p.add(f)
		}
	}
	slices.Sort(p.names)
	return p
}

func (p *structPlan) add(f *fieldPlan) {
	f.pos = len(p.order)
	p.fields[f.name] = f
	p.order = append(p.order, f)
	p.names = append(p.names, f.name)
	if f.required {
		p.required = append(p.required, f.name)
	}
}

// nilable reports whether a value of the plan's type can hold nil in a
// required field, at any depth: a value that JSON would encode with null
// there, which the decoder refuses.
func (p *structPlan) nilable(seen map[*structPlan]bool) bool {
	if seen[p] {
		return false
	}
	seen[p] = true
	for _, f := range p.order {
		if f.required && canBeNil(f.typ) || len(f.index) > 1 && f.required {
			return true // a nil embedded pointer hides promoted fields too
		}
		if f.elem != nil && f.elem.nilable(seen) {
			return true
		}
	}
	return false
}

func canBeNil(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Slice, reflect.Map, reflect.Interface, reflect.Pointer:
		return true
	}
	return false
}

// holdsStruct reports whether a value of type t can hold a struct that
// encoding/json fills field by field.
func holdsStruct(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsStruct(t.Elem(), seen)
	case reflect.Map:
		return holdsStruct(t.Elem(), seen)
	case reflect.Struct:
		return !decodesItself(t)
	}
	return false
}

// structElem returns the struct type of a slice element (T or *T) whose
// fields we plan, or nil.
func structElem(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && !decodesItself(t) {
		return t
	}
	return nil
}

// hasRule reports whether a validate tag holds the rule name, before any dive.
func hasRule(rules, name string) bool {
	for _, r := range strings.Split(rules, ",") {
		if r == "dive" || r == "keys" {
			return false
		}
		if r == name {
			return true
		}
	}
	return false
}

// argsError lists the problems with one set of arguments: the first
// maxProblems by name, and how many more there are.
type argsError struct {
	list   problems
	paths  map[string]bool // the fields with a problem, for not naming one twice
	frozen bool            // paths is complete: later problems are not added to it
}

// add records a problem with the field at path. The text is formatted only
// when it will be named.
func (e *argsError) add(path, format string, args ...any) {
	if path == "" {
		path = "(arguments)"
	}
	e.note(path)
	if !e.list.room() {
		e.list.count()
		return
	}
	path = elide(path, maxProblemText/3) // deep paths keep their ends
	e.list.add(path + ": " + truncate(fmt.Sprintf(format, args...), maxProblemText-len(path)-2))
}

// note records that path has a problem.
func (e *argsError) note(path string) {
	if e.frozen {
		return
	}
	if e.paths == nil {
		e.paths = make(map[string]bool)
	}
	e.paths[path] = true
}

// empty reports whether no problem has been recorded.
func (e *argsError) empty() bool { return e.list.n == 0 }

// named reports whether path, or a field that holds it, has a problem
// recorded already. It looks up each of path's prefixes that ends a field
// name or an index: time linear in the length of path, however many
// problems there are.
func (e *argsError) named(path string) bool {
	if e.paths[path] {
		return true
	}
	for i := 0; i < len(path); i++ {
		if (path[i] == '.' || path[i] == '[') && e.paths[path[:i]] {
			return true
		}
	}
	return false
}

func (e *argsError) Error() string { return e.list.join("; ") }

// decodeJSONArgs decodes a JSON object into *dst: unknown fields, missing
// required fields and values of the wrong type are each reported by name.
func decodeJSONArgs[T any](info *typeInfo, raw []byte, dst *T) error {
	var errs argsError
	if t := bytes.Trim(raw, " \t\r\n"); len(t) != len(raw) && jsonscan.Valid(raw) {
		raw = t // white space around the object, which encoding/json allows
	}
	decodeObject(info.plan, raw, reflect.ValueOf(dst).Elem(), "", 0, &errs)
	if errs.empty() {
		return validateArgs(info, dst)
	}
	// The rules of the fields that did decode are worth knowing too: a
	// caller (an LLM above all) fixes every bad field in one go.
	if info.validate {
		errs.frozen = true // skip the fields that failed to decode, not each other
		addRuleProblems(validate.Struct(dst), &errs, errs.named)
	}
	return &errs
}

// maxArgsDepth bounds how deep decodeObject follows nested structs. Each
// level parses what is below it again, so a deep chain of a recursive type
// would cost time quadratic in its length, on the agent's goroutine.
const maxArgsDepth = 64

func decodeObject(p *structPlan, raw []byte, rv reflect.Value, prefix string, depth int, errs *argsError) {
	if depth > maxArgsDepth {
		errs.add(prefix, "nested deeper than %d objects", maxArgsDepth)
		return
	}
	// vals holds each field's value by its place in p.order; nil where the
	// JSON does not give it.
	var small [8][]byte
	vals := small[:0]
	if n := len(p.order); n <= len(small) {
		vals = small[:n]
	} else {
		vals = make([][]byte, n)
	}
	if len(raw) > 0 {
		// Nested objects are slices of one valid document; only the top needs
		// the check. The walk keeps each key once: a key given twice could be
		// read two ways, by an approver and by the decoder.
		if depth == 0 && !jsonscan.Valid(raw) || raw[0] != '{' {
			errs.add(prefix, "must be an object")
			return
		}
		var unknown []string                                     // in the order given
		var seen keySet                                          // the unknown keys
		_ = jsonscan.MembersRaw(raw, func(lit, v []byte) error { // valid JSON: no error
			var f *fieldPlan
			if jsonscan.Plain(lit) {
				f = p.fields[string(lit[1:len(lit)-1])]
			} else if k, err := jsonscan.Unquote(lit); err == nil {
				f = p.fields[k]
			}
			var k string
			if f != nil {
				k = f.name
			} else {
				k, _ = jsonscan.Unquote(lit) // a valid literal unquotes
			}
			switch {
			case f == nil && !seen.add(lit):
				errs.add(join(prefix, k), "given twice")
			case f == nil:
				unknown = append(unknown, k)
			case vals[f.pos] != nil:
				errs.add(join(prefix, k), "given twice")
				vals[f.pos] = v // the last, as encoding/json would
			default:
				vals[f.pos] = v
			}
			return nil
		})
		for _, k := range unknown {
			switch {
			case !errs.list.room():
				errs.add(join(prefix, k), "")
			case len(p.names) == 0:
				errs.add(join(prefix, k), "unknown field; this takes no arguments")
			default:
				errs.add(join(prefix, k), "unknown field; the fields are %s", strings.Join(p.names, ", "))
			}
		}
	}
	for _, name := range p.required {
		if v := vals[p.fields[name].pos]; isNull(v) {
			errs.add(join(prefix, name), "missing required field")
		}
	}
	for _, f := range p.order {
		v := vals[f.pos]
		if isNull(v) {
			continue
		}
		fv := fieldByIndex(rv, f.index)
		if f.fast != fastNone && setFast(f.fast, v, fv) {
			continue
		}
		path := join(prefix, f.name)
		switch {
		case f.elem != nil && !f.slice:
			if fv.Kind() == reflect.Pointer {
				fv.Set(reflect.New(fv.Type().Elem()))
				fv = fv.Elem()
			}
			decodeObject(f.elem, v, fv, path, depth+1, errs)
		case f.elem != nil:
			var items []json.RawMessage
			if err := json.Unmarshal(v, &items); err != nil {
				errs.add(path, "must be an array")
				continue
			}
			s := reflect.MakeSlice(f.typ, len(items), len(items))
			for i, item := range items {
				ev := s.Index(i)
				if ev.Kind() == reflect.Pointer {
					if isNull(item) {
						continue
					}
					ev.Set(reflect.New(ev.Type().Elem()))
					ev = ev.Elem()
				}
				decodeObject(f.elem, item, ev, fmt.Sprintf("%s[%d]", path, i), depth+1, errs)
			}
			fv.Set(s)
		case f.strict:
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.DisallowUnknownFields()
			if err := dec.Decode(fv.Addr().Interface()); err != nil {
				errs.add(path, "%s", describeDecodeError(err, f.typ))
			}
		default: // no struct inside, so no unknown keys to catch: the cheaper call
			if err := json.Unmarshal(v, fv.Addr().Interface()); err != nil {
				errs.add(path, "%s", describeDecodeError(err, f.typ))
			}
		}
	}
}

// setFast sets fv from the valid JSON value v where v is plain for the
// field's kind, reporting whether it did; encoding/json would set the
// same. Anything else (escapes, a fraction for an integer, a value out of
// range, a value of another JSON type) is left to encoding/json.
func setFast(kind fastKind, v []byte, fv reflect.Value) bool {
	switch kind {
	case fastString:
		if v[0] != '"' || !jsonscan.Plain(v) {
			return false
		}
		fv.SetString(string(v[1 : len(v)-1]))
	case fastInt:
		if !isInteger(v) {
			return false
		}
		n, err := strconv.ParseInt(string(v), 10, fv.Type().Bits())
		if err != nil {
			return false
		}
		fv.SetInt(n)
	case fastUint:
		if !isInteger(v) || v[0] == '-' {
			return false
		}
		n, err := strconv.ParseUint(string(v), 10, fv.Type().Bits())
		if err != nil {
			return false
		}
		fv.SetUint(n)
	case fastFloat:
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return false
		}
		x, err := strconv.ParseFloat(string(v), fv.Type().Bits())
		if err != nil {
			return false
		}
		fv.SetFloat(x)
	case fastBool:
		switch string(v) {
		case "true":
			fv.SetBool(true)
		case "false":
			fv.SetBool(false)
		default:
			return false
		}
	default:
		return false
	}
	return true
}

// isInteger reports whether the valid JSON value v is a number without a
// fraction or an exponent.
func isInteger(v []byte) bool {
	if v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// checkNils reports the required fields of a Go value that hold nil, as
// decodeObject reports them missing from JSON: a nil slice, map or
// interface encodes as null, and required means present and not null
// whether or not the value crossed a wire.
func checkNils(p *structPlan, rv reflect.Value, prefix string, depth int, errs *argsError) {
	if depth > maxArgsDepth {
		return // a Go value may hold a cycle; JSON could not encode it anyway
	}
	for _, name := range p.required {
		if fv, ok := fieldIfSet(rv, p.fields[name].index); !ok || canBeNil(fv.Type()) && fv.IsNil() {
			errs.add(join(prefix, name), "missing required field")
		}
	}
	for _, f := range p.order {
		if f.elem == nil {
			continue
		}
		fv, ok := fieldIfSet(rv, f.index)
		if !ok {
			continue
		}
		path := join(prefix, f.name)
		if !f.slice {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			checkNils(f.elem, fv, path, depth+1, errs)
			continue
		}
		for i := range fv.Len() {
			ev := fv.Index(i)
			if ev.Kind() == reflect.Pointer {
				if ev.IsNil() {
					continue
				}
				ev = ev.Elem()
			}
			checkNils(f.elem, ev, fmt.Sprintf("%s[%d]", path, i), depth+1, errs)
		}
	}
}

// fieldIfSet is reflect.Value.FieldByIndex that reports false where an
// embedded pointer on the way is nil (encoding/json leaves the promoted
// fields out then).
func fieldIfSet(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// fieldByIndex is reflect.Value.FieldByIndex that allocates nil embedded
// pointers on the way.
func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

// describeDecodeError says what a field's value should have been.
func describeDecodeError(err error, t reflect.Type) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		base := t
		for base.Kind() == reflect.Pointer {
			base = base.Elem()
		}
		if te.Type == nil || te.Type == base || te.Type == t {
			return "must be " + jsonKindIn(base, te.Value) + ", not " + te.Value
		}
		// The value has the right kind; something inside it does not.
		inner := "a value inside"
		switch {
		case te.Field != "":
			inner = fmt.Sprintf("field %q inside", te.Field)
		case base.Kind() == reflect.Slice || base.Kind() == reflect.Array:
			inner = "an element"
		case base.Kind() == reflect.Map && te.Type == base.Key():
			// encoding/json calls a bad key "number x"; it was the string "x".
			key, _ := strings.CutPrefix(te.Value, "number ")
			return fmt.Sprintf("a key must be %s, not %q", jsonKind(te.Type), key)
		case base.Kind() == reflect.Map:
			inner = "a value"
		}
		return inner + " must be " + jsonKindIn(te.Type, te.Value) + ", not " + te.Value
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKindIn is jsonKind, with the range of an integer type when the value
// was a whole number that does not fit it (300 for a uint8).
func jsonKindIn(t reflect.Type, got string) string {
	num, isNum := strings.CutPrefix(got, "number ")
	if !isNum || strings.ContainsAny(num, ".eE") {
		return jsonKind(t)
	}
	switch k := t.Kind(); {
	case k >= reflect.Int && k <= reflect.Int64:
		bits := t.Bits()
		return fmt.Sprintf("an integer from %d to %d", int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
	case k >= reflect.Uint && k <= reflect.Uintptr:
		return fmt.Sprintf("an integer from 0 to %d", uint64(1)<<t.Bits()-1)
	}
	return jsonKind(t)
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "a string (RFC 3339 date-time)"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "a boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uintptr:
		return "an integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return "an array"
	case t.Kind() == reflect.Map || t.Kind() == reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

// validate is the one validator, shared: it caches what it learns per type.
var validate = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(sf reflect.StructField) string {
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch name {
		case "-":
			return ""
		case "":
			return sf.Name
		}
		return name
	})
	return v
}()

// checkGoArgs checks arguments that came as a Go value of the action's
// type, which skipped decoding: required fields that hold nil are refused
// as if they had crossed a wire, and then the validator rules apply.
func checkGoArgs[T any](info *typeInfo, dst *T) error {
	if !info.nilable {
		return validateArgs(info, dst)
	}
	var errs argsError
	checkNils(info.plan, reflect.ValueOf(dst).Elem(), "", 0, &errs)
	if errs.empty() {
		return validateArgs(info, dst)
	}
	if info.validate {
		errs.frozen = true
		addRuleProblems(validate.Struct(dst), &errs, errs.named)
	}
	return &errs
}

// validateArgs applies the validator rules of the argument type.
func validateArgs[T any](info *typeInfo, dst *T) error {
	if !info.validate {
		return nil
	}
	err := validate.Struct(dst)
	if err == nil {
		return nil
	}
	var errs argsError
	addRuleProblems(err, &errs, nil)
	return &errs
}

// addRuleProblems lists the fields a validator error names, with the rule
// each broke, but for those skip reports.
func addRuleProblems(err error, errs *argsError, skip func(path string) bool) {
	if err == nil {
		return
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) {
		errs.add("", "%v", err)
		return
	}
	for _, fe := range ves {
		path := fe.Namespace()
		if _, rest, ok := strings.Cut(path, "."); ok {
			path = rest // drop the struct's own name
		}
		if skip != nil && skip(path) {
			continue
		}
		rule := fe.Tag()
		if fe.Param() != "" {
			rule += "=" + fe.Param()
		}
		if fe.Tag() == "required" {
			errs.add(path, "required, and must not be empty")
			continue
		}
		errs.add(path, "breaks rule %s", rule)
	}
}
