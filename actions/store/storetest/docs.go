package storetest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

var docTests = []test{
	{"GetMissing", testGetMissing},
	{"CreateAndGet", testCreateAndGet},
	{"CreateExisting", testCreateExisting},
	{"Update", testUpdate},
	{"StaleUpdate", testStaleUpdate},
	{"UpdateMissing", testUpdateMissing},
	{"AllOrNothing", testAllOrNothing},
	{"Delete", testDelete},
	{"DeleteConflicts", testDeleteConflicts},
	{"DeleteAndCreateAtomically", testDeleteAndCreate},
	{"CreateAgainAfterDelete", testCreateAgain},
	{"StaleWriterAfterDeleteAndCreate", testNoABA},
	{"KindsAreSeparate", testKindsSeparate},
	{"JSONBodies", testJSONBodies},
	{"EmptyChanges", testEmptyChanges},
	{"Invalid", testInvalid},
	{"TextNoStoreKeeps", testBadText},
}

func testGetMissing(e *env) {
	e.absent("plan", "p1")
	e.put(doc("plan", "p1", 0, `{}`))
	e.absent("plan", "p2")
	e.absent("step", "p1")
}

func testCreateAndGet(e *env) {
	before := time.Now().Add(-time.Minute) // clocks of a database server may differ a little
	in := store.Doc{Kind: "plan", ID: "p1", Parent: "root", Session: "s1", User: "u1",
		Body: []byte(`{"goal":"onboard","n":1}`),
		// Ignored on input:
		Created: time.Unix(1, 0), Updated: time.Unix(2, 0)}
	e.put(in)
	d := e.get("plan", "p1")
	if d.Kind != "plan" || d.ID != "p1" || d.Parent != "root" || d.Session != "s1" || d.User != "u1" {
		e.t.Fatalf("Get returned %+v, want the fields written", d)
	}
	if d.Version != 1 {
		e.t.Errorf("a new document is at version %d, want 1", d.Version)
	}
	if string(d.Body) != `{"goal":"onboard","n":1}` {
		e.t.Errorf("body %s, want it byte for byte", d.Body)
	}
	if d.Created.IsZero() || !d.Created.Equal(d.Updated) {
		e.t.Errorf("Created %v, Updated %v: want both set, and equal on creation", d.Created, d.Updated)
	}
	if d.Created.Before(before) {
		e.t.Errorf("Created %v is not the time of the Apply (the caller's value was not ignored?)", d.Created)
	}
	// The caller's slice is not the store's.
	d.Body[0] = '['
	if got := e.get("plan", "p1"); string(got.Body) != `{"goal":"onboard","n":1}` {
		e.t.Errorf("changing a returned body changed the stored one: %s", got.Body)
	}
}

func testCreateExisting(e *env) {
	e.put(doc("plan", "p1", 0, `{"v":1}`))
	err := e.st.Apply(e.ctx(), store.Changes{Put: []store.Doc{doc("plan", "p1", 0, `{"v":2}`)}})
	wantErr(e.t, "creating an existing document", err, store.ErrConflict)
	if d := e.get("plan", "p1"); string(d.Body) != `{"v":1}` || d.Version != 1 {
		e.t.Errorf("after the refused create: %s at version %d, want the first body at 1", d.Body, d.Version)
	}
}

func testUpdate(e *env) {
	e.put(store.Doc{Kind: "step", ID: "s1", Parent: "p1", Session: "a", User: "u1", Body: []byte(`{"status":"planned"}`)})
	first := e.get("step", "s1")
	next := first
	next.Body = []byte(`{"status":"approved"}`)
	next.Session, next.User = "b", "u2" // index fields are replaced too
	next.Parent = ""
	e.put(next)
	d := e.get("step", "s1")
	if d.Version != 2 || string(d.Body) != `{"status":"approved"}` {
		e.t.Fatalf("after the update: %s at version %d, want the new body at 2", d.Body, d.Version)
	}
	if d.Parent != "" || d.Session != "b" || d.User != "u2" {
		e.t.Errorf("index fields after the update: %q %q %q, want \"\" b u2", d.Parent, d.Session, d.User)
	}
	if !d.Created.Equal(first.Created) {
		e.t.Errorf("Created moved from %v to %v on update", first.Created, d.Created)
	}
	if d.Updated.Before(first.Updated) {
		e.t.Errorf("Updated went back from %v to %v", first.Updated, d.Updated)
	}
	// And again from the version just written, as a caller that keeps its
	// copy does: the version after a write is the version given plus one.
	next.Version++
	next.Body = []byte(`{"status":"completed"}`)
	e.put(next)
	if d := e.get("step", "s1"); d.Version != 3 {
		e.t.Errorf("version %d after the second update, want 3", d.Version)
	}
}

