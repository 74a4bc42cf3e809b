package space_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Addends are the arguments of the examples' add action.
type Addends struct {
	A    float64 `json:"a" jsonschema:"description=first addend"`
	B    float64 `json:"b" jsonschema:"description=second addend"`
	Note string  `json:"note,omitempty" validate:"max=80"`
}

func addNumbers(_ context.Context, args Addends) (float64, error) {
	return args.A + args.B, nil
}

func ExampleNewLocal() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", addNumbers)
	user := agency.MustNewAgent("User")

	sp := space.NewLocal()
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}
	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", Addends{A: 1, B: 2})
	fmt.Println(sum, err)

	// Ids are unique in a space.
	err = sp.Add(ctx, agency.MustNewAgent("Calculator"))
	fmt.Println(errors.Is(err, space.ErrAgentExists))

	// Remove waits for the agent's queued and running actions. Then the
	// space knows it is gone, and Request says so at once.
	if err := sp.Remove(ctx, "Calculator"); err != nil {
		log.Fatal(err)
	}
	_, err = user.Request(ctx, "Calculator", "add", Addends{A: 1, B: 2})
	fmt.Println(errors.Is(err, agency.ErrNoRecipient))

	// Close removes every agent; closing again is harmless.
	fmt.Println(sp.Close(ctx), sp.Close(ctx))
	fmt.Println(errors.Is(sp.Add(ctx, calc), space.ErrClosed))
	// Output:
	// 3 <nil>
	// true
	// true
	// <nil> <nil>
	// true
}

// An agent discovers another's actions by asking it for help, here about
// one action by name.
func Example_help() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", addNumbers,
		agency.Describe("Adds two numbers"),
		agency.Returns("the sum"),
		agency.Example(Addends{A: 1, B: 2}))
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	help, err := agency.Call[map[string]json.RawMessage](ctx, user, "Calculator", "help",
		map[string]any{"action_name": "add"})
	if err != nil {
		log.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, help["add"], "", "  "); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.String())
	// Output:
	// {
	//   "description": "Adds two numbers",
	//   "args": {
	//     "properties": {
	//       "a": {
	//         "type": "number",
	//         "description": "first addend"
	//       },
	//       "b": {
	//         "type": "number",
	//         "description": "second addend"
	//       },
	//       "note": {
	//         "type": "string",
	//         "maxLength": 80
	//       }
	//     },
	//     "additionalProperties": false,
	//     "type": "object",
	//     "required": [
	//       "a",
	//       "b"
	//     ]
	//   },
	//   "returns": {
	//     "type": "number",
	//     "description": "the sum"
	//   },
	//   "access": "permitted",
	//   "examples": [
	//     {
	//       "to": "Calculator",
	//       "action": {
	//         "add": {
	//           "a": 1,
	//           "b": 2
	//         }
	//       }
	//     }
	//   ]
	// }
}

// An id is live once per space, and an agent is in one space at a time.
func Example_oneSpaceAtATime() {
	ctx := context.Background()
	calc := agency.MustNewAgent("Calculator")
	first, second := space.NewLocal(), space.NewLocal()
	defer first.Close(ctx)
	defer second.Close(ctx)
	if err := first.Add(ctx, calc); err != nil {
		log.Fatal(err)
	}
	fmt.Println(errors.Is(first.Add(ctx, calc), space.ErrAgentExists))
	fmt.Println(errors.Is(first.Add(ctx, agency.MustNewAgent("Calculator")), space.ErrAgentExists))
	fmt.Println(errors.Is(second.Add(ctx, calc), agency.ErrAlreadyAdded))
	// Output:
	// true
	// true
	// true
}
