package agency

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"
)

// reflector derives JSON Schema from Go types. One is shared: schemas are
// made once per type and cached.
// reflectMu guards it: a Reflector keeps no promise of safe concurrent use.
var (
	reflector = &jsonschema.Reflector{
		DoNotReference: true, // one self-contained tree, as function-calling APIs want
		ExpandedStruct: true,
		Anonymous:      true,
	}
	reflectMu sync.Mutex
)

// reflectType returns t's schema. The reflector panics on a type it cannot
// describe (a complex number, a channel) and, writing one tree without
// references, recurses without end on a type that contains itself: both are
// errors here, found when the action is registered rather than when help
// runs on the agent's goroutine.
func reflectType(t reflect.Type) (s *jsonschema.Schema, err error) {
	if selfContaining(t, map[reflect.Type]bool{}, map[reflect.Type]bool{}) {
		return nil, fmt.Errorf("help cannot describe %v: the type contains itself; give the action CustomHelp", t)
	}
	reflectMu.Lock()
	defer reflectMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("help cannot describe %v: %v; give the action CustomHelp", t, p)
		}
	}()
	s = reflector.ReflectFromType(t)
	s.Version = ""
	return s, nil
}

var (
	schemaSelfType = reflect.TypeFor[interface{ JSONSchema() *jsonschema.Schema }]()
	schemaAlias    = reflect.TypeFor[interface{ JSONSchemaAlias() any }]()
)

// selfContaining reports whether the reflector, walking t the way it does
// (through pointers, elements, map values and the fields it lists), meets a
// type inside itself. done holds the types already walked without a cycle.
func selfContaining(t reflect.Type, onPath, done map[reflect.Type]bool) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if onPath[t] {
		return true
	}
	if done[t] || t.Implements(schemaSelfType) || t == timeType {
		return false
	}
	onPath[t] = true
	defer delete(onPath, t)
	cycle := false
	switch {
	case t.Implements(schemaAlias):
		alias := reflect.New(t).Elem().Interface().(interface{ JSONSchemaAlias() any }).JSONSchemaAlias()
		cycle = alias != nil && selfContaining(reflect.TypeOf(alias), onPath, done)
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map:
		cycle = selfContaining(t.Elem(), onPath, done)
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			hidden, _, _ := strings.Cut(f.Tag.Get("jsonschema"), ",")
			if (!f.IsExported() && !f.Anonymous) || name == "-" || hidden == "-" {
				continue
			}
			if selfContaining(f.Type, onPath, done) {
				cycle = true
				break
			}
		}
	}
	if !cycle {
		done[t] = true
	}
	return cycle
}

// argsSchema returns the JSON Schema of the argument type: invopop's
// reflection, with "required" set to exactly what the decoder enforces and
// the validator rules written as the matching schema keywords.
func (info *typeInfo) argsSchema() (json.RawMessage, error) {
	info.schemaOnce.Do(func() {
		s, err := reflectType(info.typ)
		if err != nil {
			info.schemaErr = err
			return
		}
		describePlan(s, info.plan, map[*structPlan]bool{})
		info.schema, info.schemaErr = json.Marshal(s)
	})
	return info.schema, info.schemaErr
}

func describePlan(s *jsonschema.Schema, p *structPlan, seen map[*structPlan]bool) {
	if s == nil {
		return
	}
	if seen[p] {
		return // a recursive type: its schema stops here too
	}
	seen[p] = true
	defer delete(seen, p)
	s.Required = p.required
	if len(p.required) == 0 {
		s.Required = nil
	}
	if s.Properties == nil {
		return
	}
	for _, f := range p.order {
		prop, ok := s.Properties.Get(f.name)
		if !ok || prop == nil {
			continue
		}
		applyRules(prop, f.typ, f.rules)
		switch {
		case f.elem != nil && f.slice:
			describePlan(prop.Items, f.elem, seen)
		case f.elem != nil:
			describePlan(prop, f.elem, seen)
		default:
			stripRequired(prop)
		}
	}
}

// stripRequired removes "required" below a value whose fields the decoder
// does not check one by one (a map's values, say), so that the schema never
// promises more than the decoder enforces.
func stripRequired(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	if s.Properties != nil {
		for _, p := range s.Properties.FromOldest() {
			stripRequired(p)
		}
	}
	stripRequired(s.Items)
	stripRequired(s.AdditionalProperties)
	for _, p := range s.PatternProperties {
		stripRequired(p)
	}
	for _, list := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf, s.AllOf, s.PrefixItems} {
		for _, p := range list {
			stripRequired(p)
		}
	}
}

