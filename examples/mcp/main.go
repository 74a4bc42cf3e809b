// Command mcp serves agents as MCP tools, and joins MCP servers to a space.
//
// Without flags it is an MCP server on stdio (logs go to stderr only)
// serving a Calculator agent: add and divide, and reset, whose access is
// requested (the MCP client's person approves each call where the client
// supports elicitation; otherwise the Calculator's approver refuses it).
//
//	go run ./examples/mcp
//	go run ./examples/mcp -http 127.0.0.1:8931    # http://127.0.0.1:8931/mcp
//	go run ./examples/mcp -amqp                   # the agents on RabbitMQ instead
//	go run ./examples/mcp -join 'npx -y @modelcontextprotocol/server-filesystem /tmp'
//
// With -amqp it serves, instead of its own Calculator, the agents it finds
// on the broker that amqpspace.ConfigFromEnv names (start one with
// `go run ./examples/calculator -amqp`). With -join it starts the MCP
// server the command names, joins it to an in-process space as the agent
// Server, calls one of its tools through agency (-tool and -args choose
// which; by default the first, by name, that needs no argument) and prints
// the result.
package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
)

// Args are the arguments of add and divide.
type Args struct {
	A float64 `json:"a" jsonschema:"description=the first number"`
	B float64 `json:"b" jsonschema:"description=the second number"`
}

// ResetArgs are the arguments of reset.
type ResetArgs struct {
	Reason string `json:"reason" validate:"min=3,max=80" jsonschema:"description=why the Calculator should start afresh"`
}

// newCalculator returns the Calculator agent.
func newCalculator() *agency.Agent {
	calc := agency.MustNewAgent("Calculator", agency.Concurrency(8))
	agency.Handle(calc, "add", func(_ context.Context, a Args) (float64, error) {
		return a.A + a.B, nil
	}, agency.Describe("Adds two numbers"), agency.Returns("a + b"), agency.Example(Args{A: 1, B: 2}))
	agency.Handle(calc, "divide", func(_ context.Context, a Args) (float64, error) {
		if a.B == 0 {
			return 0, agency.ActionFailedf("division by zero: b must not be 0")
		}
		return a.A / a.B, nil
	}, agency.Describe("Divides a by b"), agency.Returns("a / b"))
	agency.Handle(calc, "reset", func(_ context.Context, a ResetArgs) (string, error) {
		return "reset: " + a.Reason, nil
	}, agency.Describe("Starts the Calculator afresh; a person approves each call"), agency.Returns("what was done"),
		agency.Approve(approveReset))
	return calc
}

// bridgeID is the id of the MCP server's agent beside the Calculator.
const bridgeID = "MCP"

// approveReset is the Calculator's approver for reset: it lets through a
// call that the MCP bridge sent after its client's person approved it,
// and refuses any other, saying why. It checks who sent the call, not
// only the meta key, which any agent in the space could set.
func approveReset(ctx context.Context, _ ResetArgs) (bool, error) {
	if mcp.Approved(ctx, bridgeID) {
		return true, nil
	}
	if agency.MessageFrom(ctx).From != bridgeID {
		return false, agency.PermissionDeniedf("reset needs a person's approval, which only the MCP bridge %q can ask for", bridgeID)
	}
	return false, agency.PermissionDeniedf("reset needs a person's approval, and this caller's MCP client cannot ask one (it does not support elicitation)")
}

func main() {
	httpAddr := flag.String("http", "", "serve over streamable HTTP at ADDR (path /mcp) instead of stdio; ADDR without a host listens on 127.0.0.1")
	token := flag.String("token", "", "with -http: require this bearer token (default: $MCP_TOKEN; required off loopback)")
	useAMQP := flag.Bool("amqp", false, "serve the agents found on RabbitMQ instead of the Calculator")
	exchange := flag.String("exchange", "", "with -amqp: the exchange to meet on (default "+amqpspace.DefaultExchange+")")
	join := flag.String("join", "", "start this MCP server command, join it to a space, call one of its tools and print the result")
	tool := flag.String("tool", "", "with -join: the tool to call (default: the first that needs no argument)")
	args := flag.String("args", "{}", "with -join: the tool's arguments, a JSON object")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)) // stdout is the MCP channel
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *join != "":
		err = runJoin(ctx, *join, *tool, *args, os.Stdout)
	default:
		if *token == "" {
			*token = os.Getenv("MCP_TOKEN")
		}
		err = serve(ctx, logger, *useAMQP, *exchange, *httpAddr, *token, func(a net.Addr) {
			logger.Info("listening", "url", "http://"+a.String()+mcp.Path)
		})
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "mcp:", err)
		os.Exit(1)
	}
}

