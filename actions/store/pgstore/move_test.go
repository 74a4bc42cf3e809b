package pgstore_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
)

// moveCommands returns the two shell blocks of docs/store.md's "Moving
// from SQLite to PostgreSQL": the export and the import.
func moveCommands(t *testing.T) (export, imp string) {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/store.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Moving from SQLite to PostgreSQL")
	if !ok {
		t.Fatal("docs/store.md has no section on moving from SQLite to PostgreSQL")
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 2 {
		t.Fatalf("the section has %d sh blocks, want the export and the import", len(blocks))
	}
	undent := func(s string) string { return regexp.MustCompile(`(?m)^   `).ReplaceAllString(s, "") }
	return undent(blocks[0][1]), undent(blocks[1][1])
}

// TestMoveFromSQLite runs the move that docs/store.md describes on a
// SQLite file with documents and queued messages, and compares everything
// afterwards.
func TestMoveFromSQLite(t *testing.T) {
	base := pgtest.URL(t)
	for _, tool := range []string{"sqlite3", "psql"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian packages sqlite3 and postgresql-client)", tool)
		}
	}
	export, imp := moveCommands(t)
	ctx := context.Background()
	dir := t.TempDir()

	// The program's SQLite file: documents written and rewritten, deleted,
	// with bodies that CSV must quote, and messages not yet sent.
	src, err := sqlitestore.Open(ctx, filepath.Join(dir, "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	msg := func(n string) store.Outgoing {
		o, err := store.NewOutgoing("Coordinator", &agency.Message{To: "HrAgent", Action: "run", Args: map[string]string{"n": n, "q": `a "quoted", multi
line value`}})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	steps := []store.Doc{
		{Kind: "step", ID: "s3", Parent: "p1", Session: "s1", User: "u1", Body: []byte(`{"text":"comma, \"quote\"","n":3}`)},
		{Kind: "step", ID: "s1", Parent: "p1", Session: "s1", User: "u1", Body: []byte("{\n  \"text\": \"héllo ✓\"\n}")},
		{Kind: "step", ID: "s2", Parent: "p1", Body: []byte(`""`)},
	}
	apply := func(c store.Changes) {
		t.Helper()
		if err := src.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	apply(store.Changes{Put: []store.Doc{{Kind: "plan", ID: "p1", Session: "s1", User: "u1", Body: []byte(`{"goal":"onboard"}`)}}})
	apply(store.Changes{Put: steps, Send: []store.Outgoing{msg("1")}})
	steps[0].Version = 1
	steps[0].Body = []byte(`{"status":"approved"}`)
	apply(store.Changes{Put: steps[:1], Send: []store.Outgoing{msg("2"), msg("3")}})
	apply(store.Changes{Put: []store.Doc{{Kind: "tmp", ID: "t", Body: []byte(`1`)}}})
	apply(store.Changes{Delete: []store.Doc{{Kind: "tmp", ID: "t", Version: 1}}})
	if got, err := src.Claim(ctx, "Coordinator", 1, time.Millisecond); err != nil || len(got) != 1 {
		t.Fatalf("Claim: %v %v", got, err) // a relay's attempt: Attempts 1 must move too
	}

	// 2. The PostgreSQL store, opened once to create its tables.
	schema := pgtest.Schema(t)
	dsn := pgtest.WithSearchPath(base, schema)
	dst, err := pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	dst.Close()

	// 3 and 4, as written in the docs.
	run := func(script string) {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "DATABASE_URL="+base, "PGOPTIONS=")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s\n%s", err, script, out.String())
		}
	}
	run(export)
	run(strings.ReplaceAll(imp, "search_path=plans", "search_path="+schema))

	dst, err = pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	for _, q := range []store.Query{{Kind: "plan"}, {Kind: "step"}, {Kind: "step", Newest: true}, {Kind: "step", User: "u1"}, {Kind: "tmp"}} {
		want, err := src.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dst.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("List(%+v): %d documents after the move, %d before", q, len(got), len(want))
		}
		for i := range want {
			w, g := want[i], got[i]
			if g.Kind != w.Kind || g.ID != w.ID || g.Parent != w.Parent || g.Session != w.Session || g.User != w.User ||
				g.Version != w.Version || !bytes.Equal(g.Body, w.Body) || !g.Created.Equal(w.Created) || !g.Updated.Equal(w.Updated) {
				t.Errorf("List(%+v)[%d]:\n moved  %+v\n before %+v", q, i, g, w)
			}
		}
	}
	var want, got []store.Outgoing
	for deadline := time.Now().Add(10 * time.Second); len(want) < 3; time.Sleep(time.Millisecond) {
		if want, err = src.Claim(ctx, "", 10, time.Hour); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the claimed entry never came back in SQLite")
		}
	}
	if got, err = dst.Claim(ctx, "", 10, time.Hour); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages after the move, %d before", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.From != w.From || !bytes.Equal(g.Message, w.Message) || !g.Created.Equal(w.Created) || g.Attempts != w.Attempts {
			t.Errorf("message %d:\n moved  %+v\n before %+v", i, g, w)
		}
	}
	// The recipients moved with the messages, and the tombstone with its
	// version.
	var blank int
	if err := pool(t, dsn).QueryRow(ctx, `SELECT count(*) FROM store_outbox WHERE recipient <> 'HrAgent'`).Scan(&blank); err != nil || blank != 0 {
		t.Errorf("%d moved entries lost their recipient (%v)", blank, err)
	}
	if err := dst.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "tmp", ID: "t", Body: []byte(`2`)}}}); err != nil {
		t.Fatal(err)
	}
	if d, err := dst.Get(ctx, "tmp", "t"); err != nil || d.Version != 2 {
		t.Errorf("tmp/t created again after the move: %+v, %v; want version 2, after the version it was deleted at", d, err)
	}
	// And the moved store goes on: versions continue, new documents come
	// last.
	steps[0].Version = 2
	if err := dst.Apply(ctx, store.Changes{Put: []store.Doc{steps[0], {Kind: "step", ID: "s4", Parent: "p1", Body: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	if docs, _ := dst.List(ctx, store.Query{Kind: "step", Parent: "p1", Newest: true, Limit: 1}); len(docs) != 1 || docs[0].ID != "s4" {
		t.Errorf("newest step after the move: %v", docs)
	}
}
