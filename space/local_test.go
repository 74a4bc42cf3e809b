package space_test

import (
	"testing"

	"go.uber.org/goleak"

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
