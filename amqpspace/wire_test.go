package amqpspace_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
)

// logRecorder is a slog.Handler that passes each record's message on.
type logRecorder struct{ msgs chan string }

func newLogRecorder() *logRecorder { return &logRecorder{msgs: make(chan string, 1000)} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.msgs <- r.Message:
	default:
	}
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// expect waits for a log record containing text.
func (l *logRecorder) expect(t testing.TB, text string) {
	t.Helper()
	l.expectWithin(t, text, wait)
}

// expectWithin waits for a log record containing text, at most d.
func (l *logRecorder) expectWithin(t testing.TB, text string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m := <-l.msgs:
			if strings.Contains(m, text) {
				return
			}
		case <-deadline:
			t.Fatalf("no log record containing %q", text)
		}
	}
}

// probe is a bare AMQP client on the space's exchange: it publishes what it
// likes, and reads what is sent to its own id through a queue bound with it.
type probe struct {
	t        *testing.T
	id       string
	exchange string
	ch       *amqp.Channel
	in       <-chan amqp.Delivery
}

func newProbe(t *testing.T, exchange string) *probe {
	t.Helper()
	ch := bareChannel(t)
	p := &probe{t: t, id: randomName("Probe"), exchange: exchange, ch: ch}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, p.id, exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	if p.in, err = ch.Consume(q.Name, "", true, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

// publish sends body with the routing key and the AMQP properties given.
func (p *probe) publish(key string, body []byte, props amqp.Publishing) {
	p.t.Helper()
	props.Body = body
	if err := p.ch.Publish(p.exchange, key, false, false, props); err != nil {
		p.t.Fatal(err)
	}
}

// request publishes a well-formed call of action with args to the agent
// to, as the probe, with the given message id.
func (p *probe) request(to, id, action string, args any) {
	p.t.Helper()
	raw, err := json.Marshal(map[string]any{
		"to": to, "from": p.id,
		"action": map[string]any{"__meta__": map[string]any{"id": id}, action: args},
	})
	if err != nil {
		p.t.Fatal(err)
	}
	p.publish(to, raw, amqp.Publishing{})
}

// receive returns the next message sent to the probe.
func (p *probe) receive() *agency.Message {
	p.t.Helper()
	select {
	case d := <-p.in:
		m, err := agency.DecodeMessage(d.Body)
		if err != nil {
			p.t.Fatalf("the probe received an undecodable message %s: %v", d.Body, err)
		}
		return m
	case <-time.After(wait):
		p.t.Fatal("the probe received nothing")
		return nil
	}
}

// expectError waits for an [error] of type typ answering parent.
func (p *probe) expectError(parent string, typ agency.ErrorType, mentions string) {
	p.t.Helper()
	m := p.receive()
	var ae *agency.ActionError
	if m.Action != agency.ErrorAction || !errors.As(m.Err(), &ae) || ae.Type != typ || m.ParentID != parent {
		p.t.Fatalf("received %v, want an [error] %s answering %q", m, typ, parent)
	}
	if !strings.Contains(ae.Text, mentions) {
		p.t.Errorf("the error %q does not mention %q", ae.Text, mentions)
	}
}

// expectSum waits for the [response] to an add, answering parent.
func (p *probe) expectSum(parent string, want int) {
	p.t.Helper()
	m := p.receive()
	if m.Action != agency.ResponseAction || m.ParentID != parent {
		p.t.Fatalf("received %v, want a [response] answering %q", m, parent)
	}
	var got int
	if err := json.Unmarshal(m.Args.(json.RawMessage), &got); err != nil || got != want {
		p.t.Fatalf("response %s, want %d", m.Args, want)
	}
}

// Each kind of bad input from the wire is answered with an [error] where
// the sender can be identified, or dropped with a log line, and the agent
// serves the next good message.
func TestBadWireInput(t *testing.T) {
	logs := newLogRecorder()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, MaxMessageSize: 4096, Logger: slog.New(logs)})
	var adds, aliceGot counter
	bob, alice := newAdder("Bob", &adds), newAdder("Alice", &aliceGot)
	addAll(t, sp, bob, alice)
	p := newProbe(t, ex)
	n := 0
	good := func() {
		t.Helper()
		n++
		id := fmt.Sprintf("good-%d", n)
		p.request(bob.ID(), id, "add", addArgs{A: n, B: 1})
		p.expectSum(id, n+1)
	}
	good()

	t.Run("not JSON", func(t *testing.T) {
		p.publish(bob.ID(), []byte("hello, Bob"), amqp.Publishing{})
		logs.expect(t, "dropped a malformed message")
		good()
	})
	t.Run("wrong shape", func(t *testing.T) {
		p.publish(bob.ID(), []byte(`{"to":"`+bob.ID()+`","from":"`+p.id+`","action":{"__meta__":{"id":"shape-1"},"add":[1,2]}}`), amqp.Publishing{})
		p.expectError("shape-1", agency.TypeInvalidArgs, "could not read your message")
		good()
	})
	t.Run("wrong shape without an id", func(t *testing.T) {
		p.publish(bob.ID(), []byte(`{"to":"`+bob.ID()+`","from":"`+p.id+`","action":"add"}`), amqp.Publishing{})
		p.expectError("", agency.TypeInvalidArgs, "could not read your message")
		good()
	})
	t.Run("unknown action", func(t *testing.T) {
		p.request(bob.ID(), "unknown-1", "subtract", addArgs{A: 1, B: 2})
		p.expectError("unknown-1", agency.TypeNotFound, "subtract")
		good()
	})
	t.Run("wrong argument types", func(t *testing.T) {
		p.request(bob.ID(), "types-1", "add", map[string]any{"a": "one", "b": 2})
		p.expectError("types-1", agency.TypeInvalidArgs, "a")
		good()
	})
	t.Run("over the size limit", func(t *testing.T) {
		p.request(bob.ID(), "big-1", "add", map[string]any{"a": 1, "b": 2, "pad": strings.Repeat("x", 5000)})
		logs.expect(t, "over the size limit")
		good()
	})
	t.Run("forged sender", func(t *testing.T) {
		// From names Alice, an agent of the space: the answer would go to
		// her, and Bob would act for someone who never asked.
		raw := fmt.Sprintf(`{"to":%q,"from":%q,"action":{"__meta__":{"id":"forged-1"},"add":{"a":1,"b":1}}}`, bob.ID(), alice.ID())
		p.publish(bob.ID(), []byte(raw), amqp.Publishing{})
		logs.expect(t, "claims to come from an agent of this one")
		good()
	})
	t.Run("sender id that routes to every broadcast queue", func(t *testing.T) {
		// An answer to "__broadcast__" would reach every agent.
		raw := fmt.Sprintf(`{"to":%q,"from":"__broadcast__","action":{"__meta__":{"id":"flood-1"},"add":{"a":1,"b":1}}}`, bob.ID())
		p.publish(bob.ID(), []byte(raw), amqp.Publishing{})
		logs.expect(t, "no agent of this space can have")
		raw = fmt.Sprintf(`{"to":%q,"from":"__broadcast__","action":"add"}`, bob.ID())
		p.publish(bob.ID(), []byte(raw), amqp.Publishing{})
		logs.expect(t, "dropped a malformed message")
		good()
	})
	t.Run("recipient not the queue's", func(t *testing.T) {
		raw := fmt.Sprintf(`{"to":%q,"from":%q,"action":{"__meta__":{"id":"misrouted-1"},"add":{"a":1,"b":1}}}`, alice.ID(), p.id)
		p.publish(bob.ID(), []byte(raw), amqp.Publishing{})
		logs.expect(t, "recipient does not match its queue")
		good()
	})
	t.Run("a reply to nothing", func(t *testing.T) {
		raw := fmt.Sprintf(`{"to":%q,"from":%q,"action":{"__meta__":{"id":"r-1","parent_id":"nothing"},"[response]":{"value":3}}}`, bob.ID(), p.id)
		p.publish(bob.ID(), []byte(raw), amqp.Publishing{})
		good()
	})

	if got, want := adds.calls(), n; got != want {
		t.Errorf("Bob's add ran %d times, want %d (only the good calls)", got, want)
	}
	if got := aliceGot.calls(); got != 0 {
		t.Errorf("Alice's add ran %d times, want 0", got)
	}
}

