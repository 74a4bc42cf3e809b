package planhttp_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test leaves a goroutine behind: the coordinators' relays and
// sweepers stop with their spaces, the browser with its context.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
