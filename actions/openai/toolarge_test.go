package openai

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

// An answer too large for the space's message size limit ends its turn
// with an error: the caller of say gets response_too_large at once, and
// the user hears a say that says so, never silence. The next turn goes on
// as usual. In process and over RabbitMQ.
func TestAnswerTooLarge(t *testing.T) {
	const limit = 16 << 10
	t.Run("Local", func(t *testing.T) {
		sp := space.NewLocal(space.MaxMessageSize(limit))
		t.Cleanup(func() {
			if err := sp.Close(context.Background()); err != nil {
				t.Errorf("closing the space: %v", err)
			}
		})
		testAnswerTooLarge(t, sp, limit, "User", "Assistant")
	})
	t.Run("AMQP", func(t *testing.T) {
		sp := amqptest.NewSpace(t, amqpspace.Config{MaxMessageSize: limit})
		testAnswerTooLarge(t, sp, limit, amqptest.Name("User"), amqptest.Name("Assistant"))
	})
}

func testAnswerTooLarge(t *testing.T, sp space.Space, limit int, userID, asstID string) {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	srv := openaitest.NewServer(t,
		openaitest.Step{Text: strings.Repeat("word ", limit/4)}, // 20 KiB of text
		openaitest.Step{Text: "A short answer."},
	)
	heard := make(chan string, 4)
	user := agency.MustNewAgent(userID)
	agency.Handle(user, "say", func(ctx context.Context, args SayArgs) (string, error) {
		heard <- args.Content
		return "heard", nil
	})
	llm, err := New(asstID, APIKey("test-key"), BaseURL(srv.URL), HTTPClient(srv.Client()), CallTimeout(safety))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{user, llm.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	heardNext := func() string {
		t.Helper()
		select {
		case s := <-heard:
			return s
		case <-ctx.Done():
			t.Fatal("the user heard nothing")
			return ""
		}
	}

	_, err = agency.Call[string](ctx, user, asstID, "say", SayArgs{Content: "Tell me everything."})
	if !errors.Is(err, agency.ErrResponseTooLarge) {
		t.Errorf("say with an answer over the limit: %v, want an error matching agency.ErrResponseTooLarge", err)
	}
	if said := heardNext(); !strings.Contains(said, "too large") {
		t.Errorf("the user heard %.80q, want a say that the answer was too large", said)
	}

	got, err := agency.Call[string](ctx, user, asstID, "say", SayArgs{Content: "In short?"})
	if err != nil || got != "A short answer." {
		t.Fatalf("the next say: %q, %v", got, err)
	}
	if said := heardNext(); said != "A short answer." {
		t.Errorf("the user heard %q, want the short answer", said)
	}
}