// Ids that could bind a wildcard, or share another agent's queues, or read
// every broadcast as direct mail, never get into the space.
func TestUnsafeIDsRefused(t *testing.T) {
	for _, id := range []string{"*", "a*", "team.#", "two words", "tab\there", "amq.gen-1"} {
		if _, err := agency.NewAgent(id); !errors.Is(err, agency.ErrInvalidID) {
			t.Errorf("NewAgent(%q): %v, want ErrInvalidID", id, err)
		}
	}
	sp := newSpace(t, amqpspace.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, id := range []string{"__broadcast__", "__leaving.Bob", "__x", "Bob-broadcast", strings.Repeat("x", 246)} {
		a, err := agency.NewAgent(id)
		if err != nil {
			t.Fatalf("NewAgent(%q): %v", id, err)
		}
		if err := sp.Add(ctx, a); !errors.Is(err, agency.ErrInvalidID) {
			t.Errorf("Add(%.20q): %v, want ErrInvalidID", id, err)
		}
	}
	a, err := agency.NewAgent(strings.Repeat("x", 245))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Add(ctx, a); err != nil {
		t.Errorf("Add of a 245-byte id: %v", err)
	}
	// Published, a message to the broadcast routing key would reach
	// every agent: no agent has that id.
	if _, err := a.Request(ctx, "__broadcast__", "help", nil); !errors.Is(err, agency.ErrNoRecipient) {
		t.Errorf("Request to __broadcast__: %v, want ErrNoRecipient", err)
	}
}

// An agent never receives a point-to-point message addressed to another,
// whatever their ids look like to a topic exchange.
func TestNoEavesdropping(t *testing.T) {
	sp := newSpace(t, amqpspace.Config{})
	base := randomName("Bob")
	type seen struct {
		mu  sync.Mutex
		ids []string
	}
	got := map[string]*seen{}
	marker := make(chan string, 10)
	var agents []*agency.Agent
	// Ids that share Bob's prefix, extend it by a topic word, or sit
	// inside it.
	for _, id := range []string{base, base + ".inbox", base + "by", "Eve." + base, "Eve"} {
		if id == "Eve" {
			id = randomName("Eve")
		}
		a, err := agency.NewAgent(id)
		if err != nil {
			t.Fatal(err)
		}
		s := &seen{}
		got[id] = s
		agency.Handle(a, "note", func(ctx context.Context, args struct {
			Text string `json:"text"`
		}) (bool, error) {
			s.mu.Lock()
			s.ids = append(s.ids, args.Text)
			s.mu.Unlock()
			if args.Text == "marker" {
				marker <- agency.AgentFrom(ctx).ID()
			}
			return true, nil
		})
		agents = append(agents, a)
	}
	sender, err := agency.NewAgent(randomName("Sender"))
	if err != nil {
		t.Fatal(err)
	}
	agents = append(agents, sender)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, a := range agents {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	type text struct {
		Text string `json:"text"`
	}
	for i := range 20 {
		if _, err := sender.Send(ctx, base, "note", text{Text: fmt.Sprintf("for Bob %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Each agent gets a marker after Bob's mail: once all markers are in,
	// anything misrouted would have arrived.
	for id := range got {
		if _, err := sender.Send(ctx, id, "note", text{Text: "marker"}); err != nil {
			t.Fatal(err)
		}
	}
	for range got {
		select {
		case <-marker:
		case <-ctx.Done():
			t.Fatal("not every marker arrived")
		}
	}
	for id, s := range got {
		s.mu.Lock()
		n := len(s.ids)
		s.mu.Unlock()
		want := 1
		if id == base {
			want = 21
		}
		if n != want {
			t.Errorf("%s received %d messages, want %d: %v", id, n, want, s.ids)
		}
	}
}

// A second space on the exchange, as another process would be, cannot add
// an id that is live in the first; once the first removes it, it can.
func TestIDUniqueAcrossSpaces(t *testing.T) {
	ex := testExchange(t)
	first := newSpace(t, amqpspace.Config{Exchange: ex})
	second := newSpace(t, amqpspace.Config{Exchange: ex})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	id := randomName("Unique")
	a1, _ := agency.NewAgent(id)
	a2, _ := agency.NewAgent(id)
	if err := first.Add(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if err := second.Add(ctx, a2); !errors.Is(err, space.ErrAgentExists) {
		t.Fatalf("Add of an id live in another space: %v, want ErrAgentExists", err)
	}
	if err := first.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := second.Add(ctx, a2); err != nil {
		t.Fatalf("Add after the other space removed the id: %v", err)
	}
}

// A queue deleted from outside cancels its consumer: the space starts over
// and declares it again, rather than keep an agent that hears nothing on
// it.
func TestQueueDeletedFromOutside(t *testing.T) {
	logs := newLogRecorder()
	sp := newSpace(t, amqpspace.Config{Logger: slog.New(logs)})
	echo, caller := newEcho(), agency.MustNewAgent(randomName("Caller"))
	addAll(t, sp, echo, caller)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ch := bareChannel(t)
	if _, err := ch.QueueDelete(echo.ID(), false, false, false); err != nil {
		t.Fatal(err)
	}
	logs.expect(t, "lost the broker")
	logs.expect(t, "reconnected")
	got, err := agency.Call[string](ctx, caller, echo.ID(), "echo", map[string]string{"text": "again"})
	if err != nil || got != "again" {
		t.Errorf("echo after its queue was deleted and declared again: %q, %v", got, err)
	}
}

// Queue names belong to the vhost, not to the exchange: a queue that is
// also bound to another exchange (left over from a space there) lets
// nothing from that exchange reach the agent.
func TestOtherExchangeIgnored(t *testing.T) {
	logs := newLogRecorder()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Logger: slog.New(logs)})
	var adds counter
	bob := newAdder("Bob", &adds)
	addAll(t, sp, bob)
	elsewhere := testExchange(t)
	ch := bareChannel(t)
	if err := ch.ExchangeDeclare(elsewhere, "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, elsewhere)
	if err := p.ch.QueueBind(bob.ID(), bob.ID(), elsewhere, false, nil); err != nil {
		t.Fatal(err)
	}
	p.request(bob.ID(), "other-1", "add", addArgs{A: 1, B: 1})
	logs.expect(t, "did not come through the space's exchange")
	// Nor straight to the queue by its name, through the default exchange.
	raw := fmt.Sprintf(`{"to":%q,"from":%q,"action":{"__meta__":{"id":"direct-1"},"add":{"a":1,"b":1}}}`, bob.ID(), p.id)
	if err := p.ch.Publish("", bob.ID(), false, false, amqp.Publishing{Body: []byte(raw)}); err != nil {
		t.Fatal(err)
	}
	logs.expect(t, "did not come through the space's exchange")

	home := newProbe(t, ex)
	home.request(bob.ID(), "home-1", "add", addArgs{A: 2, B: 2})
	home.expectSum("home-1", 4)
	if n := adds.calls(); n != 1 {
		t.Errorf("add ran %d times, want 1 (only the message through the space's exchange)", n)
	}
}

// An answer is routed through the space's exchange only: one to an id no
// agent has never lands in a queue that merely has that name. The test
// leaves no queue behind.
func TestAnswersStayInTheSpace(t *testing.T) {
	foreign := randomName("orders")
	t.Run("answers", func(t *testing.T) { answersStayInTheSpace(t, foreign) })
	ch := bareChannel(t)
	_, err := ch.QueueDeclarePassive(foreign, false, false, false, false, nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		t.Errorf("queue %s is still on the broker after the test: %v", foreign, err)
	}
}

func answersStayInTheSpace(t *testing.T, foreign string) {
	sp := newSpace(t, amqpspace.Config{})
	a := agency.MustNewAgent(randomName("Answerer"))
	addAll(t, sp, a)
	ch := bareChannel(t)
	// Exclusive: the broker deletes it with the connection, whatever
	// becomes of the test (auto-delete would wait for a consumer that
	// never comes, and keep it).
	if _, err := ch.QueueDeclare(foreign, false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ch.QueueDelete(foreign, false, false, false) })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, action := range []string{agency.ResponseAction, agency.ErrorAction} {
		m := &agency.Message{To: foreign, ParentID: "x", Action: action, Args: "stray"}
		if action == agency.ErrorAction {
			m.Args = &agency.ActionError{Type: agency.TypeActionFailed, Text: "stray"}
		}
		if _, err := a.SendMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	info, err := ch.QueueDeclarePassive(foreign, false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != 0 {
		t.Errorf("%d answers landed in a queue outside the space", info.Messages)
	}
}
