// Command calculator runs a Calculator agent and a user agent that asks it
// for help and calls it, on the in-process space.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Calculator adds numbers for anyone, and clears its memory when its owner
// agrees.
type Calculator struct {
	memory   float64
	approved func(m *agency.Message) bool
}

// AddArgs are the arguments of add.
type AddArgs struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

// Add returns a+b.
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

// RequestPermission decides calls of actions whose access is requested.
func (c *Calculator) RequestPermission(ctx context.Context, m *agency.Message) bool {
	return c.approved(m)
}

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	calc := &Calculator{approved: func(m *agency.Message) bool {
		fmt.Printf("permission asked: %s wants %s; granted\n", m.From, m.Action)
		return true
	}}
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
		agency.WithAccess(agency.Requested))

	user, err := agency.NewAgent("User")
	if err != nil {
		return err
	}

	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := sp.Add(ctx, calcAgent); err != nil {
		return err
	}
	if err := sp.Add(ctx, user); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()

	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Calculator", "help", nil)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	fmt.Println("help from Calculator:")
	if err := enc.Encode(help); err != nil {
		return err
	}

	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", AddArgs{A: 1, B: 2})
	if err != nil {
		return err
	}
	fmt.Println("add(1, 2) =", sum)

	_, err = user.Request(ctx, "Calculator", "add", map[string]any{"a": 1})
	fmt.Println("add with b missing:", err)

	cleared, err := agency.Call[string](ctx, user, "Calculator", "clear", ClearArgs{Reason: "new day"})
	if err != nil {
		return err
	}
	fmt.Println(cleared)
	return nil
}
