package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// The specialists of MACAE's onboarding example, with typed actions. Their
// handlers stand in for real systems (an HR database, a ticketing tool):
// each prints what it did, one line, and answers with it.

// Employee names a new employee.
type Employee struct {
	Name string `json:"name" validate:"min=1,max=200" jsonschema:"description=the employee's full name"`
}

// Orientation is an orientation session.
type Orientation struct {
	Name string `json:"name" validate:"min=1,max=200" jsonschema:"description=the employee's full name"`
	Date string `json:"date" validate:"len=10" jsonschema:"description=the day as YYYY-MM-DD"`
}

// Benefits is an enrolment in a benefits programme.
type Benefits struct {
	Name    string `json:"name" validate:"min=1,max=200" jsonschema:"description=the employee's full name"`
	Program string `json:"program" validate:"oneof=health dental retirement" jsonschema:"description=health or dental or retirement"`
}

// Account is an account to create for an employee.
type Account struct {
	Name   string `json:"name" validate:"min=1,max=200" jsonschema:"description=the employee's full name"`
	System string `json:"system" validate:"min=1,max=100" jsonschema:"description=the system: email or VPN or payroll or another"`
}

// printer writes one line per action run, safe for concurrent use.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// kindRecord is the kind of the documents in which the specialists keep
// what they did: one per action run, the effect that must happen once.
const kindRecord = "onboarding_record"

// record is what a specialist did: the body of a kindRecord document.
type record struct {
	Agent  string `json:"agent"`
	Action string `json:"action"`
	Text   string `json:"text"`
	Step   string `json:"step"`
}

// action registers one action of a specialist: idempotent per step (the
// coordinator sends a step again after a restart with the same key), open
// to the coordinator only, so that the planner cannot call it itself. What
// it does is a record in the store (as an HR system's row would be),
// written by plan.Effect in the transaction that records the step's run
// as done: once, whenever the process dies. The line it prints is a log:
// printed again when the process died before that transaction, as the
// run is then made again.
func action[A any](a *agency.Agent, st store.Store, coordinator, name, desc string, out *printer, do func(A) string) {
	agency.Handle(a, name, plan.Idempotent(st, func(ctx context.Context, args A) (string, error) {
		text := do(args)
		key, _ := agency.MessageFrom(ctx).Meta[plan.IdempotencyKey].(string)
		body, err := json.Marshal(record{Agent: a.ID(), Action: name, Text: text, Step: key})
		if err != nil {
			return "", err
		}
		doc := store.Doc{Kind: kindRecord, ID: agency.NewID(), Parent: key, Body: body}
		if err := plan.Effect(ctx, store.Changes{Put: []store.Doc{doc}}); err != nil {
			return "", err
		}
		out.printf("%s.%s: %s (step %s)", a.ID(), name, text, key)
		return text, nil
	}), agency.Describe(desc),
		agency.AccessBySender(map[string]agency.Access{coordinator: agency.Permitted}, agency.Denied))
}

// specialists returns HrAgent and TechSupportAgent, with ids ending in
// suffix.
func specialists(st store.Store, coordinator, suffix string, out *printer) []*agency.Agent {
	hr := agency.MustNewAgent("HrAgent" + suffix)
	action(hr, st, coordinator, "create_employee_record", "Create the employee's record in the HR system", out,
		func(e Employee) string { return "employee record created for " + e.Name })
	action(hr, st, coordinator, "schedule_orientation", "Schedule the employee's orientation session", out,
		func(o Orientation) string { return "orientation for " + o.Name + " on " + o.Date })
	action(hr, st, coordinator, "assign_buddy", "Assign an onboarding buddy to the employee", out,
		func(e Employee) string { return "buddy assigned to " + e.Name })
	action(hr, st, coordinator, "enroll_in_benefits", "Enroll the employee in a benefits programme", out,
		func(b Benefits) string { return b.Name + " enrolled in " + b.Program })
	tech := agency.MustNewAgent("TechSupportAgent" + suffix)
	action(tech, st, coordinator, "set_up_laptop", "Prepare and ship the employee's laptop", out,
		func(e Employee) string { return "laptop ready for " + e.Name })
	action(tech, st, coordinator, "create_account", "Create an account for the employee in a system", out,
		func(a Account) string { return a.System + " account created for " + a.Name })
	return []*agency.Agent{hr, tech}
}
