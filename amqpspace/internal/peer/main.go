// Command peer is the other process of amqpspace's multi-process tests: it
// adds agents to a space on the given exchange and serves them until SIGINT
// or SIGTERM, then closes the space and checks that no goroutine is left.
//
// Each agent has two actions: echo, which answers its text prefixed with
// the agent's id and the process id ("Remote-x@1234: hi"), and slow, which
// sleeps for the given number of milliseconds, finishing even when the
// process is told to stop meanwhile.
//
// The test reads what the peer prints on stdout, one event a line:
//
//	ready               every agent is in the space
//	slow started ID     agent ID began a slow action
//	slow finished ID    and ended it
//	closed              the space is closed and no goroutine leaked
//
// It exits with status 0 after "closed", 1 when closing fails or leaks, and
// 2 for bad flags.
//
//	go run ./amqpspace/internal/peer -exchange test -ids Remote-a,Remote-b
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// closeTimeout bounds how long running actions may take once the peer is
// told to stop.
const closeTimeout = 30 * time.Second

// errUsage reports bad flags; the peer then exits with status 2.
var errUsage = errors.New("peer: bad usage")

func main() {
	switch err := run(os.Args[1:]); {
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case err != nil:
		fmt.Println("peer:", err)
		os.Exit(1)
	}
	fmt.Println("closed")
}

// run serves the agents that args name until a signal, then closes the
// space and looks for leaked goroutines.
func run(args []string) error {
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = amqpspace.DefaultURL
	}
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.StringVar(&url, "url", url, "broker URL (default: AMQP_URL or amqpspace.DefaultURL)")
	exchange := fs.String("exchange", "", "exchange of the space (required)")
	ids := fs.String("ids", "", "comma-separated ids of the agents to add")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *exchange == "" {
		return fmt.Errorf("%w: -exchange is required", errUsage)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sp, err := amqpspace.New(ctx, amqpspace.Config{URL: url, Exchange: *exchange, Logger: logger})
	if err != nil {
		return err
	}
	err = serve(ctx, sp, *ids)
	stop() // a second signal ends the process at once

	closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if cerr := sp.Close(closeCtx); cerr != nil {
		return errors.Join(err, fmt.Errorf("closing the space: %w", cerr))
	}
	if err != nil {
		return err
	}
	cancel()
	if err := goleak.Find(); err != nil {
		return fmt.Errorf("after Close: %w", err)
	}
	return nil
}

// serve adds one agent per id in ids, says "ready", and waits for ctx.
func serve(ctx context.Context, sp *amqpspace.Space, ids string) error {
	for id := range strings.SplitSeq(ids, ",") {
		if id == "" {
			continue
		}
		a, err := newAgent(id)
		if err != nil {
			return err
		}
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

// echoArgs are the arguments of echo.
type echoArgs struct {
	Text string `json:"text"`
}

// slowArgs are the arguments of slow.
type slowArgs struct {
	MS int `json:"ms" validate:"min=0"`
}

// newAgent returns an agent with the echo and slow actions.
func newAgent(id string) (*agency.Agent, error) {
	a, err := agency.NewAgent(id)
	if err != nil {
		return nil, err
	}
	agency.Handle(a, "echo", func(_ context.Context, args echoArgs) (string, error) {
		return fmt.Sprintf("%s@%d: %s", id, os.Getpid(), args.Text), nil
	}, agency.Describe("Answers the text prefixed with the agent's id and the process id"))
	agency.Handle(a, "slow", func(ctx context.Context, args slowArgs) (bool, error) {
		fmt.Println("slow started", id)
		// The sleep ignores ctx on purpose: the test checks that a
		// stopping process lets a running action finish.
		time.Sleep(time.Duration(args.MS) * time.Millisecond)
		fmt.Println("slow finished", id)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		return true, nil
	}, agency.Describe("Sleeps for ms milliseconds, then answers true"))
	return a, nil
}
