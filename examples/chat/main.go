// Command chat is a terminal chat with a language model that can use the
// actions of the other agents in its space. Four agents share a space.Local:
//
//   - Assistant, the LLM agent of actions/openai;
//   - Calculator, which adds and multiplies;
//   - Host, the agent of actions/host, which runs shell commands and reads,
//     writes and lists files, each call approved at the terminal;
//   - User, the person at the terminal: a human.User on a human.Terminal,
//     whose say prints what it is told.
//
// A plain line goes to the Assistant as a say; its answer comes back as a
// say to User and is printed, and then the next line is read. A line
// "/Agent.action {json args}" calls an action as the User and prints its
// result when it comes; "/agents" lists the agents in the space and their
// actions. "/quit", end of input or an interrupt ends the chat.
//
// It needs an OpenAI-compatible model server: OPENAI_API_KEY for OpenAI,
// or OPENAI_BASE_URL for another (a local Ollama, vLLM or LM Studio), and
// optionally OPENAI_MODEL.
//
//	OPENAI_API_KEY=sk-... go run ./examples/chat
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed72275b23/agency-go/actions/host"
	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/examples/internal/cli"
	"github.com/seed72275b23/agency-go/examples/internal/demo"
	"github.com/seed72275b23/agency-go/space"
)

const summary = `Usage: go run ./examples/chat [-demo]

A terminal chat with an LLM agent (Assistant) that uses the actions of a
Calculator and of Host (shell commands and files, each approved by you).
The model server: OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL for another
(Ollama, vLLM, LM Studio); OPENAI_MODEL chooses the model. With -demo the
model is a scripted one in this process: no key, no server.`

const usage = `Type a message for the Assistant, or:
  /Agent.action {json args}   call an action yourself, as User; the args are optional
                              e.g. /Calculator.add {"a":2,"b":3}  or  /Host.help
  /agents                     list the agents in the space and the actions each offers you
  /help                       show this
  /quit                       leave (so do end of input and Ctrl-C)
Host asks you before each of its actions: answer y to allow, anything else to refuse.
`

// requestTimeout bounds an action called with a slash command; a Host
// action waits for your approval within it.
var requestTimeout = 5 * time.Minute // a variable for the tests

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	cli.Exit("chat", err)
}

// run plays the chat as args ask: it reads lines from stdin and writes
// what happens to stdout until /quit, the end of stdin, or ctx is done;
// then it closes the space. env reads the environment. Without a model
// server configured it writes how to set one on stderr and returns an
// error that wraps openai.ErrNoEndpoint.
func run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	useDemo := fs.Bool("demo", false, "talk to a scripted model in this process: no key, no server")
	if err := cli.Parse(fs, summary, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("no arguments are taken, only flags: %q", fs.Args())
	}
	var opts []openai.Option
	if *useDemo {
		m := demo.Serve(demoModel)
		defer m.Close()
		opts = m.Options()
	} else {
		key, baseURL, model := env("OPENAI_API_KEY"), env("OPENAI_BASE_URL"), env("OPENAI_MODEL")
		if key == "" && baseURL == "" {
			return cli.NoModel(stderr, "go run ./examples/chat")
		}
		if key != "" {
			opts = append(opts, openai.APIKey(key))
		}
		if baseURL != "" {
			opts = append(opts, openai.BaseURL(baseURL))
		}
		if model != "" {
			opts = append(opts, openai.Model(model))
		}
	}
	term := human.NewTerminal(stdin, stdout)
	defer term.Close()
	if *useDemo {
		term.Printf("The Assistant runs on a scripted model (-demo): it adds and multiplies, and lists files.\n")
	}

	// chatCtx ends with the chat, refusing the Host's pending and later
	// questions; ctx itself ends the slash commands still running.
	chatCtx, cancel := context.WithCancel(ctx)
	c := &chat{term: term, ctx: chatCtx, callCtx: ctx}
	defer cancel()

	// A tool call to Host waits for a human.
	opts = append(opts, openai.CallTimeout(requestTimeout))
	assistant, err := openai.New("Assistant", opts...)
	if err != nil {
		return err
	}
	hostAgent, err := host.New("Host", host.Approver(c.approve))
	if err != nil {
		return err
	}
	calc, err := newCalculator("Calculator")
	if err != nil {
		return err
	}
	c.user, err = human.NewUser("User", term, human.StartWith("Assistant"))
	if err != nil {
		return err
	}

	sp := space.NewLocal()
	defer func() {
		// Wait a moment for running actions, then cancel them.
		closeCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if cerr := sp.Close(closeCtx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the space: %w", cerr))
		}
	}()
	// The Assistant comes last: on joining it asks everyone for help.
	for _, a := range []*agency.Agent{calc, hostAgent.Agent(), c.user.Agent(), assistant.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}

	term.Printf("Chat with Assistant. The agents in the space and their actions:\n")
	for _, id := range []string{"Assistant", "Calculator", "Host", "User"} {
		c.showActions(id)
	}
	term.Printf("\n%s\n", usage)
	c.loop()
	// From here on the Host's questions are refused. The actions called with
	// slash commands may still finish and show their results; an interrupt
	// stops them.
	cancel()
	if n := c.running.Load(); n > 0 {
		term.Printf("Waiting for %d action(s) to finish; Ctrl-C stops them.\n", n)
	}
	c.calls.Wait()
	return nil
}

