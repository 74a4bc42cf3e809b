// Command calculator shows a Calculator agent, on the in-process space or
// across processes on RabbitMQ.
//
// Without flags it runs three agents on the in-process space: a Calculator,
// its Owner and a User. The User asks the Calculator for help, calls add,
// and calls clear twice. The access of clear is requested: before each call
// the Calculator asks its Owner, a stand-in for a human, who approves one
// clear per run.
//
//	go run ./examples/calculator
//
// With -amqp it serves the Calculator's add on an amqpspace.Space until it
// is interrupted, and with -amqp -call, in another terminal, it calls that
// Calculator as a User of its own and exits. The broker is the one
// amqpspace.ConfigFromEnv names (AMQP_URL, or AMQP_HOST and its kin; by
// default RabbitMQ on localhost with guest/guest).
//
//	go run ./examples/calculator -amqp
//	go run ./examples/calculator -amqp -call -a 2 -b 3
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/examples/internal/cli"
	"github.com/seed72275b23/agency-go/space"
)

// Calculator adds numbers for anyone, and clears its memory when its owner
// agrees.
type Calculator struct {
	memory float64
}

// AddArgs are the arguments of add.
type AddArgs struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

// Add returns a+b. Its state needs no lock: the agent runs one action at a
// time.
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

// ApproveClear decides each call of clear, by asking the Owner agent. It
// gets the arguments decoded and validated, as Clear would, and the caller
// from the message in ctx. It may wait as long as a human takes to answer:
// the Owner's response does not queue behind the Calculator's own inbox.
func (c *Calculator) ApproveClear(ctx context.Context, args ClearArgs) (bool, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return false, err
	}
	return agency.Call[bool](ctx, agency.AgentFrom(ctx), "Owner", "approve",
		ApproveArgs{Caller: agency.MessageFrom(ctx).From, Action: "clear", Args: raw})
}

// Owner stands in for the human who owns the Calculator. It approves one
// clear per run and says what it decided.
type Owner struct {
	out      io.Writer
	approved int
}

// ApproveArgs describe a call that waits for the owner's approval.
type ApproveArgs struct {
	Caller string          `json:"caller" validate:"required"`
	Action string          `json:"action" validate:"required"`
	Args   json.RawMessage `json:"args"`
}

// Approve answers whether the call may run.
func (o *Owner) Approve(ctx context.Context, args ApproveArgs) (bool, error) {
	ok := o.approved == 0
	if ok {
		o.approved++
	}
	verdict := "refused"
	if ok {
		verdict = "approved"
	}
	asker := agency.MessageFrom(ctx).From // the agent that runs the action
	fmt.Fprintf(o.out, "Owner: %s asks to run %s.%s %s: %s\n", args.Caller, asker, args.Action, args.Args, verdict)
	return ok, nil
}

