package a2a_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/seed72275b23/agency-go/actions/a2a"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A Calculator served over A2A, and called from another space through
// NewRemote, as it would be from another program.
func Example() {
	ctx := context.Background()

	// The serving side.
	served := space.NewLocal()
	defer served.Close(ctx)
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(_ context.Context, a AddArgs) (float64, error) { return a.A + a.B, nil },
		agency.Describe("Adds two numbers"))
	if err := served.Add(ctx, calc); err != nil {
		panic(err)
	}
	srv, err := a2a.NewServer(ctx, a2a.Config{Space: served, Agents: []string{"Calculator"}, Root: "Calculator"})
	if err != nil {
		panic(err)
	}
	defer srv.Close(ctx)
	web := httptest.NewServer(srv) // http.ListenAndServe("127.0.0.1:8080", srv)
	defer web.Close()

	// The calling side.
	remote, err := a2a.NewRemote(ctx, a2a.RemoteConfig{URL: web.URL + "/agents/Calculator/", ID: "RemoteCalc"})
	if err != nil {
		panic(err)
	}
	defer remote.Close()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{remote.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			panic(err)
		}
	}
	sum, err := agency.Call[float64](ctx, user, "RemoteCalc", "add", map[string]any{"a": 1, "b": 2})
	fmt.Println(sum, err)
	_, err = agency.Call[float64](ctx, user, "RemoteCalc", "add", map[string]any{"a": 1})
	fmt.Println(err)
	// Output:
	// 3 <nil>
	// invalid_args: invalid arguments for "RemoteCalc.add": validating root: required: missing properties: ["b"] (send "help" for the argument schema)
}