func testStaleUpdate(e *env) {
	e.put(doc("plan", "p1", 0, `{"v":1}`))
	e.put(doc("plan", "p1", 1, `{"v":2}`))
	for _, v := range []int64{1, 3, 99} {
		err := e.st.Apply(e.ctx(), store.Changes{Put: []store.Doc{doc("plan", "p1", v, `{"v":"stale"}`)}})
		wantErr(e.t, "an update at a version that is not the stored one", err, store.ErrConflict)
	}
	if d := e.get("plan", "p1"); string(d.Body) != `{"v":2}` || d.Version != 2 {
		e.t.Errorf("after stale updates: %s at version %d, want {\"v\":2} at 2", d.Body, d.Version)
	}
}

func testUpdateMissing(e *env) {
	err := e.st.Apply(e.ctx(), store.Changes{Put: []store.Doc{doc("plan", "nope", 1, `{}`)}})
	wantErr(e.t, "updating a document that does not exist", err, store.ErrConflict)
	e.absent("plan", "nope")
}

func testAllOrNothing(e *env) {
	e.put(doc("plan", "p1", 0, `{"v":1}`), doc("step", "s1", 0, `{"v":1}`))
	e.put(doc("step", "s1", 1, `{"v":2}`))
	del := doc("step", "gone", 0, `{}`)
	e.put(del)
	del.Version = 1

	msg := outgoing(e.t, "Coordinator", "HrAgent", "run")
	cases := map[string]store.Changes{
		"stale put last": {
			Put:    []store.Doc{doc("plan", "p1", 1, `{"v":2}`), doc("plan", "p2", 0, `{}`), doc("step", "s1", 1, `{"v":3}`)},
			Delete: []store.Doc{del},
			Send:   []store.Outgoing{msg},
		},
		"existing create first": {
			Put:    []store.Doc{doc("plan", "p1", 0, `{}`), doc("plan", "p2", 0, `{}`)},
			Delete: []store.Doc{del},
			Send:   []store.Outgoing{msg},
		},
		"stale delete": {
			Put:    []store.Doc{doc("plan", "p1", 1, `{"v":2}`), doc("plan", "p2", 0, `{}`)},
			Delete: []store.Doc{{Kind: "step", ID: "s1", Version: 1}},
			Send:   []store.Outgoing{msg},
		},
	}
	for name, c := range cases {
		err := e.st.Apply(e.ctx(), c)
		wantErr(e.t, name, err, store.ErrConflict)
		if d := e.get("plan", "p1"); d.Version != 1 || string(d.Body) != `{"v":1}` {
			e.t.Errorf("%s: plan p1 was written (%s, version %d)", name, d.Body, d.Version)
		}
		if d := e.get("step", "s1"); d.Version != 2 {
			e.t.Errorf("%s: step s1 was written (version %d)", name, d.Version)
		}
		e.absent("plan", "p2")
		e.get("step", "gone")
		if out := e.claim("", 10, time.Hour); len(out) != 0 {
			e.t.Fatalf("%s: a refused Apply queued %d messages", name, len(out))
		}
	}
	// And the same changes with the right versions go through, all of them.
	e.apply(store.Changes{
		Put:    []store.Doc{doc("plan", "p1", 1, `{"v":2}`), doc("plan", "p2", 0, `{}`), doc("step", "s1", 2, `{"v":3}`)},
		Delete: []store.Doc{del},
		Send:   []store.Outgoing{msg},
	})
	if d := e.get("plan", "p1"); d.Version != 2 {
		e.t.Errorf("plan p1 at version %d, want 2", d.Version)
	}
	if d := e.get("step", "s1"); d.Version != 3 {
		e.t.Errorf("step s1 at version %d, want 3", d.Version)
	}
	e.get("plan", "p2")
	e.absent("step", "gone")
	if out := e.claim("", 10, time.Hour); len(out) != 1 {
		e.t.Errorf("%d messages queued, want 1", len(out))
	}
}

