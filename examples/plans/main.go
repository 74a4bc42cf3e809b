// Command plans serves plans approved by people: MACAE's onboarding example
// on actions/plan. A person posts a task; the planner (a language model)
// turns it into steps for the HR and tech-support agents; the person
// approves or rejects each step on the web page (or through MACAE's API and
// page); approved steps run; a rejection with a comment has the planner
// revise the plan. Plans live in a SQLite file, or in PostgreSQL, and
// survive a restart at any point.
//
//	OPENAI_API_KEY=sk-... go run ./examples/plans          # http://127.0.0.1:8000
//	OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=qwen2.5 go run ./examples/plans
//
// Over RabbitMQ (AMQP_URL, by default RabbitMQ on localhost), with the
// specialists in other processes and the plans in PostgreSQL
// (DATABASE_URL):
//
//	export DATABASE_URL=postgres://postgres@127.0.0.1:5432/test
//	go run ./examples/plans -amqp -pg -agents specialists
//	go run ./examples/plans -amqp -pg -agents coordinator
//
// Flags: -addr (default 127.0.0.1:8000), -db (default plans.db), -pg (the
// plans in PostgreSQL at DATABASE_URL, instead of -db), -amqp (a space on
// RabbitMQ instead of one in the process), -exchange, -agents (all, coordinator or
// specialists), -suffix (appended to every agent id, for several
// deployments on one broker), -lease (how long a step may go unanswered
// before it is sent again), -user (the user of requests without the
// x-ms-client-principal-id header; empty: they are refused),
// -wait (how long input_task and approvals wait for the plan and the
// steps, as MACAE's page expects), -origin (a web origin allowed to call the
// API from a browser, such as MACAE's own page served elsewhere).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/examples/internal/cli"
	"github.com/seed72275b23/agency-go/examples/internal/demo"
	"github.com/seed72275b23/agency-go/space"
)

const summary = `Usage: go run ./examples/plans [-demo] [-addr HOST:PORT] [-db FILE | -pg] [-amqp [-exchange NAME] [-agents all|coordinator|specialists]]

MACAE's onboarding example: a person posts a task, the planner (a language
model) turns it into steps, the person approves or rejects each on the web
page, approved steps run. The model server: OPENAI_API_KEY for OpenAI, or
OPENAI_BASE_URL for another (Ollama, vLLM, LM Studio); OPENAI_MODEL
chooses the model; -demo plans with a scripted planner in this process, no
key and no server (and, without -user, takes requests as the user me). -pg keeps the plans in PostgreSQL at DATABASE_URL; -amqp
runs on RabbitMQ at AMQP_URL (or AMQP_HOST, AMQP_PORT, …).`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cli.Exit("plans", err)
}

// wrapStore, when set, wraps the store every agent of the program uses:
// the test that kills the program at each instant of a step watches its
// transactions through it.
var wrapStore func(store.Store) store.Store

// Space is what the program needs of a space.
type Space interface {
	Add(ctx context.Context, a *agency.Agent) error
	Close(ctx context.Context) error
}

