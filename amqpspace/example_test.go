package amqpspace_test

import (
	"context"
	"fmt"
	"log"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// Two processes (here two Spaces in one) meet on a broker's exchange: an
// agent added to one is called from an agent added to the other. The
// broker is the one AMQP_URL (or AMQP_HOST and its kin) names, by default
// guest/guest on localhost. (No Output: it needs a broker to run.)
func Example() {
	ctx := context.Background()
	serving, err := amqpspace.NewFromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer serving.Close(ctx)
	calling, err := amqpspace.NewFromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer calling.Close(ctx)

	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(_ context.Context, n struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}) (float64, error) {
		return n.A + n.B, nil
	})
	if err := serving.Add(ctx, calc); err != nil {
		log.Fatal(err) // space.ErrAgentExists when a live Calculator is on the broker already
	}
	user := agency.MustNewAgent("User")
	if err := calling.Add(ctx, user); err != nil {
		log.Fatal(err)
	}
	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", map[string]float64{"a": 1, "b": 2})
	fmt.Println(sum, err) // 3 <nil>
}

// A Config for a named exchange on a given broker, instead of the
// environment's.
func ExampleNew() {
	ctx := context.Background()
	sp, err := amqpspace.New(ctx, amqpspace.Config{URL: "amqp://guest:guest@127.0.0.1:5672/", Exchange: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	defer sp.Close(ctx)
	fmt.Println(sp.Exchange()) // billing
}
