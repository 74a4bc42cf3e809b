// Command chat is a terminal chat with a language model that can use the
// actions of the other agents in its space. Four agents share a space.Local:
//
//   - Assistant, the LLM agent of actions/openai;
//   - Calculator, which adds and multiplies;
//   - Host, the agent of actions/host, which runs shell commands and reads,
//     writes and lists files, each call approved at the terminal;
//   - User, whose say action prints what it is told: the person at the
//     terminal.
//
// A plain line goes to the Assistant as a say; its answer comes back as a
// say to User and is printed. A line "/Agent.action {json args}" calls an
// action as the User and prints its result. "/quit", end of input or an
// interrupt ends the chat.
//
// It needs an OpenAI-compatible model server: OPENAI_API_KEY for OpenAI,
// or OPENAI_BASE_URL for another (a local Ollama, vLLM or LM Studio), and
// optionally OPENAI_MODEL.
//
//	OPENAI_API_KEY=sk-... go run ./examples/chat
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed72275b23/agency-go/actions/host"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// errNoModel is returned by run when no model server is configured; the
// program then exits with status 2.
var errNoModel = errors.New("chat: set OPENAI_API_KEY or OPENAI_BASE_URL")

const setup = `The chat needs an OpenAI-compatible model server.

For OpenAI, set your API key:

    export OPENAI_API_KEY=sk-...
    go run ./examples/chat

For any other server, set its base URL; for example a local Ollama:

    ollama pull llama3.2
    export OPENAI_BASE_URL=http://localhost:11434/v1
    export OPENAI_MODEL=llama3.2
    go run ./examples/chat

OPENAI_MODEL chooses the model (default gpt-4o-mini). The model must support
tool calls.
`

const usage = `Type a message for the Assistant, or:
  /Agent.action {json args}   call an action yourself, as User; the args are optional
                              e.g. /Calculator.add {"a":2,"b":3}  or  /Host.help
  /help                       show this
  /quit                       leave (so do end of input and Ctrl-C)
Host asks you before each of its actions: answer y to allow, anything else to refuse.
`

// requestTimeout bounds an action called with a slash command; a Host
// action waits for your approval within it.
var requestTimeout = 5 * time.Minute // a variable for the tests

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Getenv, os.Stdin, os.Stdout)
	switch {
	case errors.Is(err, errNoModel):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

// run plays the chat: it reads lines from stdin and writes what happens to
// stdout until /quit, the end of stdin, or ctx is done; then it closes the
// space. env reads the environment. Without a model server configured it
// writes how to set one and returns errNoModel.
func run(ctx context.Context, env func(string) string, stdin io.Reader, stdout io.Writer) (err error) {
	out := &console{w: stdout}
	key, baseURL, model := env("OPENAI_API_KEY"), env("OPENAI_BASE_URL"), env("OPENAI_MODEL")
	if key == "" && baseURL == "" {
		out.print(setup)
		return errNoModel
	}

	// The one reader of stdin. It stops at the end of input, or once the
	// chat has ended and it has a line nobody will read.
	lines := make(chan string)
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(nil, 1<<20) // a pasted text may be a long line
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ended:
				return
			}
		}
	}()

	// chatCtx ends with the chat, refusing the Host's pending and later
	// questions; ctx itself ends the slash commands still running.
	chatCtx, cancel := context.WithCancel(ctx)
	c := &chat{out: out, lines: lines, asks: make(chan ask), ctx: chatCtx, callCtx: ctx}
	defer cancel()

	var opts []openai.Option
	if key != "" {
		opts = append(opts, openai.APIKey(key))
	}
	if baseURL != "" {
		opts = append(opts, openai.BaseURL(baseURL))
	}
	if model != "" {
		opts = append(opts, openai.Model(model))
	}
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
	c.user, err = newUser("User", out)
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
	for _, a := range []*agency.Agent{calc, hostAgent.Agent(), c.user.Agent, assistant.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}

	out.print("Chat with Assistant. The agents in the space and their actions:\n")
	for _, id := range []string{"Assistant", "Calculator", "Host", "User"} {
		c.showActions(id)
	}
	out.printf("\n%s\n", usage)
	c.loop()
	// From here on the Host's questions are refused. The actions called with
	// slash commands may still finish and show their results; an interrupt
	// stops them.
	cancel()
	if n := c.running.Load(); n > 0 {
		out.printf("Waiting for %d action(s) to finish; Ctrl-C stops them.\n", n)
	}
	c.calls.Wait()
	return nil
}