func testDelete(e *env) {
	e.put(store.Doc{Kind: "message", ID: "m1", User: "u1", Body: []byte(`"hi"`)},
		store.Doc{Kind: "message", ID: "m2", User: "u1", Body: []byte(`"there"`)})
	e.put(store.Doc{Kind: "message", ID: "m2", User: "u1", Version: 1, Body: []byte(`"there!"`)})
	// The way a user's documents go: list them, delete what was read.
	docs := e.list(store.Query{Kind: "message", User: "u1"})
	if len(docs) != 2 {
		e.t.Fatalf("listed %d messages, want 2", len(docs))
	}
	e.apply(store.Changes{Delete: docs})
	e.absent("message", "m1")
	e.absent("message", "m2")
	if docs := e.list(store.Query{Kind: "message"}); len(docs) != 0 {
		e.t.Errorf("List after deleting everything: %v", ids(docs))
	}
	// Deleting again: there is nothing at that version any more.
	err := e.st.Apply(e.ctx(), store.Changes{Delete: docs[:1]})
	wantErr(e.t, "deleting a deleted document", err, store.ErrConflict)
}

func testDeleteConflicts(e *env) {
	e.put(doc("plan", "p1", 0, `{}`))
	e.put(doc("plan", "p1", 1, `{"v":2}`))
	for _, v := range []int64{1, 3} {
		err := e.st.Apply(e.ctx(), store.Changes{Delete: []store.Doc{{Kind: "plan", ID: "p1", Version: v}}})
		wantErr(e.t, "deleting at a version that is not the stored one", err, store.ErrConflict)
	}
	err := e.st.Apply(e.ctx(), store.Changes{Delete: []store.Doc{{Kind: "plan", ID: "nope", Version: 1}}})
	wantErr(e.t, "deleting a document that does not exist", err, store.ErrConflict)
	err = e.st.Apply(e.ctx(), store.Changes{Delete: []store.Doc{{Kind: "plan", ID: "p1"}}})
	wantErr(e.t, "deleting without the version read", err, store.ErrInvalid)
	if d := e.get("plan", "p1"); d.Version != 2 {
		e.t.Errorf("version %d after refused deletes, want 2", d.Version)
	}
}

func testDeleteAndCreate(e *env) {
	e.put(doc("draft", "d1", 0, `{"text":"draft"}`))
	e.apply(store.Changes{
		Delete: []store.Doc{{Kind: "draft", ID: "d1", Version: 1}},
		Put:    []store.Doc{doc("final", "d1", 0, `{"text":"final"}`)},
	})
	e.absent("draft", "d1")
	if d := e.get("final", "d1"); string(d.Body) != `{"text":"final"}` {
		e.t.Errorf("final body %s", d.Body)
	}
}

func testCreateAgain(e *env) {
	e.put(doc("plan", "p1", 0, `{"n":1}`))
	e.put(doc("plan", "p1", 1, `{"n":2}`))
	e.apply(store.Changes{Delete: []store.Doc{{Kind: "plan", ID: "p1", Version: 2}}})
	e.absent("plan", "p1")
	e.put(doc("plan", "p1", 0, `{"n":3}`))
	d := e.get("plan", "p1")
	if string(d.Body) != `{"n":3}` || d.Version <= 2 {
		e.t.Fatalf("created again: %s at version %d, want {\"n\":3} at a version above 2, the one it was deleted at", d.Body, d.Version)
	}
	// It goes on from there, one version per write.
	e.put(doc("plan", "p1", d.Version, `{"n":4}`))
	if d2 := e.get("plan", "p1"); d2.Version != d.Version+1 {
		e.t.Errorf("after a write at version %d: version %d, want %d", d.Version, d2.Version, d.Version+1)
	}
	// So does a document deleted in the same Apply that creates another.
	e.put(doc("plan", "p2", 0, `1`))
	e.apply(store.Changes{
		Delete: []store.Doc{{Kind: "plan", ID: "p2", Version: 1}},
		Put:    []store.Doc{doc("plan", "p3", 0, `1`)},
	})
	e.put(doc("plan", "p2", 0, `2`))
	if d := e.get("plan", "p2"); d.Version <= 1 {
		e.t.Errorf("p2 created again at version %d, want more than 1", d.Version)
	}
}