const summary = `Usage: go run ./examples/calculator [-amqp [-exchange NAME] [-call [-a N -b N]]]

Without flags: a Calculator, its Owner and a User in this process. With
-amqp: the Calculator's add served on RabbitMQ until interrupted, or, with
-call, a call to the Calculator that another process serves. The broker is
AMQP_URL (or AMQP_HOST, AMQP_PORT, AMQP_USERNAME, AMQP_PASSWORD,
AMQP_VHOST), by default RabbitMQ on localhost with guest/guest.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cli.Exit("calculator", err)
}

// runMain runs the program as its command line asks.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("calculator", flag.ContinueOnError)
	useAMQP := fs.Bool("amqp", false, "serve the Calculator on RabbitMQ until interrupted, instead of the in-process demo")
	call := fs.Bool("call", false, "with -amqp: call the Calculator that another process serves, then exit")
	exchange := fs.String("exchange", "", "with -amqp: the exchange to meet on (default "+amqpspace.DefaultExchange+")")
	a := fs.Float64("a", 2, "with -call: the first addend")
	b := fs.Float64("b", 3, "with -call: the second addend")
	if err := cli.Parse(fs, summary, args, stdout, stderr); err != nil {
		return err
	}
	if !*useAMQP {
		var misused error
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "amqp" && misused == nil {
				misused = cli.Usagef("-%s needs -amqp", f.Name)
			}
		})
		if misused != nil {
			return misused
		}
		return run(ctx, stdout)
	}
	cfg, err := cli.AMQPConfig(*exchange)
	if err != nil {
		return err
	}
	// Connection losses and reconnects are worth seeing in a demo.
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	if *call {
		return callAMQP(ctx, cfg, *a, *b, stdout)
	}
	return serveAMQP(ctx, cfg, stdout)
}

// newCalculatorAgent returns an agent named Calculator with calc's add
// action.
func newCalculatorAgent(calc *Calculator) (*agency.Agent, error) {
	a, err := agency.NewAgent("Calculator")
	if err != nil {
		return nil, err
	}
	agency.Handle(a, "add", calc.Add,
		agency.Describe("Adds two numbers"),
		agency.Returns("the sum"),
		agency.Example(AddArgs{A: 1, B: 2}))
	return a, nil
}

// run sets up the space and plays the User's part, writing what happens to
// w.
func run(ctx context.Context, w io.Writer) (err error) {
	calc := &Calculator{}
	calcAgent, err := newCalculatorAgent(calc)
	if err != nil {
		return err
	}
	agency.Handle(calcAgent, "clear", calc.Clear,
		agency.Describe("Clears the calculator's memory"),
		agency.Returns("what was done"),
		agency.Approve(calc.ApproveClear)) // its access is requested: the Owner decides

	owner := &Owner{out: w}
	ownerAgent, err := agency.NewAgent("Owner")
	if err != nil {
		return err
	}
	// Only the Calculator may ask the Owner; no one else even sees approve.
	agency.Handle(ownerAgent, "approve", owner.Approve,
		agency.Describe("Asks the owner to approve a call"),
		agency.AccessBySender(map[string]agency.Access{"Calculator": agency.Permitted}, agency.Denied))

	user, err := agency.NewAgent("User")
	if err != nil {
		return err
	}

	sp := space.NewLocal()
	defer func() { err = errors.Join(err, sp.Close(context.Background())) }()
	for _, a := range []*agency.Agent{calcAgent, ownerAgent, user} {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}

	// A safety net: nothing here should take more than a moment.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Calculator", "help", nil)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(help, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "User received help from Calculator:\n%s\n", b)

	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", AddArgs{A: 1, B: 2})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "User: add(1, 2) =", sum)

	// Arguments as an LLM might send them, with one missing.
	_, err = user.Request(ctx, "Calculator", "add", map[string]any{"a": 1})
	fmt.Fprintln(w, "User: add with b missing:", err)

	cleared, err := agency.Call[string](ctx, user, "Calculator", "clear", ClearArgs{Reason: "new day"})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "User:", cleared)

	_, err = agency.Call[string](ctx, user, "Calculator", "clear", ClearArgs{Reason: "once more"})
	if !errors.Is(err, agency.ErrPermissionDenied) {
		return fmt.Errorf("second clear: got %v, want permission denied", err)
	}
	fmt.Fprintln(w, "User: clear again:", err)
	return nil
}

// closeTimeout bounds how long closing an AMQP space may take: the
// running add to finish, the queues to be deleted.
const closeTimeout = 10 * time.Second

// serveAMQP serves a Calculator on the AMQP space that cfg names until ctx
// is done, then closes the space, which removes the Calculator and
// deletes its queues. It writes how to call the Calculator to w once it
// can be called.
func serveAMQP(ctx context.Context, cfg amqpspace.Config, w io.Writer) (err error) {
	sp, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSpace(sp)) }()

	calc, err := newCalculatorAgent(&Calculator{})
	if err != nil {
		return err
	}
	if err := sp.Add(ctx, calc); err != nil {
		if errors.Is(err, space.ErrAgentExists) {
			return fmt.Errorf("a Calculator is already served on this broker (queue names are per vhost, so on any exchange of it): stop it first: %w", err)
		}
		return err
	}
	fmt.Fprintf(w, "Calculator is serving on exchange %q at %s; stop it with Ctrl-C.\n", sp.Exchange(), redact(cfg.URL))
	fmt.Fprintf(w, "Call it from another terminal with:\n    %s -call\n", serveCommand(sp.Exchange()))
	<-ctx.Done()
	fmt.Fprintln(w, "Stopping: removing Calculator and deleting its queues.")
	return nil
}

// callAMQP joins the AMQP space that cfg names as a User with an id of its
// own, asks the Calculator for help, calls add(a, b) and writes both
// answers to w. It joins only an exchange that exists: a mistyped
// -exchange creates nothing on the broker.
func callAMQP(ctx context.Context, cfg amqpspace.Config, a, b float64, w io.Writer) (err error) {
	cfg.ExchangeMustExist = true
	sp, err := connect(ctx, cfg)
	if errors.Is(err, amqpspace.ErrNoExchange) {
		return fmt.Errorf("no Calculator on exchange %q: the broker has no such exchange (is the name right?); start one with %s", cfg.Exchange, serveCommand(cfg.Exchange))
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSpace(sp)) }()

	// Each caller has an id of its own: an id is unique across every
	// process on the exchange.
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	user, err := agency.NewAgent("User-" + hex.EncodeToString(suffix[:]))
	if err != nil {
		return err
	}
	if err := sp.Add(ctx, user); err != nil {
		return err
	}

	// A safety net: nothing here should take more than a moment.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Calculator", "help", nil)
	if errors.Is(err, agency.ErrNoRecipient) {
		return fmt.Errorf("no Calculator on exchange %q: start one with %s", sp.Exchange(), serveCommand(sp.Exchange()))
	}
	if err != nil {
		return err
	}
	text, err := json.MarshalIndent(help, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s received help from Calculator:\n%s\n", user.ID(), text)

	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", AddArgs{A: a, B: b})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: add(%v, %v) = %v\n", user.ID(), a, b, sum)
	return nil
}

// connect opens the AMQP space that cfg names, telling how to start a
// broker when there is none to reach.
func connect(ctx context.Context, cfg amqpspace.Config) (*amqpspace.Space, error) {
	sp, err := amqpspace.New(ctx, cfg)
	if errors.Is(err, amqpspace.ErrDisconnected) {
		return nil, fmt.Errorf("cannot reach RabbitMQ at %s: %w\n"+
			"Start a local broker with `rabbitmq-server -detached`, or set AMQP_URL to one that runs", redact(cfg.URL), err)
	}
	return sp, err
}

// closeSpace closes sp, waiting at most closeTimeout.
func closeSpace(sp *amqpspace.Space) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := sp.Close(ctx); err != nil {
		return fmt.Errorf("closing the space: %w", err)
	}
	return nil
}

// serveCommand is the command that serves a Calculator on exchange.
func serveCommand(exchange string) string {
	cmd := "go run ./examples/calculator -amqp"
	if exchange != amqpspace.DefaultExchange {
		cmd += " -exchange " + exchange
	}
	return cmd
}

// redact returns the broker's URL without its password.
func redact(raw string) string {
	if raw == "" {
		raw = amqpspace.DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
