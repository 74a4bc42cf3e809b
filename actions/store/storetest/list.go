package storetest

import (
	"fmt"
	"slices"

	"github.com/seed72275b23/agency-go/actions/store"
)

var listTests = []test{
	{"CreationOrder", testListOrder},
	{"Filters", testListFilters},
	{"Limit", testListLimit},
	{"Empty", testListEmpty},
	{"Invalid", testListInvalid},
}

func testListOrder(e *env) {
	// Ids that sort the other way round, several Applies, several documents
	// per Apply: the order is the order of creation, whatever the ids.
	e.put(store.Doc{Kind: "step", ID: "z", Parent: "p1", Body: []byte(`1`)})
	e.put(store.Doc{Kind: "step", ID: "y", Parent: "p1", Body: []byte(`2`)},
		store.Doc{Kind: "step", ID: "x", Parent: "p1", Body: []byte(`3`)},
		store.Doc{Kind: "step", ID: "w", Parent: "p1", Body: []byte(`4`)})
	e.put(store.Doc{Kind: "step", ID: "v", Parent: "p1", Body: []byte(`5`)})
	// An update does not move a document.
	e.put(store.Doc{Kind: "step", ID: "z", Parent: "p1", Version: 1, Body: []byte(`1.1`)})

	oldest := []string{"z", "y", "x", "w", "v"}
	if got := ids(e.list(store.Query{Kind: "step", Parent: "p1"})); !slices.Equal(got, oldest) {
		e.t.Errorf("oldest first: %v, want %v", got, oldest)
	}
	newest := slices.Clone(oldest)
	slices.Reverse(newest)
	if got := ids(e.list(store.Query{Kind: "step", Parent: "p1", Newest: true})); !slices.Equal(got, newest) {
		e.t.Errorf("newest first: %v, want %v", got, newest)
	}
	// A document deleted and created again is new.
	e.apply(store.Changes{Delete: []store.Doc{{Kind: "step", ID: "y", Version: 1}}})
	e.put(store.Doc{Kind: "step", ID: "y", Parent: "p1", Body: []byte(`6`)})
	want := []string{"z", "x", "w", "v", "y"}
	docs := e.list(store.Query{Kind: "step", Parent: "p1"})
	if got := ids(docs); !slices.Equal(got, want) {
		e.t.Fatalf("after y was created again: %v, want %v", got, want)
	}
	if y := docs[len(docs)-1]; y.Version <= 1 || string(y.Body) != `6` {
		e.t.Errorf("y created again: %s at version %d, want 6 at a version above 1, the one it was deleted at", y.Body, y.Version)
	}
}

