package human_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A person is an agent others talk to: their say shows the person what
// was said and answers with the person's reply. Here a script plays the
// person; in a program, a human.Terminal or human.Web reaches a real one.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	operator := human.NewScript("Yes, I approve.")
	person, err := human.New("Operator", operator)
	if err != nil {
		log.Fatal(err)
	}
	bot := agency.MustNewAgent("Bot")
	agency.Handle(bot, "say", func(context.Context, human.SayArgs) (string, error) { return "noted", nil })
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range []*agency.Agent{person.Agent(), bot} {
		if err := sp.Add(ctx, a); err != nil {
			log.Fatal(err)
		}
	}
	answer, err := agency.Call[string](ctx, bot, "Operator", "say", human.SayArgs{Content: "May I refund order 42?"})
	if err != nil {
		log.Fatal(err)
	}
	asked := operator.Asked()[0]
	fmt.Printf("the operator was asked by %s: %s\n", asked.From, asked.Text)
	fmt.Println("they answered:", answer)
	// Output:
	// the operator was asked by Bot: May I refund order 42?
	// they answered: Yes, I approve.
}

// A User speaks for a person in one conversation: each of their lines
// goes to the agent that holds the conversation, and every answer is
// shown to them, until they type "exit".
func ExampleUser() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	screen := human.NewScript("hello", "how are you?", "exit")
	user, err := human.NewUser("User", screen, human.StartWith("Echo"))
	if err != nil {
		log.Fatal(err)
	}
	echo := agency.MustNewAgent("Echo")
	agency.Handle(echo, "say", func(_ context.Context, a human.SayArgs) (string, error) {
		return strings.ToUpper(a.Content), nil
	})
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range []*agency.Agent{user.Agent(), echo} {
		if err := sp.Add(ctx, a); err != nil {
			log.Fatal(err)
		}
	}
	if err := user.Run(ctx); err != nil {
		log.Fatal(err)
	}
	for _, l := range screen.Shown() {
		fmt.Printf("%s: %s\n", l.From, l.Text)
	}
	// Output:
	// Echo: HELLO
	// Echo: HOW ARE YOU?
}

// Take hands a whole conversation to a person: they are shown what was
// said, and their answer goes to the user (with the id of the user's
// message it answers, so that a User takes the person as the
// conversation's new holder).
func ExampleAgent_Take() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	operator := human.NewScript("Hello, this is the manager.")
	manager, err := human.New("Manager", operator)
	if err != nil {
		log.Fatal(err)
	}
	user := agency.MustNewAgent("User")
	heard := make(chan string, 1)
	agency.Handle(user, "say", func(ctx context.Context, a human.SayArgs) (string, error) {
		heard <- agency.MessageFrom(ctx).From + ": " + a.Content
		return "shown", nil
	})
	sp := space.NewLocal()
	defer sp.Close(ctx)
	for _, a := range []*agency.Agent{manager.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			log.Fatal(err)
		}
	}
	_, err = manager.Take(ctx, human.Handover{Conversation: "c1", User: "User", History: []human.Line{
		{From: "User", Text: "I want to talk to your manager"},
		{From: "Triage", Text: "One moment, please."},
	}})
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range operator.Shown() {
		fmt.Printf("the manager saw %s: %s\n", l.From, l.Text)
	}
	fmt.Println("the user heard", <-heard)
	// Output:
	// the manager saw User: I want to talk to your manager
	// the manager saw Triage: One moment, please.
	// the user heard Manager: Hello, this is the manager.
}
