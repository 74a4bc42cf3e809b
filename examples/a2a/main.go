// Command a2a serves agents of a space over the A2A protocol, and calls
// remote A2A agents from a space.
//
// Served (the default): a space.Local with
//
//   - Calculator: add {"a", "b"} returns the sum; divide {"a", "b"} the
//     quotient, and with b = 0 an action error;
//   - Chat: an LLM agent on a scripted model (no key needed) that asks the
//     Calculator to add the first two numbers of what it is told;
//
// each at http://ADDR/agents/{id}/, with the Calculator's card also at
// http://ADDR/.well-known/agent-card.json. Tasks are kept in SQLite (-db).
//
//	go run ./examples/a2a -addr 127.0.0.1:8080
//
// Called: -call URL joins the A2A agent at URL (its base URL or its card's)
// to a space and lists its actions; with -action and -args it calls one,
// with -say it talks to it.
//
//	go run ./examples/a2a -call http://127.0.0.1:8080/agents/Calculator/ -action add -args '{"a": 1, "b": 2}'
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/seed72275b23/agency-go/actions/a2a"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/examples/internal/cli"
	"github.com/seed72275b23/agency-go/space"
)

const summary = `Usage: go run ./examples/a2a [flags]

Serves a Calculator (add, divide) and Chat, an LLM agent on a scripted
model (no key needed), over the A2A protocol, each at http://ADDR/agents/ID/
with the Calculator's card also at http://ADDR/.well-known/agent-card.json,
until interrupted. With -call URL: joins the A2A agent at URL to a space and
lists its actions, calls one (-action, -args) or talks to it (-say).`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cli.Exit("a2a", err)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("a2a", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "where to serve the agents")
	db := fs.String("db", "a2a-tasks.db", "the SQLite file that keeps the tasks")
	token := fs.String("token", "", "serve: require this bearer token (its caller is \"user\"); with -call: send it")
	callURL := fs.String("call", "", "join the A2A agent at this URL (its base URL or its card's) and call it")
	action := fs.String("action", "", "with -call: the action to call")
	argsJSON := fs.String("args", "{}", "with -action: its arguments, a JSON object")
	say := fs.String("say", "", "with -call: text to say to the agent")
	timeout := fs.Duration("timeout", 30*time.Second, "with -call: how long to wait for an answer")
	if err := cli.Parse(fs, summary, args, stdout, stderr); err != nil {
		return err
	}
	if *callURL != "" {
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return call(ctx, *callURL, *token, *action, *argsJSON, *say, stdout)
	}
	if host, _, err := net.SplitHostPort(*addr); err == nil && *token == "" {
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return cli.Usagef("-addr %s is reachable from other machines: give -token so that only callers with it call the agents, or listen on 127.0.0.1", *addr)
		}
	}
	return serve(ctx, *addr, *db, *token, stdout, stderr)
}

// serve serves the Calculator and Chat until ctx ends.
func serve(ctx context.Context, addr, db, token string, stdout, stderr io.Writer) error {
	st, err := sqlitestore.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	model := openaitest.Serve(script()...)
	defer model.Close()
	chat, err := openai.New("Chat", openai.BaseURL(model.URL), openai.APIKey("scripted"), openai.HTTPClient(model.Client()),
		openai.SystemPrompt("You add the numbers you are given with the Calculator."))
	if err != nil {
		return err
	}
	sp := space.NewLocal()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sp.Close(ctx)
	}()
	for _, a := range []*agency.Agent{calculator(), chat.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}
	cfg := a2a.Config{Space: sp, Agents: []string{"Calculator", "Chat"}, Root: "Calculator", Store: st,
		Descriptions: map[string]string{
			"Calculator": `Adds and divides. Call a skill with a data part {"action": "add", "args": {"a": 1, "b": 2}}.`,
			"Chat":       "An assistant on a scripted model: say something with two numbers in it, and it has the Calculator add them.",
		}}
	if token == "" {
		cfg.Compat03 = true // A2A 0.3 callers too, at /agents/{id}/v0.3
	} else {
		cfg.Authenticate = func(_ context.Context, t string) (string, error) {
			if t != token {
				return "", errors.New("not this server's token")
			}
			return "user", nil
		}
	}
	srv, err := a2a.NewServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close(context.Background())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "serving on %s\n", base)
	fmt.Fprintf(stdout, "  Calculator: %s/agents/Calculator/ (card: %s/.well-known/agent-card.json)\n", base, base)
	fmt.Fprintf(stdout, "  Chat:       %s/agents/Chat/\n", base)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return err
	}
	fmt.Fprintln(stderr, "stopped")
	return nil
}

type Operands struct {
	A float64 `json:"a" jsonschema:"description=the first number"`
	B float64 `json:"b" jsonschema:"description=the second number"`
}

func calculator() *agency.Agent {
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(_ context.Context, o Operands) (float64, error) { return o.A + o.B, nil },
		agency.Describe("Adds two numbers"), agency.Returns("the sum"), agency.Example(Operands{A: 1, B: 2}))
	agency.Handle(calc, "divide", func(_ context.Context, o Operands) (float64, error) {
		if o.B == 0 {
			return 0, agency.ActionFailedf("cannot divide %v by zero: give a divisor b other than 0", o.A)
		}
		return o.A / o.B, nil
	}, agency.Describe("Divides a by b"), agency.Returns("the quotient"), agency.Example(Operands{A: 6, B: 3}))
	return calc
}

var number = regexp.MustCompile(`-?\d+(\.\d+)?`)

// script is the scripted model: told something with two numbers in it, it
// has the Calculator add them, then answers with the sum.
func script() []openaitest.Step {
	step := openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return openaitest.Step{Text: "The Calculator says the sum is " + last.Content + "."}
		}
		nums := number.FindAllString(last.Content, 2)
		if len(nums) < 2 {
			return openaitest.Step{Text: "Tell me two numbers and I will have the Calculator add them."}
		}
		return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "Calculator__add", Arguments: fmt.Sprintf(`{"a": %s, "b": %s}`, nums[0], nums[1])}}}
	}}
	steps := make([]openaitest.Step, 10000)
	for i := range steps {
		steps[i] = step
	}
	return steps
}

// call joins the agent at url to a space and lists its actions, calls one,
// or says text to it.
func call(ctx context.Context, url, token, action, argsJSON, say string, stdout io.Writer) error {
	remote, err := a2a.NewRemote(ctx, a2a.RemoteConfig{URL: url, ID: "Remote", Token: token})
	if err != nil {
		return err
	}
	defer remote.Close()
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{remote.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}
	switch {
	case action != "":
		var args map[string]any
		if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
			return cli.Usagef("-args must be a JSON object: %v", err)
		}
		v, err := agency.Call[json.RawMessage](ctx, user, "Remote", action, args)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(v))
	case say != "":
		answer, err := agency.Call[string](ctx, user, "Remote", "say", openai.SayArgs{Content: say})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, answer)
	default:
		help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Remote", agency.HelpAction, nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s (%s) offers:\n", remote.Card().Name, strings.TrimSpace(remote.Card().Description))
		names := make([]string, 0, len(help))
		for name := range help {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			fmt.Fprintf(stdout, "  %s: %s %s\n", name, help[name].Description, help[name].Args)
		}
	}
	return nil
}
