package agency

import (
	"reflect"
	"sync"
)

// One rule in every space: where a type holds interface values (any,
// map[string]any, []any, a struct field of type any, …), they hold what
// encoding/json gives them (map[string]any, []any, float64, string, bool,
// nil), whether the value crossed a wire or was handed over in process.
// Values of such types are therefore converted through their JSON
// encoding in process too; types without interfaces are handed over as
// they are.

var interfaceTypes sync.Map // reflect.Type → bool

// holdsInterface reports whether a value of type t can hold an interface
// value that encoding/json would fill in.
func holdsInterface(t reflect.Type) bool {
	if k := t.Kind(); k <= reflect.Complex128 || k == reflect.String {
		return false // the common answer, without the cache's lookup
	}
	if v, ok := interfaceTypes.Load(t); ok {
		return v.(bool)
	}
	holds := walkForInterface(t, map[reflect.Type]bool{})
	interfaceTypes.Store(t, holds)
	return holds
}

func walkForInterface(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return walkForInterface(t.Elem(), seen)
	case reflect.Map:
		return walkForInterface(t.Key(), seen) || walkForInterface(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); (f.IsExported() || f.Anonymous) && walkForInterface(f.Type, seen) {
				return true
			}
		}
	}
	return false
}