// chat is the terminal side of the User.
type chat struct {
	term *human.Terminal
	user *human.User
	ctx  context.Context // done when the chat ends

	callCtx context.Context // for slash commands: done on an interrupt
	calls   sync.WaitGroup  // slash commands running
	running atomic.Int32    // how many
}

// showActions prints the actions that the agent with the given id offers
// the User, from its help.
//
// It also gives the agents time to answer the help the Assistant broadcast
// on joining before the first line is read: each answers that help before
// this later one.
func (c *chat) showActions(id string) {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, c.user.Agent(), id, agency.HelpAction, nil)
	if err != nil {
		c.term.Printf("  %s: %v\n", id, err)
		return
	}
	names := make([]string, 0, len(help))
	for name, h := range help {
		if h.Access == agency.Requested.String() {
			name += " (asks you first)"
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if id == c.user.Agent().ID() {
		id += " (you)"
	}
	c.term.Printf("  %s: %s\n", id, strings.Join(names, ", "))
}

// loop handles the lines the person types, that no question of the Host
// takes, until the end.
func (c *chat) loop() {
	for {
		line, err := c.term.Ask(c.ctx, human.Line{})
		if err != nil {
			return // the end of input, or the chat's end
		}
		if !c.handle(strings.TrimSpace(line)) {
			return
		}
	}
}

// handle acts on one line; it returns false to end the chat. A message for
// the Assistant returns once its answer has been shown (the Host may ask
// questions meanwhile, which take the lines typed).
func (c *chat) handle(line string) bool {
	switch {
	case line == "":
	case line == "/quit":
		return false
	case line == "/help":
		c.term.Printf("%s", usage)
	case line == "/agents":
		c.listAgents()
	case strings.HasPrefix(line, "/"):
		c.invoke(line)
	default:
		if err := c.user.Say(c.ctx, line); err != nil && c.ctx.Err() == nil {
			c.term.Printf("(%s: %v)\n", c.user.Holder(), err)
		}
	}
	return true
}

// listAgents prints the agents in the space and the actions each offers
// the User, as agency.Survey finds them. Like invoke, it does not wait: an
// agent busy with an action (the Assistant in a turn) answers after it.
func (c *chat) listAgents() {
	c.calls.Add(1)
	c.running.Add(1)
	go func() {
		defer c.calls.Done()
		defer c.running.Add(-1)
		ctx, cancel := context.WithTimeout(c.callCtx, 30*time.Second)
		defer cancel()
		agents, err := agency.Survey(ctx, c.user.Agent())
		if c.callCtx.Err() != nil {
			return // interrupted: nobody to tell
		}
		var b strings.Builder
		b.WriteString("Agents in the space:\n")
		for _, id := range slices.Sorted(maps.Keys(agents)) {
			names := slices.Sorted(maps.Keys(agents[id]))
			for i, name := range names {
				if agents[id][name].Access == agency.Requested.String() {
					names[i] += " (asks you first)"
				}
			}
			fmt.Fprintf(&b, "  %s: %s\n", id, strings.Join(names, ", "))
		}
		fmt.Fprintf(&b, "  %s (you): %s\n", c.user.Agent().ID(), strings.Join(c.user.Agent().ActionNames(), ", "))
		if err != nil {
			fmt.Fprintf(&b, "  (not every agent answered: %v)\n", err)
		}
		c.term.Printf("%s", b.String())
	}()
}

// invoke runs a slash command, "/Agent.action {json args}", as a request
// from the User, and prints its result when it comes. It does not wait for
// it: the person must stay free to answer the Host's questions.
func (c *chat) invoke(line string) {
	target, argText, _ := strings.Cut(line[1:], " ")
	argText = strings.TrimSpace(argText)
	dot := strings.LastIndex(target, ".") // an agent id may hold dots; action names rarely do
	if dot <= 0 || dot == len(target)-1 {
		c.term.Printf("Say /Agent.action {json args}, e.g. /Calculator.add {\"a\":2,\"b\":3}; /help for more.\n")
		return
	}
	agent, action := target[:dot], target[dot+1:]
	var args any
	if argText != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(argText), &obj); err != nil || obj == nil {
			c.term.Printf("The arguments must be a JSON object, e.g. {\"a\":2,\"b\":3}.\n")
			return
		}
		args = json.RawMessage(argText)
	}
	c.calls.Add(1)
	c.running.Add(1)
	go func() {
		defer c.calls.Done()
		defer c.running.Add(-1)
		ctx, cancel := context.WithTimeout(c.callCtx, requestTimeout)
		defer cancel()
		r, err := c.user.Agent().Request(ctx, agent, action, args)
		switch {
		case c.callCtx.Err() != nil:
			// Interrupted: nobody to tell.
		case err != nil:
			c.term.Printf("%s.%s failed: %v\n", agent, action, err)
		default:
			c.term.Printf("%s.%s: %s\n", agent, action, show(r.Args))
		}
	}()
}