// testNoABA: a writer reads a document; meanwhile someone deletes it and
// creates it again. The writer's compare-and-set must fail: the document
// it read is gone, whatever the new one holds (no A-B-A).
func testNoABA(e *env) {
	e.put(doc("plan", "p1", 0, `"first"`))
	stale := e.get("plan", "p1")
	e.apply(store.Changes{Delete: []store.Doc{{Kind: "plan", ID: "p1", Version: stale.Version}}})
	e.put(doc("plan", "p1", 0, `"second"`))

	stale.Body = []byte(`"overwritten by a stale writer"`)
	err := e.st.Apply(e.ctx(), store.Changes{Put: []store.Doc{stale}})
	wantErr(e.t, "Put at the version read before a delete and a new creation", err, store.ErrConflict)
	err = e.st.Apply(e.ctx(), store.Changes{Delete: []store.Doc{stale}})
	wantErr(e.t, "Delete at the version read before a delete and a new creation", err, store.ErrConflict)
	if d := e.get("plan", "p1"); string(d.Body) != `"second"` {
		e.t.Fatalf("body %s, want the new document's", d.Body)
	}

	// Twice over, with writes in between: a version is never given twice
	// to one kind and id.
	seen := map[int64]bool{}
	for i := range 3 {
		d := e.get("plan", "p1")
		if seen[d.Version] {
			e.t.Fatalf("round %d: version %d again", i, d.Version)
		}
		seen[d.Version] = true
		e.put(doc("plan", "p1", d.Version, `"written"`))
		d = e.get("plan", "p1")
		seen[d.Version] = true
		e.apply(store.Changes{Delete: []store.Doc{d}})
		e.put(doc("plan", "p1", 0, `"again"`))
	}
}

func testKindsSeparate(e *env) {
	e.put(doc("plan", "x", 0, `"plan"`), doc("step", "x", 0, `"step"`))
	if d := e.get("plan", "x"); string(d.Body) != `"plan"` {
		e.t.Errorf("plan x: %s", d.Body)
	}
	if d := e.get("step", "x"); string(d.Body) != `"step"` {
		e.t.Errorf("step x: %s", d.Body)
	}
	e.apply(store.Changes{Delete: []store.Doc{{Kind: "plan", ID: "x", Version: 1}}})
	e.get("step", "x")
}

// bodies are JSON texts that must read back byte for byte.
var bodies = []string{
	`{}`,
	`[]`,
	`null`,
	`true`,
	`42`,
	`-0.5e-10`,
	`12345678901234567890123456789`, // beyond int64 and float64's precision
	`"text"`,
	`{"b":1,"a":2}`, // key order kept
	"{\n  \"spaced\" : [ 1 , 2 ]\t}",
	`{"dup":1,"dup":2}`,
	`{"nul":"\u0000"}`,
	`{"esc":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}`,
	`{"utf8":"héllo wörld ✓ 😀 日本語"}`,
	`{"html":"<a href=\"x\">&amp;</a>"}`,
	`{"deep":[[[[[[[[[[{"k":[null]}]]]]]]]]]]}`,
}

