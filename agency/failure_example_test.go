package agency_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A handler fails a call with the error type it chooses; the caller reads
// the text as the handler wrote it, and branches with errors.Is.
func ExampleInvalidArgsf() {
	type OrderArgs struct {
		Item     string `json:"item"`
		Quantity int    `json:"quantity"`
	}
	order := func(ctx context.Context, args OrderArgs) (string, error) {
		switch {
		case args.Quantity < 1:
			return "", agency.InvalidArgsf("quantity must be at least 1, not %d", args.Quantity)
		case args.Item == "caviar" && agency.MessageFrom(ctx).From != "Chef":
			return "", agency.PermissionDeniedf("only the Chef orders %s", args.Item)
		case args.Item == "unicorn":
			return "", agency.ActionFailedf("no supplier has %s", args.Item)
		}
		return fmt.Sprintf("%d %s ordered", args.Quantity, args.Item), nil
	}

	ctx := context.Background()
	shop := agency.MustNewAgent("Shop")
	agency.Handle(shop, "order", order)
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, shop), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	for _, args := range []OrderArgs{{"tea", 0}, {"caviar", 1}, {"unicorn", 1}, {"tea", 2}} {
		v, err := agency.Call[string](ctx, user, "Shop", "order", args)
		var ae *agency.ActionError
		if errors.As(err, &ae) {
			fmt.Printf("%s | %s | invalid=%v denied=%v failed=%v\n", ae.Type, ae.Text,
				errors.Is(err, agency.ErrInvalidArgs), errors.Is(err, agency.ErrPermissionDenied), errors.Is(err, agency.ErrActionFailed))
			continue
		}
		fmt.Println(v, err)
	}
	// Output:
	// invalid_args | quantity must be at least 1, not 0 | invalid=true denied=false failed=false
	// permission_denied | only the Chef orders caviar | invalid=false denied=true failed=false
	// action_failed | no supplier has unicorn | invalid=false denied=false failed=true
	// 2 tea ordered <nil>
}

// A handler that wraps a sentinel the way fmt.Errorf does gets the same
// text to its caller, without the sentinel's own words in front.
func ExampleErrInvalidArgs() {
	type Args struct {
		N int `json:"n"`
	}
	ctx := context.Background()
	a := agency.MustNewAgent("Checker")
	agency.Handle(a, "check", func(_ context.Context, args Args) (bool, error) {
		return false, fmt.Errorf("%w: n must be even, not %d", agency.ErrInvalidArgs, args.N)
	})
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, a), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}
	_, err := agency.Call[bool](ctx, user, "Checker", "check", Args{N: 3})
	fmt.Println(err)
	fmt.Println(errors.Is(err, agency.ErrInvalidArgs))
	// Output:
	// invalid_args: n must be even, not 3
	// true
}
