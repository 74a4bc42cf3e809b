package space_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"slices"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Who is in the space, and what do they offer? space.Local knows who a
// broadcast reached, so Survey returns as soon as all of them have
// answered: the quiet period (an hour here) never comes into play.
func Example_survey() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", addNumbers, agency.Describe("Adds two numbers"))
	agency.Handle(calc, "sub", addNumbers, agency.AccessForAll(agency.Denied)) // hidden from everyone
	clock := agency.MustNewAgent("Clock")
	agency.Handle(clock, "now", func(context.Context, struct{}) (string, error) { return "noon", nil })
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, clock), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	agents, err := agency.Survey(ctx, user, agency.SurveyQuiet(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range slices.Sorted(maps.Keys(agents)) {
		fmt.Println(id, slices.Sorted(maps.Keys(agents[id])))
	}
	fmt.Println(agents["Calculator"]["add"].Description)
	// Output:
	// Calculator [add]
	// Clock [now]
	// Adds two numbers
}