func testJSONBodies(e *env) {
	var docs []store.Doc
	for i, b := range bodies {
		docs = append(docs, store.Doc{Kind: "body", ID: string(rune('a' + i)), Body: []byte(b)})
	}
	big := `{"big":"` + strings.Repeat("0123456789abcdef", 1<<16) + `"}` // 1 MiB
	docs = append(docs, store.Doc{Kind: "body", ID: "big", Body: []byte(big)})
	e.put(docs...)
	for _, d := range docs {
		got := e.get("body", d.ID)
		if !bytes.Equal(got.Body, d.Body) {
			e.t.Errorf("body %s read back as %s", trim(d.Body), trim(got.Body))
		}
	}
	listed := e.list(store.Query{Kind: "body"})
	if len(listed) != len(docs) {
		e.t.Fatalf("List returned %d bodies, want %d", len(listed), len(docs))
	}
	for i, d := range listed {
		if !bytes.Equal(d.Body, docs[i].Body) {
			e.t.Errorf("List: body %s read back as %s", trim(docs[i].Body), trim(d.Body))
		}
	}
	// A Go value encoded and decoded again is the same value.
	type step struct {
		Action string          `json:"action"`
		Args   json.RawMessage `json:"args"`
		Seq    int             `json:"seq"`
		Tags   []string        `json:"tags"`
	}
	in := step{Action: "create_employee_record", Args: json.RawMessage(`{"name":"Jessica Smith"}`), Seq: 1, Tags: []string{"hr"}}
	b, _ := json.Marshal(in)
	e.put(store.Doc{Kind: "step", ID: "s1", Body: b})
	var out step
	if err := json.Unmarshal(e.get("step", "s1").Body, &out); err != nil {
		e.t.Fatal(err)
	}
	if out.Action != in.Action || string(out.Args) != string(in.Args) || out.Seq != 1 || len(out.Tags) != 1 {
		e.t.Errorf("decoded %+v, want %+v", out, in)
	}
}

