package a2a_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	a2abridge "github.com/seed72275b23/agency-go/actions/a2a"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"

	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
)

// GetTask answers after a restart, and a call that waited for approval
// waits again and goes on when the approver decides.
func TestServerRestartSQLite(t *testing.T) {
	dir := t.TempDir()
	restart(t, func() *world { return newWorld(t, dir, true) }, func() store.Store {
		st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "tasks.db"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestServerRestartPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	restart(t, func() *world {
		st, err := pgstore.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return newWorldOn(t, st, true)
	}, func() store.Store {
		st, err := pgstore.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// restart serves, stops, leaves in the store what a server that crashed
// while running a call leaves (raw opens the store), and serves again.
func restart(t *testing.T, open func() *world, raw func() store.Store) {
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
	crashed := crash(t, raw())

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
	// The call that ran when the server crashed: failed, saying so.
	got, r = getTask(t, url, "alice-token", crashed)
	if r.Error != nil {
		t.Fatalf("the crashed task: %+v", r.Error)
	}
	if typ, text := failureOf(t, got); typ != "action_failed" || !strings.Contains(text, "restarted while this call ran") {
		t.Fatalf("the crashed task: %s %s", typ, text)
	}
}

// crash writes what a server that died while running alice's call leaves:
// the task working, and its mark.
func crash(t *testing.T, st store.Store) a2a.TaskID {
	t.Helper()
	defer st.Close()
	id := a2a.NewTaskID()
	task := a2a.Task{ID: id, ContextID: "ctx", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	body, _ := json.Marshal(task)
	err := st.Apply(context.Background(), store.Changes{Put: []store.Doc{
		{Kind: a2abridge.KindTask, ID: string(id), Parent: "Calculator", User: "alice", Session: "ctx", Body: body},
		{Kind: a2abridge.KindRunning, ID: string(id), Parent: "Calculator", User: "alice", Body: json.RawMessage(`{}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}
