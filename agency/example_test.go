package agency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Addends are the arguments of the examples' add action.
type Addends struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

// addNumbers is the examples' action: a plain function, testable without a space.
func addNumbers(_ context.Context, args Addends) (float64, error) {
	return args.A + args.B, nil
}

// The program of the README, kept here so that it is compiled and run.
func Example_readme() {
	type AddArgs struct {
		A float64 `json:"a" jsonschema:"description=first addend"`
		B float64 `json:"b" jsonschema:"description=second addend"`
	}

	ctx := context.Background()
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(ctx context.Context, args AddArgs) (float64, error) {
		return args.A + args.B, nil
	}, agency.Describe("Adds two numbers"))
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}
	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", AddArgs{A: 1, B: 2})
	fmt.Println(sum, err)
	// Output: 3 <nil>
}

func ExampleHandle() {
	type GreetArgs struct {
		Name  string `json:"name" validate:"min=1,max=40" jsonschema:"description=who to greet"`
		Shout bool   `json:"shout,omitempty"`
	}
	greet := func(ctx context.Context, args GreetArgs) (string, error) {
		// The message being handled, its sender and meta, come with ctx.
		s := fmt.Sprintf("hello, %s (asked by %s)", args.Name, agency.MessageFrom(ctx).From)
		if args.Shout {
			s = strings.ToUpper(s)
		}
		return s, nil
	}

	greeter := agency.MustNewAgent("Greeter")
	agency.Handle(greeter, "greet", greet,
		agency.Describe("Greets someone"),
		agency.Returns("the greeting"),
		agency.Example(GreetArgs{Name: "Ada"}))
	fmt.Println(greeter.ActionNames())

	ctx := context.Background()
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, greeter), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	// Arguments as JSON, the way they come from the wire or an LLM.
	s, err := agency.Call[string](ctx, user, "Greeter", "greet", json.RawMessage(`{"name": "Ada", "shout": true}`))
	fmt.Println(s, err)
	// Output:
	// [greet]
	// HELLO, ADA (ASKED BY USER) <nil>
}

func ExampleRegister() {
	type GreetArgs struct {
		Name string `json:"name" validate:"min=1"`
	}
	greeter := agency.MustNewAgent("Greeter")
	greet := func(ctx context.Context, args GreetArgs) (string, error) { return "hello, " + args.Name, nil }

	// An example that breaks the action's own rules is caught at registration.
	err := agency.Register(greeter, "greet", greet, agency.Example(GreetArgs{}))
	fmt.Println(err)
	// So is a reserved name.
	err = agency.Register(greeter, "help", greet)
	fmt.Println(err)
	// Output:
	// agency: action "greet": example 1: name: breaks rule min=1
	// agency: invalid action name: "help" is reserved
}

func ExampleCall() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", addNumbers, agency.Describe("Adds two numbers"))
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", Addends{A: 1, B: 2})
	fmt.Println(sum, err)

	// Arguments may also be a map, and the result any type its JSON fits.
	n, err := agency.Call[int](ctx, user, "Calculator", "add", map[string]any{"a": 40, "b": 2})
	fmt.Println(n, err)
	// Output:
	// 3 <nil>
	// 42 <nil>
}

func ExampleAgent_Request() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", addNumbers)
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	// "c" is not an argument of add, and "b" is missing: a missing number is
	// not taken for 0.
	_, err := user.Request(ctx, "Calculator", "add", map[string]any{"a": 1, "c": 2})
	fmt.Println(err)
	fmt.Println(errors.Is(err, agency.ErrInvalidArgs))
	var ae *agency.ActionError
	if errors.As(err, &ae) {
		fmt.Println(ae.Type)
	}

	// Zero values that are present are fine.
	r, err := user.Request(ctx, "Calculator", "add", map[string]any{"a": 0, "b": 0})
	fmt.Println(r.Action, r.Args, err)

	// An action the agent does not have.
	_, err = user.Request(ctx, "Calculator", "mul", nil)
	fmt.Println(errors.Is(err, agency.ErrNotFound))
	// An agent the space does not have.
	_, err = user.Request(ctx, "Nobody", "add", nil)
	fmt.Println(errors.Is(err, agency.ErrNoRecipient))
	// Output:
	// invalid_args: invalid arguments for "Calculator.add": c: unknown field; the fields are a, b; b: missing required field (send "help" for the argument schema)
	// true
	// invalid_args
	// [response] 0 <nil>
	// true
	// true
}

// replyInbox is a hook value: it implements agency.ValueHandler and
// agency.ErrorHandler, and passes the responses it receives on.
type replyInbox chan *agency.Message

func (r replyInbox) HandleActionValue(ctx context.Context, m *agency.Message) { r <- m }

func (r replyInbox) HandleActionError(ctx context.Context, m *agency.Message, err *agency.ActionError) {
	r <- m
}

