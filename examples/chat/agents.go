package main

import (
	"context"

	"github.com/seed72275b23/agency-go/agency"
)

// NumbersArgs are the arguments of add and multiply.
type NumbersArgs struct {
	A float64 `json:"a" jsonschema:"description=the first number"`
	B float64 `json:"b" jsonschema:"description=the second number"`
}

// newCalculator returns an agent that adds and multiplies.
func newCalculator(id string) (*agency.Agent, error) {
	a, err := agency.NewAgent(id)
	if err != nil {
		return nil, err
	}
	add := func(ctx context.Context, args NumbersArgs) (float64, error) { return args.A + args.B, nil }
	multiply := func(ctx context.Context, args NumbersArgs) (float64, error) { return args.A * args.B, nil }
	agency.Handle(a, "add", add,
		agency.Describe("Adds two numbers"),
		agency.Returns("the sum a+b"),
		agency.Example(NumbersArgs{A: 2, B: 3}))
	agency.Handle(a, "multiply", multiply,
		agency.Describe("Multiplies two numbers"),
		agency.Returns("the product a*b"),
		agency.Example(NumbersArgs{A: 4, B: 2.5}))
	return a, nil
}
