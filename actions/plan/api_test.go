package plan_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/seed72275b23/agency-go/actions/plan"
)

// The Coordinator's API is what a user calls: its hooks (AfterAdd,
// HandleActionValue, …) are the agent's business, not methods of it.
func TestCoordinatorMethods(t *testing.T) {
	var names []string
	typ := reflect.TypeFor[*plan.Coordinator]()
	for i := range typ.NumMethod() {
		names = append(names, typ.Method(i).Name)
	}
	if want := []string{"Agent"}; !slices.Equal(names, want) {
		t.Errorf("*Coordinator has methods %v, want %v", names, want)
	}
}
