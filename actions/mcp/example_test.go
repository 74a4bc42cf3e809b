package mcp_test

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Numbers are the arguments of the examples' add.
type Numbers struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// A Server serves a space's actions as MCP tools; here an MCP client
// reaches it over go-sdk's in-memory transport, lists its tools and calls
// one.
func ExampleServer() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(_ context.Context, n Numbers) (float64, error) { return n.A + n.B, nil },
		agency.Describe("Adds two numbers"), agency.Returns("the sum"))
	srv, err := mcp.NewServer("MCP")
	if err != nil {
		panic(err)
	}
	for _, a := range []*agency.Agent{calc, srv.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			panic(err)
		}
	}
	if err := srv.Refresh(ctx); err != nil { // the tools are there once it has surveyed the space
		panic(err)
	}
	serverSide, clientSide := sdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, serverSide) }()
	defer func() { cancel(); <-done }()

	cs, err := sdk.NewClient(&sdk.Implementation{Name: "example"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		panic(err)
	}
	for _, t := range tools.Tools {
		fmt.Printf("%s: %s\n", t.Name, t.Description)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "Calculator.add", Arguments: Numbers{A: 1, B: 2}})
	if err != nil {
		panic(err)
	}
	fmt.Println("text:", res.Content[0].(*sdk.TextContent).Text)
	fmt.Println("structured:", res.StructuredContent)
	res, _ = cs.CallTool(ctx, &sdk.CallToolParams{Name: "Calculator.add", Arguments: map[string]any{"a": 1}})
	fmt.Println("isError:", res.IsError, res.Content[0].(*sdk.TextContent).Text)
	// Output:
	// Calculator.add: Adds two numbers
	// text: 3
	// structured: map[result:3]
	// isError: true invalid_args: invalid arguments for "Calculator.add": b: missing required field (send "help" for the argument schema)
}

// A Client joins an MCP server to a space as an agent whose actions are
// the server's tools. The server here is a go-sdk server in this process;
// mcp.Command starts one as a command, mcp.Endpoint reaches one over HTTP.
func ExampleClient() {
	ctx := context.Background()
	greeter := sdk.NewServer(&sdk.Implementation{Name: "greeter"}, nil)
	type greeting struct {
		Greeting string `json:"greeting"`
	}
	sdk.AddTool(greeter, &sdk.Tool{Name: "greet", Description: "Greets someone"},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*sdk.CallToolResult, greeting, error) {
			return nil, greeting{"Hello, " + in.Name + "!"}, nil
		})
	connect := func() (sdk.Transport, error) {
		serverSide, clientSide := sdk.NewInMemoryTransports()
		if _, err := greeter.Connect(ctx, serverSide, nil); err != nil {
			return nil, err
		}
		return clientSide, nil
	}
	c, err := mcp.NewClient(ctx, "Greeter", connect)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{c.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			panic(err)
		}
	}
	fmt.Println(c.Tools())
	got, err := agency.Call[greeting](ctx, user, "Greeter", "greet", map[string]any{"name": "Ann"})
	fmt.Println(got.Greeting, err)
	_, err = agency.Call[greeting](ctx, user, "Greeter", "greet", map[string]any{"name": 7})
	fmt.Println(errors.Is(err, agency.ErrInvalidArgs))
	// Output:
	// [greet]
	// Hello, Ann! <nil>
	// true
}

// ToolName maps an action to an MCP tool name, reversibly.
func ExampleToolName() {
	fmt.Println(mcp.ToolName("Calculator", "add"))
	fmt.Println(mcp.ToolName("Büro", "add"))
	fmt.Println(mcp.ToolName("acme.Calculator", "add"))
	// Output:
	// Calculator.add
	// B__ro.add-6f738bf3eb
	// acme_Calculator.add-11a203d950
}

// An approver of an action of requested access lets through what the MCP
// bridge's client's person approved: Approved checks the sender as well
// as __meta__.mcp_approved, which any agent could set.
func ExampleApproved() {
	ctx := context.Background()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "reset", func(context.Context, struct{}) (string, error) { return "reset", nil },
		agency.Approve(func(ctx context.Context, _ struct{}) (bool, error) {
			return mcp.Approved(ctx, "MCP"), nil // MCP is the bridge's agent id
		}))
	mallory := agency.MustNewAgent("Mallory")
	for _, a := range []*agency.Agent{calc, mallory} {
		if err := sp.Add(ctx, a); err != nil {
			panic(err)
		}
	}
	_, err := mallory.RequestMessage(ctx, &agency.Message{To: "Calculator", Action: "reset", Args: struct{}{},
		Meta: map[string]any{mcp.MetaApproved: "elicitation"}})
	fmt.Println(errors.Is(err, agency.ErrPermissionDenied))
	// Output: true
}
