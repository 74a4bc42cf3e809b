package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// Step is the body of the example's documents.
type Step struct {
	Action string `json:"action"`
	Status string `json:"status"`
}

func ExampleNewMemory() {
	ctx := context.Background()
	st := store.NewMemory()
	defer st.Close()

	// Create two steps of plan p1: version 0 means "create".
	var docs []store.Doc
	for _, id := range []string{"s1", "s2"} {
		body, _ := json.Marshal(Step{Action: "create_employee_record", Status: "planned"})
		docs = append(docs, store.Doc{Kind: "step", ID: id, Parent: "p1", User: "u1", Body: body})
	}
	if err := st.Apply(ctx, store.Changes{Put: docs}); err != nil {
		log.Fatal(err)
	}

	// Approve s1 and queue its dispatch in the same transaction.
	s1, err := st.Get(ctx, "step", "s1")
	if err != nil {
		log.Fatal(err)
	}
	s1.Body, _ = json.Marshal(Step{Action: "create_employee_record", Status: "approved"})
	dispatch, err := store.NewOutgoing("Coordinator", &agency.Message{
		To: "HrAgent", Action: "create_employee_record",
		Meta: map[string]any{"idempotency_key": "s1"},
		Args: map[string]string{"name": "Jessica Smith"},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = st.Apply(ctx, store.Changes{Put: []store.Doc{s1}, Send: []store.Outgoing{dispatch}})
	fmt.Println("approve:", err)

	// A second writer still holding version 1 loses.
	err = st.Apply(ctx, store.Changes{Put: []store.Doc{s1}})
	fmt.Println("stale write is a conflict:", errors.Is(err, store.ErrConflict))

	steps, _ := st.List(ctx, store.Query{Kind: "step", Parent: "p1"})
	for _, d := range steps {
		fmt.Printf("%s v%d %s\n", d.ID, d.Version, d.Body)
	}

	// A relay claims what is queued, sends it, and marks it sent.
	out, _ := st.Claim(ctx, "Coordinator", 10, 30*time.Second)
	for _, o := range out {
		m, _ := agency.DecodeMessage(o.Message)
		fmt.Println("to send:", m.From, "→", m.To, m.Action, m.Meta["idempotency_key"])
		_ = st.Sent(ctx, o.ID)
	}
	out, _ = st.Claim(ctx, "Coordinator", 10, 30*time.Second)
	fmt.Println("left:", len(out))

	// Delete the user's steps, at the versions read.
	err = st.Apply(ctx, store.Changes{Delete: steps})
	_, gone := st.Get(ctx, "step", "s1")
	fmt.Println("deleted:", err, errors.Is(gone, store.ErrNotFound))
	// Output:
	// approve: <nil>
	// stale write is a conflict: true
	// s1 v2 {"action":"create_employee_record","status":"approved"}
	// s2 v1 {"action":"create_employee_record","status":"planned"}
	// to send: Coordinator → HrAgent create_employee_record s1
	// left: 0
	// deleted: <nil> true
}
