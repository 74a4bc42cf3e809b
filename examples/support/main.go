// Command support is the customer-service team of AutoGen's handoffs
// pattern as a terminal program: Triage, Sales and Refunds are LLM agents
// that hand the customer to each other with transfer tools, Human is a
// person (the operator, on the same terminal) who takes the conversation
// over when Triage escalates, Shop holds the tools, and User is you.
//
// Every answer is printed as "AgentID: text", every handoff once as
// "[A → B]". When the conversation reaches Human, the operator is shown
// the conversation so far and the next line typed is the operator's
// answer; from then on each line of the user is shown to the operator,
// and the line after it is the operator's. "exit" ends the program.
//
// It talks to any OpenAI-compatible server:
//
//	OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 go run ./examples/support
//
// The conversation, the handoffs and the agents' histories are kept in a
// SQLite file (support.db in the working directory, or -store), so a
// program started again continues where the last one stopped. With -amqp
// the agents meet on RabbitMQ, and -only splits them over processes:
//
//	go run ./examples/support -amqp -only Sales,Refunds,Human,Shop   # terminal 1: the operator
//	go run ./examples/support -amqp -only Triage,User                # terminal 2: the customer
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/examples/internal/cli"
	"github.com/seed72275b23/agency-go/examples/internal/demo"
	"github.com/seed72275b23/agency-go/space"
)

const summary = `Usage: go run ./examples/support [-demo] [-db FILE] [-amqp [-exchange NAME] [-only AGENTS]]

AutoGen's customer-service team on a terminal: Triage, Sales and Refunds
(LLM agents) hand you to each other; Human, the operator, takes over when
Triage escalates. The conversation is kept in -db and goes on when started
again. The model server: OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL for
another (Ollama, vLLM, LM Studio); OPENAI_MODEL chooses the model; -demo
runs them on a scripted model in this process, with no key and no server.
With -amqp the agents meet on RabbitMQ (AMQP_URL, or AMQP_HOST, AMQP_PORT, …),
and -only splits them over processes.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	cli.Exit("support", err)
}

// run runs the program with the given arguments and environment, on the
// given streams, until the user types exit, the input ends, or ctx ends.
func run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("support", flag.ContinueOnError)
	storePath := fs.String("db", "support.db", "the SQLite file of the conversation")
	conv := fs.String("conversation", "support", "the id of the conversation")
	useAMQP := fs.Bool("amqp", false, "run the agents on RabbitMQ (AMQP_URL, or AMQP_HOST, AMQP_PORT, …)")
	exchange := fs.String("exchange", "agency-support", "with -amqp: the exchange the processes share")
	only := fs.String("only", "", "with -amqp: the agents this process runs, of "+strings.Join(allIDs, ","))
	useDemo := fs.Bool("demo", false, "run the LLM agents on a scripted model in this process: no key, no server")
	logLevel := fs.String("log", "warn", "what is logged on stderr: debug, info, warn or error")
	if err := cli.Parse(fs, summary, args, stdout, stderr); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return cli.Usagef("-log %q: %v", *logLevel, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ids := allIDs
	if *only != "" {
		if !*useAMQP {
			return cli.Usagef("-only splits the agents over processes, which meet on RabbitMQ: give -amqp too")
		}
		ids = nil
		for _, id := range strings.Split(*only, ",") {
			id = strings.TrimSpace(id)
			if !slices.Contains(allIDs, id) {
				return cli.Usagef("-only: no agent %q (the agents: %s)", id, strings.Join(allIDs, ","))
			}
			ids = append(ids, id)
		}
	}
	runs := func(id string) bool { return slices.Contains(ids, id) }
	var llm []openai.Option
	switch {
	case *useDemo:
		m := demo.Serve(demoModel)
		defer m.Close()
		llm = m.Options()
	case (runs(triageID) || runs(salesID) || runs(refundsID)) && !cli.HasModel(env):
		return cli.NoModel(stderr, "go run ./examples/support")
	}

	st, err := sqlitestore.Open(ctx, *storePath)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()

	var sp interface {
		Add(context.Context, *agency.Agent) error
		Close(context.Context) error
	}
	if *useAMQP {
		cfg, err := cli.AMQPConfig(*exchange)
		if err != nil {
			return err
		}
		cfg.Logger = log
		if sp, err = amqpspace.New(ctx, cfg); err != nil {
			return err
		}
	} else {
		sp = space.NewLocal()
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, sp.Close(closeCtx))
	}()

	term := human.NewTerminal(stdin, stdout)
	defer term.Close()
	show := handoff.ObserverFunc(func(_ context.Context, e handoff.Event) {
		if e.Kind == handoff.EventHandoff {
			term.Printf("[%s → %s]\n", e.From, e.To)
		}
	})
	team := &handoff.Team{
		UserID: userID, LLM: llm, Members: []string{triageID, salesID, refundsID, humanID},
		Options: []handoff.Option{handoff.WithStore(st), handoff.DefaultAfterWork(handoff.RevertToUser()), handoff.MaxHops(6),
			handoff.Logger(log), handoff.Observe(show)},
	}
	agents, err := newTeam(team, term, runs, log)
	if err != nil {
		return err
	}
	var user *human.User
	if runs(userID) {
		// A conversation the store knows goes on with the agent that holds it.
		start, err := team.Holder(ctx, *conv)
		if err != nil {
			return err
		}
		if start == "" {
			start = triageID
		}
		user, err = human.NewUser(userID, term, human.StartWith(start), human.Conversation(*conv))
		if err != nil {
			return err
		}
		agents = append(agents, user.Agent())
	}
	for _, a := range agents {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}
	if user == nil {
		fmt.Fprintf(stderr, "support: %s serving; Ctrl-C stops\n", strings.Join(ids, ", "))
		<-ctx.Done()
		return nil
	}
	fmt.Fprintf(stderr, "support: type a message for ACME's support (the conversation is with %s); exit leaves\n", user.Holder())
	if err := user.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
