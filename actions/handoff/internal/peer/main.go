// Command peer is the second process of actions/handoff's tests on
// amqpspace: it runs the agents of the support seed that the test process
// does not (Refunds, Sales, Human and Shop, each id followed by -suffix),
// as one team with the test's Triage, on the given exchange, until SIGINT
// or SIGTERM. The LLM agents talk to the model servers at -refunds-url and
// -sales-url; the person answers with the -operator lines ("|" between
// them), in order.
//
// It prints "ready" once every agent is in the space; when stopped, one
// line of JSON (report) with what its agents received, then "closed". It
// exits with status 0 then, 1 when something fails, and 2 for bad flags.
//
//	go run ./actions/handoff/internal/peer -exchange test -suffix x1 -refunds-url http://127.0.0.1:8080/v1 -sales-url http://127.0.0.1:8081/v1
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

var errUsage = errors.New("peer: bad usage")

// report is what the agents of this process received.
type report struct {
	Accepted []handoff.Event `json:"accepted"` // the handoffs its agents took over
	Made     []handoff.Event `json:"made"`     // the handoffs its agents made
	Shop     []call          `json:"shop"`     // the shop's calls
	Shown    []human.Line    `json:"shown"`    // what the person was shown
	Asked    []human.Line    `json:"asked"`    // and asked
}

type call struct {
	Action       string `json:"action"`
	Args         string `json:"args"`
	Conversation string `json:"conversation"`
}

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
	fs.StringVar(&url, "url", url, "broker URL")
	exchange := fs.String("exchange", "", "exchange of the space (required)")
	suffix := fs.String("suffix", "", "what follows every agent id (required)")
	refundsURL := fs.String("refunds-url", "", "the model server of Refunds (required)")
	salesURL := fs.String("sales-url", "", "the model server of Sales (required)")
	operator := fs.String("operator", "", "the person's answers, separated by |")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *exchange == "" || *suffix == "" || *refundsURL == "" || *salesURL == "" {
		return fmt.Errorf("%w: -exchange, -suffix, -refunds-url and -sales-url are required", errUsage)
	}
	id := func(name string) string { return name + "-" + *suffix }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sp, err := amqpspace.New(ctx, amqpspace.Config{URL: url, Exchange: *exchange, Logger: logger})
	if err != nil {
		return err
	}

	var mu sync.Mutex
	var rep report
	var answers []string
	if *operator != "" {
		answers = strings.Split(*operator, "|")
	}
	person := human.NewScript(answers...)
	llm := func(u string) []openai.Option {
		return []openai.Option{openai.APIKey("test-key"), openai.BaseURL(u), openai.Retries(0, 0), openai.CallTimeout(time.Minute)}
	}
	observer := handoff.ObserverFunc(func(_ context.Context, e handoff.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case handoff.EventAccepted:
			rep.Accepted = append(rep.Accepted, e)
		case handoff.EventHandoff:
			rep.Made = append(rep.Made, e)
		}
	})
	team := &handoff.Team{
		UserID:   id("User"),
		Options:  []handoff.Option{handoff.DefaultAfterWork(handoff.RevertToUser()), handoff.MaxHops(6), handoff.Logger(logger), handoff.Observe(observer)},
		Members:  []string{id("Triage")},
		AgentLLM: map[string][]openai.Option{id("Refunds"): llm(*refundsURL), id("Sales"): llm(*salesURL)},
	}
	back := handoff.OnLLM(handoff.To(id("Triage")), "Call this if the user brings up a topic outside of your purview, including escalating to human.",
		handoff.Name("transfer_back_to_triage"))
	sales, err := team.Agent(id("Sales"), "You are a sales agent for ACME Inc.", back)
	if err != nil {
		return err
	}
	refunds, err := team.Agent(id("Refunds"), "You are a customer support agent for ACME Inc.", back)
	if err != nil {
		return err
	}
	manager, err := team.Human(id("Human"), person)
	if err != nil {
		return err
	}
	record := func(ctx context.Context, action string, args any) {
		b, _ := json.Marshal(args)
		conv, _ := agency.MessageFrom(ctx).Meta["conversation"].(string)
		mu.Lock()
		defer mu.Unlock()
		rep.Shop = append(rep.Shop, call{Action: action, Args: string(b), Conversation: conv})
	}
	only := func(who string) agency.ActionOption {
		return agency.AccessBySender(map[string]agency.Access{id(who): agency.Permitted}, agency.Denied)
	}
	shop := agency.MustNewAgent(id("Shop"))
	agency.Handle(shop, "look_up_item", func(ctx context.Context, a struct {
		Query string `json:"search_query"`
	}) (string, error) {
		record(ctx, "look_up_item", a)
		return "item_132612938", nil
	}, only("Refunds"), agency.Describe("Use to find item ID. Search query can be a description or keywords."))
	agency.Handle(shop, "execute_refund", func(ctx context.Context, a struct {
		ItemID string `json:"item_id"`
		Reason string `json:"reason,omitempty"`
	}) (string, error) {
		record(ctx, "execute_refund", a)
		return "success", nil
	}, only("Refunds"))
	agency.Handle(shop, "execute_order", func(ctx context.Context, a struct {
		Product string `json:"product"`
		Price   int    `json:"price"`
	}) (string, error) {
		record(ctx, "execute_order", a)
		return "Success", nil
	}, only("Sales"), agency.Describe("Price should be in USD."))

	for _, a := range []*agency.Agent{shop, manager.Agent(), sales.Agent(), refunds.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			return errors.Join(err, sp.Close(context.Background()))
		}
	}
	fmt.Println("ready")
	<-ctx.Done()
	stop()
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = sp.Close(closeCtx)
	mu.Lock()
	rep.Shown, rep.Asked = person.Shown(), person.Asked()
	b, _ := json.Marshal(rep)
	mu.Unlock()
	fmt.Println(string(b))
	return err
}