// serve runs the MCP server, on stdio or HTTP (telling ready where it
// listens), until ctx is done or the client goes.
func serve(ctx context.Context, logger *slog.Logger, useAMQP bool, exchange, httpAddr, token string, ready func(net.Addr)) error {
	var sp interface {
		Add(context.Context, *agency.Agent) error
		Close(context.Context) error
	}
	id := bridgeID
	if useAMQP {
		cfg, err := amqpspace.ConfigFromEnv()
		if err != nil {
			return err
		}
		cfg.Logger = logger
		if exchange != "" {
			cfg.Exchange = exchange
		}
		asp, err := amqpspace.New(ctx, cfg)
		if err != nil {
			return fmt.Errorf("cannot reach RabbitMQ (set AMQP_URL, or AMQP_HOST and its kin, in the MCP client's env entries): %w", err)
		}
		sp = asp
		id = "MCP-" + suffix() // unique on the broker, where ids are
	} else {
		local := space.NewLocal()
		if err := local.Add(ctx, newCalculator()); err != nil {
			return err
		}
		sp = local
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sp.Close(cctx)
	}()
	opts := []mcp.ServerOption{mcp.ServerLogger(logger), mcp.Implementation("agency-go examples/mcp", "")}
	if useAMQP {
		opts = append(opts, mcp.ExceptAgents("MCP-*"))
	}
	if token != "" {
		opts = append(opts, mcp.BearerToken(func(_ context.Context, got string) error {
			if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				return errors.New("not the token this server was started with")
			}
			return nil
		}))
	}
	srv, err := mcp.NewServer(id, opts...)
	if err != nil {
		return err
	}
	if err := sp.Add(ctx, srv.Agent()); err != nil {
		return err
	}
	if err := srv.Refresh(ctx); err != nil {
		return err
	}
	logger.Info("serving MCP", "agent", id, "tools", srv.Tools())
	if httpAddr != "" {
		return srv.ListenAndServe(ctx, httpAddr, ready)
	}
	return srv.Run(ctx, mcp.Stdio())
}

// runJoin joins the MCP server that command starts to a space, calls one
// of its tools through agency and prints the result.
func runJoin(ctx context.Context, command, tool, rawArgs string, w io.Writer) error {
	argv := strings.Fields(command)
	if len(argv) == 0 {
		return errors.New("-join needs a command")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // npx may download the server first
	defer cancel()
	client, err := mcp.NewClient(ctx, "Server", mcp.Command(nil, argv[0], argv[1:]...))
	if err != nil {
		return err
	}
	defer client.Close()
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{client.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Server", "help", nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Server's actions: %s\n", strings.Join(slices.Sorted(maps.Keys(help)), ", "))
	if tool == "" {
		tool = firstWithoutArgs(help)
		if tool == "" {
			return errors.New("every tool needs arguments: choose one with -tool and give them with -args")
		}
	}
	var args json.RawMessage
	if err := json.Unmarshal([]byte(rawArgs), &args); err != nil {
		return fmt.Errorf("-args: %w", err)
	}
	value, err := agency.Call[any](ctx, user, "Server", tool, args)
	if err != nil {
		return fmt.Errorf("calling Server.%s: %w", tool, err)
	}
	if s, ok := value.(string); ok {
		fmt.Fprintf(w, "Server.%s:\n%s\n", tool, s)
		return nil
	}
	out, _ := json.MarshalIndent(value, "", "  ")
	fmt.Fprintf(w, "Server.%s:\n%s\n", tool, out)
	return nil
}

// firstWithoutArgs returns the first action, by name, whose schema
// requires no argument.
func firstWithoutArgs(help map[string]agency.ActionHelp) string {
	for _, name := range slices.Sorted(maps.Keys(help)) {
		var s struct {
			Required []string `json:"required"`
		}
		if json.Unmarshal(help[name].Args, &s) == nil && len(s.Required) == 0 {
			return name
		}
	}
	return ""
}

func suffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
