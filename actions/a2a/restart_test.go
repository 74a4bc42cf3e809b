package a2a_test

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
)

// GetTask answers after a restart, and a call that waited for approval
// waits again and goes on when the approver decides.
func TestServerRestartSQLite(t *testing.T) {
	dir := t.TempDir()
	restart(t, func() *world { return newWorld(t, dir, true) })
}

func TestServerRestartPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	restart(t, func() *world {
		st, err := pgstore.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return newWorldOn(t, st, true)
	})
}

func restart(t *testing.T, open func() *world) {
	t.Helper()
	w := open()
	url := w.http.URL + "/agents/Calculator/"
	done := send(t, url, "alice-token", call("add", map[string]any{"a": 20, "b": 22}))
	waiting := send(t, url, "bob-token", call("reset", nil))
	if waiting.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("reset: %s", dump(waiting))
	}
	<-w.ap.asked
	w.stop()

	w = open()
	url = w.http.URL + "/agents/Calculator/"
	got, r := getTask(t, url, "alice-token", done.ID)
	if r.Error != nil || resultOf(t, got) != 42.0 {
		t.Fatalf("after the restart: %+v %s", r.Error, dump(got))
	}
	if _, r := getTask(t, url, "bob-token", done.ID); r.Error == nil {
		t.Fatal("bob reads alice's task after the restart")
	}
	if got, _ := getTask(t, url, "bob-token", waiting.ID); got == nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the waiting task after the restart: %s", dump(got))
	}
	if who := <-w.ap.asked; who != "bob" {
		t.Fatalf("asked again for %q", who)
	}
	w.ap.decide <- true
	if got := resultOf(t, waitState(t, url, "bob-token", waiting.ID, a2a.TaskStateCompleted)); got != "reset done" {
		t.Fatalf("reset = %v", got)
	}
}
