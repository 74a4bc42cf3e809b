package handoff

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

// benchHistory is the history a handoff carries in the benchmark: ten
// messages, about what the support seed's second handoff carries.
func benchHistory() []openai.Message {
	var h []openai.Message
	for i := range 4 {
		h = append(h,
			openai.Message{Role: openai.RoleUser, Name: "User", Content: fmt.Sprintf("This is what the customer says, message %d of the conversation.", i)},
			openai.Message{Role: openai.RoleAssistant, Name: "A", Content: "And this is what the agent answers, in a sentence or two, as support agents do."})
	}
	return append(h,
		openai.Message{Role: openai.RoleAssistant, Name: "A", ToolCalls: []openai.ToolCall{{ID: "call_1", Name: "transfer_to_B", Arguments: "{}"}}},
		openai.Message{Role: openai.RoleTool, ToolCallID: "call_1", Content: "Transferred to B. Adopt persona immediately."})
}

type benchSpace interface {
	Add(context.Context, *agency.Agent) error
	Close(context.Context) error
}

// BenchmarkHandoff measures one handoff beside the model: agent A hands a
// conversation (a new one each time, with a history of ten messages) to
// agent B, and the time runs until B has taken it over and would call its
// model. In "request" A sends B the same Transfer as a plain Request that
// B answers at once: the transport, without the store, the outbox or the
// checks, as one would hand-write a handoff without durability. In
// "memory" and "sqlite" the handoff goes through a Policy: one Apply of
// the conversation, the log entry and the outbox entry (store.NewMemory,
// or a SQLite file), the relay's claim, the Request to B, B's check of the
// conversation's version and its own Apply, its answer, and the relay's
// Sent. Each runs on space.Local and, with a broker, on amqpspace.
func BenchmarkHandoff(b *testing.B) {
	for _, sp := range []string{"local", "amqp"} {
		for _, mode := range []string{"request", "memory", "sqlite"} {
			b.Run(sp+"/"+mode, func(b *testing.B) { benchHandoff(b, sp, mode) })
		}
	}
}

func benchHandoff(b *testing.B, spaceKind, mode string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sp benchSpace = space.NewLocal()
	aID, bID := "A", "B"
	if spaceKind == "amqp" {
		sp = amqptest.NewSpace(b, amqpspace.Config{})
		aID, bID = amqptest.Name("A"), amqptest.Name("B")
	}
	defer sp.Close(context.Background())
	var st store.Store = store.NewMemory()
	if mode == "sqlite" {
		s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		st = s
	}
	taken := make(chan struct{}, 1)
	ev := events{logger: discard()}
	recv := agency.MustNewAgent(bID)
	var check func(context.Context, Transfer) error
	if mode != "request" {
		check = func(ctx context.Context, t Transfer) error { return take(ctx, st, ev, bID, t, nil) }
	}
	if err := accept(recv, check, func(ctx context.Context, t Transfer) error {
		taken <- struct{}{}
		return nil
	}, agency.AccessBySender(map[string]agency.Access{aID: agency.Permitted}, agency.Denied)); err != nil {
		b.Fatal(err)
	}
	send := agency.MustNewAgent(aID)
	for _, a := range []*agency.Agent{recv, send} {
		if err := sp.Add(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
	p, err := NewPolicy(aID, nil, WithStore(st))
	if err != nil {
		b.Fatal(err)
	}
	r := p.newRelay(send)
	p.relay = r
	r.Start()
	defer r.Stop()

	history := benchHistory()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		conv := fmt.Sprintf("c%d", i)
		if mode == "request" {
			tr := Transfer{Conversation: conv, User: "User", Name: "transfer_to_B", Message: "Transferred to B.", Call: "call_1",
				Version: 1, Hops: 1, Path: []string{aID}, History: history}
			if _, err := send.RequestMessage(ctx, &agency.Message{To: bID, Action: Action, Args: tr,
				Meta: map[string]any{metaConversation: conv}}); err != nil {
				b.Fatal(err)
			}
		} else {
			t := &openai.Turn{Conversation: conv, Partner: "User", History: history}
			p.handoff(ctx, t, hand{to: bID, name: "transfer_to_B", message: "Transferred to B.", call: "call_1"})
		}
		<-taken
	}
}
