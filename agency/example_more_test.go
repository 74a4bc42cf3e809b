package agency_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// An action whose calls someone approves: the approver sees the arguments
// decoded and validated, as the handler will, and the caller in ctx.
func ExampleApprove() {
	type TransferArgs struct {
		To     string  `json:"to" validate:"min=1"`
		Amount float64 `json:"amount" validate:"gt=0"`
	}
	transfer := func(_ context.Context, args TransferArgs) (string, error) {
		return fmt.Sprintf("sent %.2f to %s", args.Amount, args.To), nil
	}
	// A stand-in for a person: small amounts pass, large ones need a word.
	approve := func(ctx context.Context, args TransferArgs) (bool, error) {
		from := agency.MessageFrom(ctx).From
		if args.Amount > 100 {
			return false, agency.PermissionDeniedf("%s: transfers over 100 need a manager", from)
		}
		return true, nil
	}

	ctx := context.Background()
	bank := agency.MustNewAgent("Bank")
	agency.Handle(bank, "transfer", transfer, agency.Approve(approve)) // access: requested
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, bank), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	fmt.Println(agency.Call[string](ctx, user, "Bank", "transfer", TransferArgs{To: "Ada", Amount: 20}))
	fmt.Println(agency.Call[string](ctx, user, "Bank", "transfer", TransferArgs{To: "Ada", Amount: 500}))
	// Invalid arguments never reach the approver.
	_, err := agency.Call[string](ctx, user, "Bank", "transfer", TransferArgs{To: "Ada", Amount: -1})
	fmt.Println(errors.Is(err, agency.ErrInvalidArgs))

	// A requested action that nothing approves is a programmer error.
	err = agency.Register(bank, "close", transfer, agency.AccessForAll(agency.Requested))
	fmt.Println(err != nil)
	// Output:
	// sent 20.00 to Ada <nil>
	//  permission_denied: User: transfers over 100 need a manager
	// true
	// true
}

// Agents whose ids end in a random suffix, to keep them unique across
// processes, are named by their prefix.
func ExampleAccessBySender_prefix() {
	ctx := context.Background()
	queue := agency.MustNewAgent("Queue")
	agency.Handle(queue, "take", func(context.Context, struct{}) (string, error) { return "job-1", nil },
		agency.AccessBySender(map[string]agency.Access{"Worker-*": agency.Permitted}, agency.Denied))
	worker := agency.MustNewAgent("Worker-7f3a")
	other := agency.MustNewAgent("Visitor-1")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, queue), sp.Add(ctx, worker), sp.Add(ctx, other)); err != nil {
		log.Fatal(err)
	}
	fmt.Println(agency.Call[string](ctx, worker, "Queue", "take", nil))
	_, err := agency.Call[string](ctx, other, "Queue", "take", nil)
	fmt.Println(errors.Is(err, agency.ErrPermissionDenied))
	// Output:
	// job-1 <nil>
	// true
}

// A trace context travels with the messages: from the sender's context to
// the handler, and on with what the handler sends.
func ExampleWithTraceparent() {
	ctx := context.Background()
	worker := agency.MustNewAgent("Worker")
	agency.Handle(worker, "work", func(ctx context.Context, _ struct{}) (string, error) {
		return agency.Traceparent(ctx), nil // a tracing adapter starts a child span from it
	})
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, worker), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}
	// A tracing adapter sets it from the current span.
	traced := agency.WithTraceparent(ctx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	fmt.Println(agency.Call[string](traced, user, "Worker", "work", nil))
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 <nil>
}

// auditLog is a hook value of its own, beside the agent's.
type auditLog struct{}

func (auditLog) BeforeAction(_ context.Context, m *agency.Message) {
	fmt.Printf("audit: %s calls %s\n", m.From, m.Action)
}

// Several hook values, each for the events it implements.
func ExampleHooks() {
	ctx := context.Background()
	got := make(replyInbox, 1)
	calc := agency.MustNewAgent("Calculator", agency.Hooks(auditLog{}))
	agency.Handle(calc, "add", addNumbers)
	user := agency.MustNewAgent("User", agency.Hooks(got), agency.Hooks(auditLog{}))
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}
	if _, err := user.Send(ctx, "Calculator", "add", Addends{A: 1, B: 2}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(agency.Value[float64](<-got))
	// Output:
	// audit: User calls add
	// 3 <nil>
}

// An answer in parts: the handler emits each word as it has it, and the
// caller reads them as they come, then the whole answer.
func ExampleAgent_Stream() {
	ctx := context.Background()
	writer := agency.MustNewAgent("Writer")
	agency.Handle(writer, "write", func(ctx context.Context, _ struct{}) (string, error) {
		for _, w := range []string{"It ", "rains ", "today."} {
			if err := agency.Emit(ctx, w); err != nil {
				return "", err // the caller stopped reading
			}
		}
		return "It rains today.", nil
	})
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, writer), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	for m, err := range user.Stream(ctx, "Writer", "write", nil) {
		if err != nil {
			log.Fatal(err)
		}
		text, _ := agency.Value[string](m)
		if m.Action == agency.PartAction {
			fmt.Printf("part %d: %q\n", m.Seq, text)
			continue
		}
		fmt.Printf("answer: %q\n", text)
	}
	// A plain Request gets the answer alone.
	whole, _ := agency.Call[string](ctx, user, "Writer", "write", nil)
	fmt.Printf("call: %q\n", whole)
	// Output:
	// part 1: "It "
	// part 2: "rains "
	// part 3: "today."
	// answer: "It rains today."
	// call: "It rains today."
}
