package a2a_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	a2abridge "github.com/seed72275b23/agency-go/actions/a2a"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// Two server processes (two amqpspace connections, two stores on one
// PostgreSQL schema) behind one URL: a task taken by one is read and
// canceled through the other, a caller speaks through both, another
// caller reads nothing.
func TestServersShareTasks(t *testing.T) {
	ctx := testCtx(t)
	dsn := pgtest.DSN(t)
	exchange := amqptest.Exchange(t)
	ap := newApprovals()
	release := make(chan struct{})
	defer close(release)

	serve := func(instance string, withCalculator bool) string {
		sp := amqptest.NewSpace(t, amqpspace.Config{Exchange: exchange})
		if withCalculator {
			if err := sp.Add(ctx, calculator(ap, nil, release)); err != nil {
				t.Fatal(err)
			}
		}
		st, err := pgstore.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		srv, err := a2abridge.NewServer(ctx, a2abridge.Config{
			Space: sp, Agents: []string{"Calculator"}, Store: st, Authenticate: authenticate, Instance: instance,
			CallerAgent: func(c string) string { return c + "@" + instance },
		})
		if err != nil {
			t.Fatal(err)
		}
		h := httptest.NewServer(srv)
		t.Cleanup(func() {
			h.Close()
			_ = srv.Close(context.Background())
		})
		return h.URL + "/agents/Calculator/"
	}
	one, two := serve("one", true), serve("two", false)

	task := send(t, one, "alice-token", call("add", map[string]any{"a": 1, "b": 2}))
	if got, r := getTask(t, two, "alice-token", task.ID); r.Error != nil || resultOf(t, got) != 3.0 {
		t.Fatalf("alice's task through the other server: %+v", r.Error)
	}
	if _, r := getTask(t, two, "bob-token", task.ID); r.Error == nil {
		t.Fatal("bob read alice's task through the other server")
	}
	if got := resultOf(t, send(t, two, "alice-token", call("add", map[string]any{"a": 2, "b": 2}))); got != 4.0 {
		t.Fatalf("alice through the second server: %v", got)
	}

	waiting := send(t, one, "alice-token", call("reset", nil))
	if who := <-ap.asked; who != "alice@one" {
		t.Fatalf("the approver was asked for %q", who)
	}
	if r := rpc(t, two, "alice-token", "CancelTask", map[string]any{"id": waiting.ID}); r.Error != nil {
		t.Fatalf("cancel through the other server: %+v", r.Error)
	}
	ap.decide <- true // too late: the task stays canceled
	waitState(t, one, "alice-token", waiting.ID, a2a.TaskStateCanceled)
}