func trim(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

func testEmptyChanges(e *env) {
	e.apply(store.Changes{})
	e.apply(store.Changes{Put: []store.Doc{}, Delete: nil, Send: []store.Outgoing{}})
}

func testInvalid(e *env) {
	e.put(doc("plan", "p1", 0, `{}`))
	good := outgoing(e.t, "Coordinator", "HrAgent", "run")
	forged := good
	forged.From = "Mallory"
	noID, err := json.Marshal(&agency.Message{To: "HrAgent", From: "Coordinator", Action: "run"})
	if err != nil {
		e.t.Fatal(err)
	}
	cases := map[string]store.Changes{
		"no kind":            {Put: []store.Doc{doc("", "x", 0, `{}`)}},
		"no id":              {Put: []store.Doc{doc("plan", "", 0, `{}`)}},
		"negative version":   {Put: []store.Doc{doc("plan", "p1", -1, `{}`)}},
		"no body":            {Put: []store.Doc{{Kind: "plan", ID: "p2"}}},
		"body not JSON":      {Put: []store.Doc{doc("plan", "p2", 0, `{"a":`)}},
		"two JSON values":    {Put: []store.Doc{doc("plan", "p2", 0, `{} {}`)}},
		"put twice":          {Put: []store.Doc{doc("plan", "p2", 0, `{}`), doc("plan", "p2", 0, `{}`)}},
		"put and delete":     {Put: []store.Doc{doc("plan", "p1", 1, `{}`)}, Delete: []store.Doc{doc("plan", "p1", 1, ``)}},
		"delete without id":  {Delete: []store.Doc{{Kind: "plan", Version: 1}}},
		"sender not an id":   {Send: []store.Outgoing{{From: "", Message: good.Message}}},
		"message not JSON":   {Send: []store.Outgoing{{From: "Coordinator", Message: []byte(`{"to":`)}}},
		"not a message":      {Send: []store.Outgoing{{From: "Coordinator", Message: []byte(`{"hello":"world"}`)}}},
		"another's message":  {Send: []store.Outgoing{forged}},
		"message without id": {Send: []store.Outgoing{{From: "Coordinator", Message: noID}}},
		"good docs, bad message": {
			Put:  []store.Doc{doc("plan", "p2", 0, `{}`)},
			Send: []store.Outgoing{{From: "Coordinator", Message: []byte(`[]`)}},
		},
	}
	for name, c := range cases {
		err := e.st.Apply(e.ctx(), c)
		wantErr(e.t, name, err, store.ErrInvalid)
	}
	e.absent("plan", "p2")
	if d := e.get("plan", "p1"); d.Version != 1 {
		e.t.Errorf("plan p1 at version %d after invalid changes, want 1", d.Version)
	}
	if out := e.claim("", 10, time.Hour); len(out) != 0 {
		e.t.Errorf("invalid changes queued %d messages", len(out))
	}
	_, err = store.NewOutgoing("not an id", &agency.Message{To: "x", Action: "run"})
	wantErr(e.t, "NewOutgoing from a bad id", err, store.ErrInvalid)
	_, err = store.NewOutgoing("Coordinator", nil)
	wantErr(e.t, "NewOutgoing of nil", err, store.ErrInvalid)
}

// outgoing returns an entry from agent from that runs action on agent to.
func outgoing(t testing.TB, from, to, action string) store.Outgoing {
	t.Helper()
	o, err := store.NewOutgoing(from, &agency.Message{To: to, Action: action,
		Meta: map[string]any{"idempotency_key": "k-" + to}, Args: map[string]any{"n": 1}})
	if err != nil {
		t.Fatalf("NewOutgoing: %v", err)
	}
	return o
}

// testBadText: a kind, an id or an index field that is not valid UTF-8 or
// holds a NUL byte, and a body that is not valid UTF-8, are refused with
// ErrInvalid by Apply, Get and List alike, whatever the database could
// keep: PostgreSQL keeps neither, and a store that took them on SQLite
// would answer otherwise there.
func testBadText(e *env) {
	e.put(doc("plan", "p1", 0, `{}`))
	for _, bad := range []string{"a\x00b", "\xff\xfe", "ok\xc3"} {
		docs := map[string]store.Doc{
			"kind":    doc(bad, "x", 0, `{}`),
			"id":      doc("plan", bad, 0, `{}`),
			"parent":  {Kind: "plan", ID: "x", Parent: bad, Body: []byte(`{}`)},
			"session": {Kind: "plan", ID: "x", Session: bad, Body: []byte(`{}`)},
			"user":    {Kind: "plan", ID: "x", User: bad, Body: []byte(`{}`)},
		}
		for field, d := range docs {
			err := e.st.Apply(e.ctx(), store.Changes{Put: []store.Doc{d}})
			wantErr(e.t, "Apply with "+field+" "+strconv.Quote(bad), err, store.ErrInvalid)
		}
		err := e.st.Apply(e.ctx(), store.Changes{Delete: []store.Doc{{Kind: "plan", ID: bad, Version: 1}}})
		wantErr(e.t, "Delete of id "+strconv.Quote(bad), err, store.ErrInvalid)
		_, err = e.st.Get(e.ctx(), "plan", bad)
		wantErr(e.t, "Get of id "+strconv.Quote(bad), err, store.ErrInvalid)
		_, err = e.st.Get(e.ctx(), bad, "p1")
		wantErr(e.t, "Get of kind "+strconv.Quote(bad), err, store.ErrInvalid)
		for field, q := range map[string]store.Query{
			"kind": {Kind: bad}, "parent": {Kind: "plan", Parent: bad},
			"session": {Kind: "plan", Session: bad}, "user": {Kind: "plan", User: bad},
		} {
			_, err := e.st.List(e.ctx(), q)
			wantErr(e.t, "List with "+field+" "+strconv.Quote(bad), err, store.ErrInvalid)
		}
	}
	err := e.st.Apply(e.ctx(), store.Changes{Put: []store.Doc{doc("plan", "x", 0, "{\"a\":\"\xff\xfe\"}")}})
	wantErr(e.t, "Apply of a body that is not UTF-8", err, store.ErrInvalid)
	// A NUL written as JSON's escape is a JSON string like any other.
	e.put(doc("plan", "nul", 0, `{"a":"\u0000"}`))
	if d := e.get("plan", "nul"); string(d.Body) != `{"a":"\u0000"}` {
		e.t.Errorf("a body with \\u0000 reads back as %s", d.Body)
	}
	e.absent("plan", "x")
	if d := e.get("plan", "p1"); d.Version != 1 {
		e.t.Errorf("p1 changed: version %d", d.Version)
	}
}