// applyRules writes a field's validator rules into its schema: min and max
// as minimum/maximum, minLength/maxLength or minItems/maxItems by the field's
// kind; len as both bounds; oneof as enum; email and url as formats.
func applyRules(s *jsonschema.Schema, t reflect.Type, rules string) {
	if rules == "" {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	kind := kindOf(t)
	for _, rule := range strings.Split(rules, ",") {
		if rule == "dive" || rule == "keys" {
			return // what follows applies to elements or keys
		}
		if strings.Contains(rule, "|") {
			continue // an alternative; no single keyword says it
		}
		name, param, _ := strings.Cut(rule, "=")
		switch name {
		case "min", "gte":
			bound(s, kind, param, 0, true)
		case "max", "lte":
			bound(s, kind, param, 0, false)
		case "gt":
			if kind == kindNumber {
				s.ExclusiveMinimum = number(param)
			} else {
				bound(s, kind, param, 1, true)
			}
		case "lt":
			if kind == kindNumber {
				s.ExclusiveMaximum = number(param)
			} else {
				bound(s, kind, param, -1, false)
			}
		case "len", "eq":
			if kind == kindNumber {
				s.Minimum, s.Maximum = number(param), number(param)
				continue
			}
			if name == "len" {
				bound(s, kind, param, 0, true)
				bound(s, kind, param, 0, false)
			}
		case "oneof":
			s.Enum = enumValues(param, kind)
		case "email":
			s.Format = "email"
		case "url", "http_url", "uri":
			s.Format = "uri"
		case "uuid", "uuid4", "uuid_rfc4122", "uuid4_rfc4122":
			s.Format = "uuid"
		case "ipv4", "ipv6", "hostname":
			s.Format = name
		case "hostname_rfc1123":
			s.Format = "hostname"
		}
	}
}

type fieldKind int

const (
	kindOther fieldKind = iota
	kindNumber
	kindString
	kindArray
	kindObject
)

func kindOf(t reflect.Type) fieldKind {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return kindNumber
	case reflect.String:
		return kindString
	case reflect.Slice, reflect.Array:
		return kindArray
	case reflect.Map:
		return kindObject
	}
	return kindOther
}

// bound sets a lower (min) or upper bound, shifted by delta for the strict
// comparisons on lengths.
func bound(s *jsonschema.Schema, kind fieldKind, param string, delta int64, min bool) {
	if kind == kindNumber {
		if min {
			s.Minimum = number(param)
		} else {
			s.Maximum = number(param)
		}
		return
	}
	n, err := strconv.ParseInt(param, 10, 64)
	if err != nil || n+delta < 0 {
		return
	}
	u := uint64(n + delta)
	switch {
	case kind == kindString && min:
		s.MinLength = &u
	case kind == kindString:
		s.MaxLength = &u
	case kind == kindArray && min:
		s.MinItems = &u
	case kind == kindArray:
		s.MaxItems = &u
	case kind == kindObject && min:
		s.MinProperties = &u
	case kind == kindObject:
		s.MaxProperties = &u
	}
}

func number(param string) json.Number {
	if _, err := strconv.ParseFloat(param, 64); err != nil {
		return ""
	}
	return json.Number(param)
}

// enumValues splits a oneof parameter as the validator does: by spaces, with
// single quotes around a value that holds spaces.
func enumValues(param string, kind fieldKind) []any {
	var out []any
	for _, v := range splitOneOf(param) {
		if kind == kindNumber {
			if n := number(v); n != "" {
				out = append(out, n)
			}
			continue
		}
		out = append(out, v)
	}
	return out
}

func splitOneOf(param string) []string {
	var out []string
	for len(param) > 0 {
		param = strings.TrimLeft(param, " ")
		if param == "" {
			break
		}
		if param[0] == '\'' {
			end := strings.IndexByte(param[1:], '\'')
			if end < 0 {
				out = append(out, param[1:])
				break
			}
			out = append(out, param[1:end+1])
			param = param[end+2:]
			continue
		}
		v, rest, _ := strings.Cut(param, " ")
		out = append(out, v)
		param = rest
	}
	return out
}

var returnSchemas sync.Map // reflect.Type → *jsonschema.Schema

// returnsBase returns the JSON Schema of a result type, made once per type.
func returnsBase(t reflect.Type) (*jsonschema.Schema, error) {
	if v, ok := returnSchemas.Load(t); ok {
		return v.(*jsonschema.Schema), nil
	}
	base := &jsonschema.Schema{}
	if t.Kind() != reflect.Interface {
		var err error
		if base, err = reflectType(t); err != nil {
			return nil, err
		}
	}
	returnSchemas.Store(t, base)
	return base, nil
}

// returnsSchema returns the JSON Schema of a result type, with description.
func returnsSchema(t reflect.Type, description string) json.RawMessage {
	base, err := returnsBase(t)
	if err != nil {
		return json.RawMessage(`{}`) // not reached: Register checked the type
	}
	s := *base // a shallow copy, to set the description on
	if description != "" {
		s.Description = description
	}
	b, err := json.Marshal(&s)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}
