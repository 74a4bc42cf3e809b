// Command calculator runs three agents on the in-process space: a
// Calculator, its Owner and a User. The User asks the Calculator for help,
// calls add, and calls clear twice. The access of clear is requested: before
// each call the Calculator asks its Owner, a stand-in for a human, who
// approves one clear per run.
//
//	go run ./examples/calculator
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Calculator adds numbers for anyone, and clears its memory when its owner
// agrees.
type Calculator struct {
	memory float64
}

// AddArgs are the arguments of add.
type AddArgs struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

// Add returns a+b. Its state needs no lock: the agent runs one action at a
// time.
func (c *Calculator) Add(ctx context.Context, args AddArgs) (float64, error) {
	c.memory = args.A + args.B
	return c.memory, nil
}

// ClearArgs are the arguments of clear.
type ClearArgs struct {
	Reason string `json:"reason" validate:"min=3,max=80" jsonschema:"description=why the memory should be cleared"`
}

// Clear forgets the last result.
func (c *Calculator) Clear(ctx context.Context, args ClearArgs) (string, error) {
	c.memory = 0
	return "cleared: " + args.Reason, nil
}

// RequestPermission decides each call of an action whose access is
// requested, by asking the Owner agent. It may wait as long as a human
// takes to answer: the Owner's response does not queue behind the
// Calculator's own inbox.
func (c *Calculator) RequestPermission(ctx context.Context, m *agency.Message) bool {
	args, err := json.Marshal(m.Args) // not yet decoded or validated
	if err != nil {
		return false
	}
	ok, err := agency.Call[bool](ctx, agency.AgentFrom(ctx), "Owner", "approve",
		ApproveArgs{Caller: m.From, Action: m.Action, Args: args})
	return err == nil && ok
}

// Owner stands in for the human who owns the Calculator. It approves one
// clear per run and says what it decided.
type Owner struct {
	out      io.Writer
	approved int
}

// ApproveArgs describe a call that waits for the owner's approval.
type ApproveArgs struct {
	Caller string          `json:"caller" validate:"required"`
	Action string          `json:"action" validate:"required"`
	Args   json.RawMessage `json:"args"`
}

// Approve answers whether the call may run.
func (o *Owner) Approve(ctx context.Context, args ApproveArgs) (bool, error) {
	ok := o.approved == 0
	if ok {
		o.approved++
	}
	verdict := "refused"
	if ok {
		verdict = "approved"
	}
	asker := agency.MessageFrom(ctx).From // the agent that runs the action
	fmt.Fprintf(o.out, "Owner: %s asks to run %s.%s %s: %s\n", args.Caller, asker, args.Action, args.Args, verdict)
	return ok, nil
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run sets up the space and plays the User's part, writing what happens to
// w.
func run(ctx context.Context, w io.Writer) (err error) {
	calc := &Calculator{}
	calcAgent, err := agency.NewAgent("Calculator", agency.Hooks(calc))
	if err != nil {
		return err
	}
	agency.Handle(calcAgent, "add", calc.Add,
		agency.Describe("Adds two numbers"),
		agency.Returns("the sum"),
		agency.Example(AddArgs{A: 1, B: 2}))
	agency.Handle(calcAgent, "clear", calc.Clear,
		agency.Describe("Clears the calculator's memory"),
		agency.Returns("what was done"),
		agency.WithAccess(agency.Requested))

	owner := &Owner{out: w}
	ownerAgent, err := agency.NewAgent("Owner")
	if err != nil {
		return err
	}
	// Only the Calculator may ask the Owner; no one else even sees approve.
	agency.Handle(ownerAgent, "approve", owner.Approve,
		agency.Describe("Asks the owner to approve a call"),
		agency.AccessBySender(map[string]agency.Access{"Calculator": agency.Permitted}, agency.Denied))

	user, err := agency.NewAgent("User")
	if err != nil {
		return err
	}

	sp := space.NewLocal()
	defer func() { err = errors.Join(err, sp.Close(context.Background())) }()
	for _, a := range []*agency.Agent{calcAgent, ownerAgent, user} {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}

	// A safety net: nothing here should take more than a moment.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Calculator", "help", nil)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(help, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "User received help from Calculator:\n%s\n", b)

	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", AddArgs{A: 1, B: 2})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "User: add(1, 2) =", sum)

	// Arguments as an LLM might send them, with one missing.
	_, err = user.Request(ctx, "Calculator", "add", map[string]any{"a": 1})
	fmt.Fprintln(w, "User: add with b missing:", err)

	cleared, err := agency.Call[string](ctx, user, "Calculator", "clear", ClearArgs{Reason: "new day"})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "User:", cleared)

	_, err = agency.Call[string](ctx, user, "Calculator", "clear", ClearArgs{Reason: "once more"})
	if !errors.Is(err, agency.ErrPermissionDenied) {
		return fmt.Errorf("second clear: got %v, want permission denied", err)
	}
	fmt.Fprintln(w, "User: clear again:", err)
	return nil
}