func ExampleAgent_Send() {
	ctx := context.Background()
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", addNumbers)

	// Responses to Send go to the sender's hooks.
	got := make(replyInbox, 2)
	user := agency.MustNewAgent("User", agency.Hooks(got))

	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	// Sending to an id that no agent has is not an error for Send, but the
	// space tells the sender's ErrorHandler.
	_, err := user.Send(ctx, "Nobody", "add", Addends{})
	fmt.Println("send to Nobody:", err)
	m := <-got
	fmt.Println(m.Action, m.From, m.Err())
	fmt.Println(errors.Is(m.Err(), agency.ErrNoRecipient))

	id, err := user.Send(ctx, "Calculator", "add", Addends{A: 1, B: 2})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := user.Send(ctx, "Calculator", "mul", Addends{A: 1, B: 2}); err != nil {
		log.Fatal(err)
	}
	// The Calculator handles its messages in order, so the answers come in order.
	m = <-got
	sum, err := agency.Value[float64](m)
	fmt.Println(m.Action, m.ParentID == id, sum, err)
	m = <-got
	fmt.Println(m.Action, m.Err())
	// Output:
	// send to Nobody: <nil>
	// [error] Nobody not_found: no agent "Nobody" in the space: "add" was not delivered
	// true
	// [response] true 3 <nil>
	// [error] not_found: "Calculator" has no action "mul"; send it "help" to list the actions it offers
}

func ExampleAgent_SendMessage() {
	ctx := context.Background()
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(ctx context.Context, args Addends) (float64, error) {
		// Meta travels unchanged, for the action to read.
		fmt.Println("thoughts:", agency.MessageFrom(ctx).Meta["thoughts"])
		return args.A + args.B, nil
	})
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := errors.Join(sp.Add(ctx, calc), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	// The framework sets From, and ID unless it is given.
	r, err := user.RequestMessage(ctx, &agency.Message{
		To:     "Calculator",
		ID:     "add-1",
		Meta:   map[string]any{"thoughts": "I should add them"},
		Action: "add",
		Args:   Addends{A: 1, B: 2},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.From, r.ParentID, r.Action, r.Args)
	// Output:
	// thoughts: I should add them
	// Calculator add-1 [response] 3
}

func ExampleRespond() {
	type CountArgs struct {
		To int `json:"to" validate:"min=1"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	counter := agency.MustNewAgent("Counter")
	agency.Handle(counter, "count", func(ctx context.Context, args CountArgs) (int, error) {
		for i := 1; i < args.To; i++ {
			if err := agency.Respond(ctx, i); err != nil {
				return 0, err
			}
		}
		return args.To, nil // the last response
	})
	later := make(replyInbox, 2)
	user := agency.MustNewAgent("User", agency.Hooks(later))
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := errors.Join(sp.Add(ctx, counter), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	// Request returns the first response; the others reach the ValueHandler.
	first, err := agency.Call[int](ctx, user, "Counter", "count", CountArgs{To: 3})
	fmt.Println("Request:", first, err)
	for range 2 {
		n, err := agency.Value[int](<-later)
		fmt.Println("ValueHandler:", n, err)
	}
	// Output:
	// Request: 1 <nil>
	// ValueHandler: 2 <nil>
	// ValueHandler: 3 <nil>
}

// vaultKeeper decides the calls of actions whose access is Requested. A real
// one might ask a human and wait for the answer.
type vaultKeeper struct{}

func (vaultKeeper) RequestPermission(ctx context.Context, m *agency.Message) bool {
	ok := m.From == "Alice"
	fmt.Printf("vaultKeeper: %s asks for %s: %v\n", m.From, m.Action, ok)
	return ok
}

func ExampleAccessForAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	vault := agency.MustNewAgent("Vault", agency.Hooks(vaultKeeper{}))
	agency.Handle(vault, "open", func(ctx context.Context, _ struct{}) (string, error) {
		return "opened", nil
	}, agency.AccessForAll(agency.Requested))
	alice := agency.MustNewAgent("Alice")
	bob := agency.MustNewAgent("Bob")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := errors.Join(sp.Add(ctx, vault), sp.Add(ctx, alice), sp.Add(ctx, bob)); err != nil {
		log.Fatal(err)
	}

	// help shows the policy; asking for help does not ask the vaultKeeper.
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, bob, "Vault", "help", nil)
	fmt.Println(help["open"].Access, err)

	s, err := agency.Call[string](ctx, alice, "Vault", "open", nil)
	fmt.Println(s, err)
	_, err = agency.Call[string](ctx, bob, "Vault", "open", nil)
	fmt.Println(err, errors.Is(err, agency.ErrPermissionDenied))
	// Output:
	// requested <nil>
	// vaultKeeper: Alice asks for open: true
	// opened <nil>
	// vaultKeeper: Bob asks for open: false
	// permission_denied: "Vault.open" not permitted for "Bob" true
}

func ExampleAccessBySender() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	db := agency.MustNewAgent("DB")
	agency.Handle(db, "drop", func(ctx context.Context, _ struct{}) (string, error) {
		return "dropped", nil
	}, agency.AccessBySender(map[string]agency.Access{"Admin": agency.Permitted}, agency.Denied))
	agency.Handle(db, "count", func(ctx context.Context, _ struct{}) (int, error) { return 7, nil })
	admin := agency.MustNewAgent("Admin")
	guest := agency.MustNewAgent("Guest")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := errors.Join(sp.Add(ctx, db), sp.Add(ctx, admin), sp.Add(ctx, guest)); err != nil {
		log.Fatal(err)
	}

	// A denied action is invisible in the asker's help.
	for _, asker := range []*agency.Agent{admin, guest} {
		help, err := agency.Call[map[string]agency.ActionHelp](ctx, asker, "DB", "help", nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(asker.ID(), "sees", slices.Sorted(maps.Keys(help)))
	}

	s, err := agency.Call[string](ctx, admin, "DB", "drop", nil)
	fmt.Println(s, err)
	_, err = agency.Call[string](ctx, guest, "DB", "drop", nil)
	fmt.Println(err)
	// Output:
	// Admin sees [count drop]
	// Guest sees [count]
	// dropped <nil>
	// permission_denied: "DB.drop" not permitted for "Guest"
}

func ExampleAccessFunc() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Access by a meta key the caller sets. For help, the function sees a
	// message from the asker that names the action and carries no arguments.
	byRole := agency.AccessFunc(func(m *agency.Message) agency.Access {
		if m.Meta["role"] == "operator" {
			return agency.Permitted
		}
		return agency.Denied
	})
	plant := agency.MustNewAgent("Plant")
	agency.Handle(plant, "shutdown", func(ctx context.Context, _ struct{}) (string, error) {
		return "shut down", nil
	}, byRole)
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := errors.Join(sp.Add(ctx, plant), sp.Add(ctx, user)); err != nil {
		log.Fatal(err)
	}

	for _, role := range []string{"visitor", "operator"} {
		meta := map[string]any{"role": role}
		r, err := user.RequestMessage(ctx, &agency.Message{To: "Plant", Meta: meta, Action: "help"})
		if err != nil {
			log.Fatal(err)
		}
		help, _ := agency.Value[map[string]json.RawMessage](r)
		_, listed := help["shutdown"]
		_, err = user.RequestMessage(ctx, &agency.Message{To: "Plant", Meta: meta, Action: "shutdown"})
		fmt.Printf("%s: listed %v, call error: %v\n", role, listed, err)
	}
	// Output:
	// visitor: listed false, call error: permission_denied: "Plant.shutdown" not permitted for "User"
	// operator: listed true, call error: <nil>
}

func ExampleDecodeMessage() {
	wire := `{"to": "Calculator", "from": "User",
	          "action": {"__meta__": {"id": "m1", "thoughts": "I should add them"},
	                     "add": {"a": 1, "b": 2}}}`
	m, err := agency.DecodeMessage([]byte(wire))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.To, m.From, m.ID, m.Action)
	fmt.Println(m.Meta["thoughts"])
	fmt.Printf("%s\n", m.Args) // a json.RawMessage, decoded by the action

	// Anything else is rejected, saying why.
	_, err = agency.DecodeMessage([]byte(`{"to": "Calculator", "from": "User", "action": {"add": {}, "sub": {}}}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, agency.ErrMalformedMessage))
	// Output:
	// Calculator User m1 add
	// I should add them
	// {"a": 1, "b": 2}
	// agency: malformed message: the action object names 2 actions (add, sub); a message carries exactly one
	// true
}

