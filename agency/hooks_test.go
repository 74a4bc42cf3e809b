package agency_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// holder is a hook value of a comparable type whose field may hold a value
// of an incomparable one.
type holder struct{ state any }

func (holder) AfterAdd(context.Context) {}

// Hooks compares the values it is given to refuse one given twice: values
// whose type is comparable but whose content is not (a slice or a map
// behind an interface field) are different values, not a panic in
// NewAgent; equal comparable values are still refused.
func TestHooksOfIncomparableContent(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b any
		want error
	}{
		{"slices", holder{state: []int{1}}, holder{state: []int{1}}, nil},
		{"maps", holder{state: map[string]int{}}, holder{state: map[string]int{}}, nil},
		{"a slice and a number", holder{state: 1}, holder{state: []int{1}}, nil},
		{"a number and a slice", holder{state: []int{1}}, holder{state: 1}, nil},
		{"equal numbers", holder{state: 1}, holder{state: 1}, agency.ErrInvalidOption},
		{"different numbers", holder{state: 1}, holder{state: 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("NewAgent panicked: %v", p)
				}
			}()
			_, err := agency.NewAgent("Held", agency.Hooks(tc.a), agency.Hooks(tc.b))
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("NewAgent: %v, want %v", err, tc.want)
			}
		})
	}
}