// run serves until ctx ends. It prints "listening on URL" once the API
// answers, "ready" once every agent is in the space, and a line per action
// a specialist runs.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plans", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8000", "address of the HTTP API and the web page")
	dbPath := fs.String("db", "plans.db", "SQLite file of the plans")
	pg := fs.Bool("pg", false, "keep the plans in PostgreSQL at DATABASE_URL (instead of -db)")
	useAMQP := fs.Bool("amqp", false, "run on a space on RabbitMQ (AMQP_URL, or AMQP_HOST, AMQP_PORT, …)")
	exchange := fs.String("exchange", "", "with -amqp: the broker's exchange (default agency)")
	agents := fs.String("agents", "all", "which agents this process runs: all, coordinator or specialists")
	suffix := fs.String("suffix", "", "appended to every agent id")
	lease := fs.Duration("lease", plan.DefaultLease, "how long a step may go unanswered before it is sent again")
	user := fs.String("user", "", "user of requests without an x-ms-client-principal-id header")
	wait := fs.Duration("wait", time.Minute, "how long input_task and approvals wait for the plan and the steps")
	origin := fs.String("origin", "", "a web origin allowed to call the API from a browser (CORS), such as MACAE's page at http://localhost:3000; * for any")
	verbose := fs.Bool("v", false, "log every plan event to stderr")
	useDemo := fs.Bool("demo", false, "plan with a scripted planner in this process: no key, no server; -user me unless given")
	if err := cli.Parse(fs, summary, args, stdout, stderr); err != nil {
		return err
	}
	runCoordinator := *agents == "all" || *agents == "coordinator"
	runSpecialists := *agents == "all" || *agents == "specialists"
	if !runCoordinator && !runSpecialists {
		return cli.Usagef("-agents must be all, coordinator or specialists")
	}
	if !*useAMQP && (!runCoordinator || !runSpecialists) {
		return cli.Usagef("-agents %s needs -amqp: without a broker every agent runs in this process", *agents)
	}
	dsn := os.Getenv("DATABASE_URL")
	if *pg && dsn == "" {
		return cli.Usagef("-pg needs DATABASE_URL, the PostgreSQL database of the plans (such as postgres://postgres@127.0.0.1:5432/test)")
	}
	var llm []openai.Option
	switch {
	case *useDemo && runCoordinator:
		m := demo.Serve(demoPlanner)
		defer m.Close()
		llm = m.Options()
		if *user == "" {
			*user = "me"
		}
	case runCoordinator && !cli.HasModel(os.Getenv):
		return cli.NoModel(stderr, "go run ./examples/plans")
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	coordID, plannerID, humanID := "GroupChatManager"+*suffix, "PlannerAgent"+*suffix, "HumanAgent"+*suffix

	var planner *openai.Agent
	if runCoordinator {
		var err error
		planner, err = openai.New(plannerID, append(llm, openai.SystemPrompt(plan.PlannerPrompt), openai.Logger(logger))...)
		if err != nil {
			return err
		}
	}

	var st store.Store
	var err error
	if *pg {
		st, err = pgstore.Open(ctx, dsn)
	} else {
		st, err = sqlitestore.Open(ctx, *dbPath)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	if wrapStore != nil {
		st = wrapStore(st)
	}

	var sp Space
	if *useAMQP {
		cfg, err := cli.AMQPConfig(*exchange)
		if err != nil {
			return err
		}
		cfg.Logger = logger
		if sp, err = amqpspace.New(ctx, cfg); err != nil {
			return err
		}
	} else {
		sp = space.NewLocal()
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sp.Close(cctx)
	}()

	out := &printer{w: stdout}
	var members []*agency.Agent
	var gw *agency.Agent
	if runCoordinator {
		coord, err := plan.NewCoordinator(coordID, st, plan.Planner(plannerID), plan.Approver(humanID),
			plan.Lease(*lease), plan.Logger(logger))
		if err != nil {
			return err
		}
		gw = agency.MustNewAgent(humanID)
		members = append(members, coord.Agent(), planner.Agent(), gw)
	}
	if runSpecialists {
		members = append(members, specialists(st, coordID, *suffix, out)...)
	}
	for _, a := range members {
		if err := sp.Add(ctx, a); err != nil {
			return fmt.Errorf("adding %s: %w", a.ID(), err)
		}
	}
	out.printf("ready")
	if !runCoordinator {
		<-ctx.Done()
		return nil
	}

	opts := []planhttp.Option{planhttp.WaitFor(*wait), planhttp.Logger(logger)}
	if *user != "" {
		opts = append(opts, planhttp.DevUser(*user))
	}
	if *origin != "" {
		opts = append(opts, planhttp.AllowOrigins(*origin))
	}
	h, err := planhttp.Handler(gw, coordID, opts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	out.printf("listening on http://%s", ln.Addr())
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