// approve is the Host's approver: it asks at the terminal and takes the
// next line as the answer. It runs on the Host's goroutine.
func (c *chat) approve(ctx context.Context, m *agency.Message) bool {
	args, err := json.Marshal(m.Args) // as the caller sent them
	if err != nil {
		return false
	}
	if string(args) == "null" {
		args = []byte("{}") // no arguments
	}
	q := fmt.Sprintf("Allow %s to run %s %s? [y/N] ", m.From, m.Action, args)
	if thoughts, ok := m.Meta["thoughts"].(string); ok && thoughts != "" {
		q = fmt.Sprintf("(%s thinks: %s)\n%s", m.From, thoughts, q)
	}
	// The question ends with the request behind it, or with the chat.
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	answer, err := c.term.Ask(qctx, human.Line{Text: q})
	if err != nil {
		if ctx.Err() != nil && c.ctx.Err() == nil {
			// Say so now, so that the next line is not taken as an answer
			// nobody waits for.
			c.term.Printf("\n(that question was withdrawn: the request behind it timed out)\n")
		}
		return false
	}
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}

// show formats a result value for the terminal: a string as it is,
// anything else as indented JSON.
func show(v any) string {
	if raw, ok := v.(json.RawMessage); ok { // a value that came as JSON
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") == nil {
			return b.String()
		}
		return string(raw)
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
