package space_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
	"github.com/seed72275b23/agency-go/space/spacetest"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// agent's delivery loop and every handler the suite starts must be gone once
// the spaces are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestLocal(t *testing.T) {
	spacetest.Run(t, func(*testing.T) space.Space { return space.NewLocal() },
		spacetest.SizeLimited(64<<10, func(*testing.T) space.Space { return space.NewLocal(space.MaxMessageSize(64 << 10)) }))
}

// A wrong option is reported by NewLocal, which applies it, with an error
// that names it; making the option is no mistake yet.
func TestNewLocalRefusesAWrongOption(t *testing.T) {
	for _, n := range []int{0, -1} {
		opt := space.MaxMessageSize(n) // no panic here: only NewLocal checks
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, agency.ErrInvalidOption) || !strings.Contains(err.Error(), fmt.Sprintf("MaxMessageSize(%d)", n)) {
					t.Errorf("NewLocal(MaxMessageSize(%d)) panicked with %v, want an error matching agency.ErrInvalidOption naming the option", n, err)
				}
			}()
			space.NewLocal(opt)
		}()
	}
}