// chat is the terminal side of the User.
type chat struct {
	out   *console
	user  *user
	lines <-chan string
	asks  chan ask
	ctx   context.Context // done when the chat ends

	callCtx context.Context // for slash commands: done on an interrupt
	calls   sync.WaitGroup  // slash commands running
	running atomic.Int32    // how many
}

// ask is a question for the person at the terminal, answered by the next
// line.
type ask struct {
	question string
	answer   chan bool       // buffered: the loop never waits to answer
	gone     <-chan struct{} // closed when the asker stopped waiting (its request's deadline)
}

// showActions prints the actions that the agent with the given id offers
// the User, from its help.
//
// It also makes sure that the Assistant knows the agent before the first
// line is read: each agent answers the help the Assistant broadcast on
// joining before this later one, and the Assistant reads that answer before
// a say that comes after it.
func (c *chat) showActions(id string) {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, c.user.Agent, id, agency.HelpAction, nil)
	if err != nil {
		c.out.printf("  %s: %v\n", id, err)
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
	if id == c.user.ID() {
		id += " (you)"
	}
	c.out.printf("  %s: %s\n", id, strings.Join(names, ", "))
}

// loop handles input lines until the end: each line answers the oldest open
// question, if there is one, or is a message or command.
func (c *chat) loop() {
	var open []ask
	for {
		select {
		case <-c.ctx.Done():
			return
		case a := <-c.asks:
			open = append(open, a)
			if len(open) == 1 {
				c.out.print(a.question)
			}
		case <-headGone(open):
			// The request behind the question timed out: say so now, so that
			// the next line is not taken as an answer nobody waits for.
			c.out.print("\n(that question was withdrawn: the request behind it timed out)\n")
			open = open[1:]
			if len(open) > 0 {
				c.out.print(open[0].question)
			}
		case line, ok := <-c.lines:
			if !ok {
				return
			}
			if len(open) > 0 {
				answer := strings.ToLower(strings.TrimSpace(line))
				open[0].answer <- answer == "y" || answer == "yes"
				open = open[1:]
				if len(open) > 0 {
					c.out.print(open[0].question)
				}
				continue
			}
			if !c.handle(strings.TrimSpace(line)) {
				return
			}
		}
	}
}

// headGone is closed when the asker of the oldest open question stops
// waiting; nil (never ready) when no question is open.
func headGone(open []ask) <-chan struct{} {
	if len(open) == 0 {
		return nil
	}
	return open[0].gone
}

// handle acts on one line; it returns false to end the chat.
func (c *chat) handle(line string) bool {
	switch {
	case line == "":
	case line == "/quit":
		return false
	case line == "/help":
		c.out.print(usage)
	case strings.HasPrefix(line, "/"):
		c.invoke(line)
	default:
		if err := c.user.tell(c.ctx, "Assistant", line); err != nil {
			c.out.printf("Could not reach Assistant: %v\n", err)
		}
	}
	return true
}

// invoke runs a slash command, "/Agent.action {json args}", as a request
// from the User, and prints its result when it comes. It does not wait for
// it: the loop must stay free to answer the Host's questions.
func (c *chat) invoke(line string) {
	target, argText, _ := strings.Cut(line[1:], " ")
	argText = strings.TrimSpace(argText)
	dot := strings.LastIndex(target, ".") // an agent id may hold dots; action names rarely do
	if dot <= 0 || dot == len(target)-1 {
		c.out.printf("Say /Agent.action {json args}, e.g. /Calculator.add {\"a\":2,\"b\":3}; /help for more.\n")
		return
	}
	agent, action := target[:dot], target[dot+1:]
	var args any
	if argText != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(argText), &obj); err != nil || obj == nil {
			c.out.printf("The arguments must be a JSON object, e.g. {\"a\":2,\"b\":3}.\n")
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
		r, err := c.user.Request(ctx, agent, action, args)
		switch {
		case c.callCtx.Err() != nil:
			// Interrupted: nobody to tell.
		case err != nil:
			c.out.printf("%s.%s failed: %v\n", agent, action, err)
		default:
			c.out.printf("%s.%s: %s\n", agent, action, show(r.Args))
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
	a := ask{question: q, answer: make(chan bool, 1), gone: ctx.Done()}
	select {
	case c.asks <- a:
	case <-ctx.Done():
		return false
	case <-c.ctx.Done():
		return false
	}
	select {
	case ok := <-a.answer:
		return ok
	case <-ctx.Done():
		return false
	case <-c.ctx.Done():
		return false
	}
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

// console serializes writes to the terminal from the agents' goroutines.
type console struct {
	mu sync.Mutex
	w  io.Writer
}

func (c *console) print(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.w, s)
}

func (c *console) printf(format string, args ...any) {
	c.print(fmt.Sprintf(format, args...))
}
