package main

import (
	"context"
	"strings"
	"sync"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
)

// NumbersArgs are the arguments of add and multiply.
type NumbersArgs struct {
	A float64 `json:"a" jsonschema:"description=the first number"`
	B float64 `json:"b" jsonschema:"description=the second number"`
}

// newCalculator returns an agent that adds and multiplies.
func newCalculator(id string) (*agency.Agent, error) {
	a, err := agency.NewAgent(id)
	if err != nil {
		return nil, err
	}
	add := func(ctx context.Context, args NumbersArgs) (float64, error) { return args.A + args.B, nil }
	multiply := func(ctx context.Context, args NumbersArgs) (float64, error) { return args.A * args.B, nil }
	agency.Handle(a, "add", add,
		agency.Describe("Adds two numbers"),
		agency.Returns("the sum a+b"),
		agency.Example(NumbersArgs{A: 2, B: 3}))
	agency.Handle(a, "multiply", multiply,
		agency.Describe("Multiplies two numbers"),
		agency.Returns("the product a*b"),
		agency.Example(NumbersArgs{A: 4, B: 2.5}))
	return a, nil
}

// newUser returns the agent of the person at the terminal: its say prints
// what it is told, with who said it.
func newUser(id string, out *console) (*user, error) {
	u := &user{out: out, says: make(map[string]bool)}
	a, err := agency.NewAgent(id, agency.Hooks(u))
	if err != nil {
		return nil, err
	}
	agency.Handle(a, "say", u.say,
		agency.Describe("Shows a message to the person at the terminal"),
		agency.Returns("that the message was shown"),
		agency.Example(openai.SayArgs{Content: "Hello!"}))
	u.Agent = a
	return u, nil
}

// user is the User agent.
type user struct {
	*agency.Agent
	out *console

	mu   sync.Mutex
	says map[string]bool // ids of the says sent, until they are answered
}

func (u *user) say(ctx context.Context, args openai.SayArgs) (string, error) {
	u.out.printf("%s: %s\n", agency.MessageFrom(ctx).From, args.Content)
	return "shown to the user", nil
}

// tell sends a say to the agent with id to. Its answer is a say back; the
// response to this one only matters when it is an error.
func (u *user) tell(ctx context.Context, to, content string) error {
	m := &agency.Message{To: to, ID: agency.NewID(), Action: "say", Args: openai.SayArgs{Content: content}}
	u.mu.Lock()
	u.says[m.ID] = true
	u.mu.Unlock()
	_, err := u.SendMessage(ctx, m)
	return err
}

// answered reports whether m answers a say the User sent, and forgets that
// say.
func (u *user) answered(m *agency.Message) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	ok := u.says[m.ParentID]
	delete(u.says, m.ParentID)
	return ok
}

// HandleActionValue notes the answer to a say.
func (u *user) HandleActionValue(ctx context.Context, m *agency.Message) {
	u.answered(m)
}

// HandleActionError shows the errors that answer the User's says, such as
// the Assistant failing, unless the Assistant has already said why: its
// own failures start with "Sorry, ". Late errors to the requests of slash
// commands that were given up are not shown.
func (u *user) HandleActionError(ctx context.Context, m *agency.Message, err *agency.ActionError) {
	if !u.answered(m) || err == nil || strings.HasPrefix(err.Text, "Sorry, ") {
		return
	}
	u.out.printf("(%s: %v)\n", m.From, err)
}
