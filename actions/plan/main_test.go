package plan_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test leaves a goroutine behind: the coordinator's relay and sweeper
// stop when it leaves its space.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