func testListFilters(e *env) {
	// Plans of two users in three sessions, steps of two plans, messages.
	e.put(
		store.Doc{Kind: "plan", ID: "p1", Session: "s1", User: "u1", Body: []byte(`{}`)},
		store.Doc{Kind: "plan", ID: "p2", Session: "s2", User: "u1", Body: []byte(`{}`)},
		store.Doc{Kind: "plan", ID: "p3", Session: "s3", User: "u2", Body: []byte(`{}`)},
		store.Doc{Kind: "step", ID: "p1-1", Parent: "p1", Session: "s1", User: "u1", Body: []byte(`{}`)},
		store.Doc{Kind: "step", ID: "p1-2", Parent: "p1", Session: "s1", User: "u1", Body: []byte(`{}`)},
		store.Doc{Kind: "step", ID: "p3-1", Parent: "p3", Session: "s3", User: "u2", Body: []byte(`{}`)},
		store.Doc{Kind: "message", ID: "m1", Parent: "p1", Session: "s1", User: "u1", Body: []byte(`{}`)},
		store.Doc{Kind: "message", ID: "m2", Parent: "p3", Session: "s3", User: "u2", Body: []byte(`{}`)},
		store.Doc{Kind: "message", ID: "m3", Parent: "p1", Session: "s1", User: "u1", Body: []byte(`{}`)},
	)
	cases := []struct {
		q    store.Query
		want []string
	}{
		{store.Query{Kind: "plan"}, []string{"p1", "p2", "p3"}},
		{store.Query{Kind: "plan", User: "u1"}, []string{"p1", "p2"}},
		{store.Query{Kind: "plan", User: "u1", Newest: true}, []string{"p2", "p1"}},
		{store.Query{Kind: "plan", Session: "s3"}, []string{"p3"}},
		{store.Query{Kind: "plan", Session: "s3", User: "u1"}, nil}, // another user's session
		{store.Query{Kind: "plan", Session: "s1", User: "u1"}, []string{"p1"}},
		{store.Query{Kind: "step", Parent: "p1"}, []string{"p1-1", "p1-2"}},
		{store.Query{Kind: "step", Parent: "p1", User: "u2"}, nil},
		{store.Query{Kind: "step", Parent: "p3", Session: "s3", User: "u2"}, []string{"p3-1"}},
		{store.Query{Kind: "step", User: "u1"}, []string{"p1-1", "p1-2"}},
		{store.Query{Kind: "message", Session: "s1"}, []string{"m1", "m3"}},
		{store.Query{Kind: "message", Parent: "p1", Newest: true}, []string{"m3", "m1"}},
		{store.Query{Kind: "message", User: "u2"}, []string{"m2"}},
		{store.Query{Kind: "message", Parent: "p2"}, nil},
		{store.Query{Kind: "nothing"}, nil},
	}
	for _, c := range cases {
		got := ids(e.list(c.q))
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			e.t.Errorf("List(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
	// Every field of every document comes back.
	for _, d := range e.list(store.Query{Kind: "step", Parent: "p3"}) {
		if d.Kind != "step" || d.ID != "p3-1" || d.Parent != "p3" || d.Session != "s3" || d.User != "u2" ||
			d.Version != 1 || string(d.Body) != `{}` || d.Created.IsZero() || d.Updated.IsZero() {
			e.t.Errorf("List returned %+v", d)
		}
	}
}

func testListLimit(e *env) {
	var docs []store.Doc
	var all []string
	for i := range 12 {
		id := fmt.Sprintf("m%02d", i)
		docs = append(docs, store.Doc{Kind: "message", ID: id, Session: "s1", Body: []byte(`{}`)})
		all = append(all, id)
	}
	e.put(docs[:5]...)
	e.put(docs[5:]...)
	newest := slices.Clone(all)
	slices.Reverse(newest)
	cases := []struct {
		q    store.Query
		want []string
	}{
		{store.Query{Kind: "message", Session: "s1", Limit: 5}, all[:5]},
		{store.Query{Kind: "message", Session: "s1", Limit: 5, Newest: true}, newest[:5]},
		{store.Query{Kind: "message", Limit: 1, Newest: true}, newest[:1]},
		{store.Query{Kind: "message", Limit: 1}, all[:1]},
		{store.Query{Kind: "message", Limit: 12}, all},
		{store.Query{Kind: "message", Limit: 100}, all},
		{store.Query{Kind: "message", Limit: 0}, all},
		{store.Query{Kind: "message", Session: "s1"}, all},
	}
	for _, c := range cases {
		if got := ids(e.list(c.q)); !slices.Equal(got, c.want) {
			e.t.Errorf("List(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
}

func testListEmpty(e *env) {
	docs, err := e.st.List(e.ctx(), store.Query{Kind: "plan", User: "nobody"})
	if err != nil || len(docs) != 0 {
		e.t.Errorf("List of nothing: %v, %v; want no documents and no error", docs, err)
	}
}

func testListInvalid(e *env) {
	_, err := e.st.List(e.ctx(), store.Query{User: "u1"})
	wantErr(e.t, "List without a kind", err, store.ErrInvalid)
	_, err = e.st.List(e.ctx(), store.Query{Kind: "plan", Limit: -1})
	wantErr(e.t, "List with a negative limit", err, store.ErrInvalid)
}