func ExampleMessage_MarshalJSON() {
	request := &agency.Message{
		To: "Calculator", From: "User", ID: "m1",
		Meta:   map[string]any{"thoughts": "I should add them"},
		Action: "add", Args: Addends{A: 1, B: 2},
	}
	response := &agency.Message{
		To: "User", From: "Calculator", ID: "m2", ParentID: "m1",
		Action: agency.ResponseAction, Args: 3.0,
	}
	refusal := &agency.Message{
		To: "User", From: "Calculator", ID: "m3", ParentID: "m1",
		Action: agency.ErrorAction,
		Args:   &agency.ActionError{Type: agency.TypePermissionDenied, Text: `"Calculator.add" not permitted for "User"`},
	}
	for _, m := range []*agency.Message{request, response, refusal} {
		b, err := json.Marshal(m)
		fmt.Println(string(b), err)
	}
	// Output:
	// {"to":"Calculator","from":"User","action":{"__meta__":{"id":"m1","thoughts":"I should add them"},"add":{"a":1,"b":2}}} <nil>
	// {"to":"User","from":"Calculator","action":{"__meta__":{"id":"m2","parent_id":"m1"},"[response]":{"value":3}}} <nil>
	// {"to":"User","from":"Calculator","action":{"__meta__":{"id":"m3","parent_id":"m1"},"[error]":{"type":"permission_denied","error":"\"Calculator.add\" not permitted for \"User\""}}} <nil>
}
