// Command peer is the other process of actions/openai's tests on
// amqpspace: it adds an LLM agent, tool agents, or both, to a space on the
// given exchange, and serves them until SIGINT or SIGTERM; then it closes
// the space.
//
// A tool agent has one action, echo, which answers its text with the
// agent's id, the process id and the __meta__.conversation of the request
// ("Tool-x@1234 in c1: hi"). The LLM agent talks to the model server at
// -base-url and asks the space for help at every turn.
//
// It prints "ready" once every agent is in the space and "closed" once
// the space is closed; it exits with status 0 then, 1 when something
// fails, and 2 for bad flags.
//
//	go run ./actions/openai/internal/peer -exchange test -tools Tool-a -llm Assistant-b -base-url http://127.0.0.1:8080/v1
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

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

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

func run(args []string) error {
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = amqpspace.DefaultURL
	}
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.StringVar(&url, "url", url, "broker URL (default: AMQP_URL or amqpspace.DefaultURL)")
	exchange := fs.String("exchange", "", "exchange of the space (required)")
	tools := fs.String("tools", "", "comma-separated ids of tool agents to add")
	llmID := fs.String("llm", "", "id of an LLM agent to add")
	baseURL := fs.String("base-url", "", "the LLM agent's model server")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *exchange == "" || (*llmID != "") != (*baseURL != "") {
		return fmt.Errorf("%w: -exchange is required, and -llm goes with -base-url", errUsage)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sp, err := amqpspace.New(ctx, amqpspace.Config{URL: url, Exchange: *exchange, Logger: logger})
	if err != nil {
		return err
	}
	err = serve(ctx, sp, *tools, *llmID, *baseURL, logger)
	stop()
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(err, sp.Close(closeCtx))
}

func serve(ctx context.Context, sp *amqpspace.Space, tools, llmID, baseURL string, logger *slog.Logger) error {
	for id := range strings.SplitSeq(tools, ",") {
		if id == "" {
			continue
		}
		a, err := agency.NewAgent(id)
		if err != nil {
			return err
		}
		agency.Handle(a, "echo", func(ctx context.Context, args struct {
			Text string `json:"text"`
		}) (string, error) {
			meta := agency.MessageFrom(ctx).Meta
			conv, _ := meta["conversation"].(string)
			if ticket, ok := meta["ticket"].(string); ok { // an extension's meta
				conv += " ticket " + ticket
			}
			return fmt.Sprintf("%s@%d in %s: %s", id, os.Getpid(), conv, args.Text), nil
		}, agency.Describe("Answers the text with the agent's id, the process id and the conversation"))
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}
	if llmID != "" {
		llm, err := openai.New(llmID, openai.BaseURL(baseURL), openai.APIKey("test"), openai.Logger(logger),
			openai.Rediscover(0, 300*time.Millisecond), openai.Retries(0, 0))
		if err != nil {
			return err
		}
		if err := sp.Add(ctx, llm.Agent()); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}
