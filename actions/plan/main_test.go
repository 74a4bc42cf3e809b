package plan_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test leaves a goroutine behind: the coordinator's relay and sweeper
// stop when it leaves its space.
//
// Except pgx's own context watcher: in pgx v5.8.0 a batch (pipeline)
// whose context is cancelled while it reads its results closes without
// unwatching, and leaves that goroutine blocked for good
// (github.com/jackc/pgx issue 1999, fixed by its pull request 2515; v5.12.0
// has the fix). The relay's claim on PostgreSQL is such a batch, cancelled
// when a test halts a coordinator or it leaves its space. Every pgx with
// the fix needs Go 1.25, and the module supports Go 1.24: drop the
// exception once go.mod can require one.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgconn/ctxwatch.(*ContextWatcher).Watch.func1"))
}
