package amqpspace_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
	"github.com/seed72275b23/agency-go/space/spacetest"
)

// Go↔Go is lossless in the Python-compatible mode: the whole conformance
// suite passes with every message in operand/agency's shape.
func TestConformanceInterop(t *testing.T) {
	t.Parallel()
	spacetest.Run(t, func(t *testing.T) space.Space {
		return newSpace(t, amqpspace.Config{Interop: amqpspace.InteropOperandAgency})
	}, spacetest.SizeLimited(64<<10, func(t *testing.T) space.Space {
		return newSpace(t, amqpspace.Config{Interop: amqpspace.InteropOperandAgency, MaxMessageSize: 64 << 10})
	}), spacetest.OtherDialects())
}

// kombuProperties are the AMQP properties of a message operand/agency
// 1.6 publishes (kombu's Producer.publish of a str body).
var kombuProperties = amqp.Publishing{ContentType: "text/plain", ContentEncoding: "utf-8", Headers: amqp.Table{}, DeliveryMode: 2}

// pyMessage is an operand/agency message as json.dumps writes it.
func pyMessage(meta, from, to, action string) []byte {
	return fmt.Appendf(nil, `{"meta": %s, "from": %q, "to": %q, "action": %s}`, meta, from, to, action)
}

// pyShape is a message in operand/agency's shape, as a test reads it.
type pyShape struct {
	Meta   map[string]any `json:"meta"`
	From   string         `json:"from"`
	To     string         `json:"to"`
	Action struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"action"`
}

// next returns the next delivery to the probe.
func (p *probe) next() amqp.Delivery {
	p.t.Helper()
	select {
	case d := <-p.in:
		return d
	case <-time.After(wait):
		p.t.Fatal("the probe received nothing")
		return amqp.Delivery{}
	}
}

// nextPython returns the next delivery to the probe, which must be a
// text/plain message in operand/agency's shape.
func (p *probe) nextPython() pyShape {
	p.t.Helper()
	d := p.next()
	checkTextPlain(p.t, d)
	var m pyShape
	dec := json.NewDecoder(strings.NewReader(string(d.Body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || m.Meta["id"] == nil || m.Action.Name == "" {
		p.t.Fatalf("not in operand/agency's shape: %s (%v)", d.Body, err)
	}
	return m
}

func checkTextPlain(t *testing.T, d amqp.Delivery) {
	t.Helper()
	if d.ContentType != "text/plain" || d.ContentEncoding != "utf-8" {
		t.Errorf("published with content type %q, encoding %q; want text/plain, utf-8 (operand/agency's receiver dies on application/json)", d.ContentType, d.ContentEncoding)
	}
}

// listen binds the probe's queue for broadcasts too.
func (p *probe) listen() {
	p.t.Helper()
	var q string
	// The probe's queue is the one it consumes; find it by binding anew.
	d, err := p.ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	q = d.Name
	if err := p.ch.QueueBind(q, "__broadcast__", p.exchange, false, nil); err != nil {
		p.t.Fatal(err)
	}
	in, err := p.ch.Consume(q, "", true, true, false, false, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	merged := make(chan amqp.Delivery)
	// A delivery that comes after the test stopped reading (a late
	// broadcast) is dropped when the test ends, not held for ever.
	done := make(chan struct{})
	p.t.Cleanup(func() { close(done) })
	go func(a, b <-chan amqp.Delivery) {
		for a != nil || b != nil {
			var d amqp.Delivery
			var ok bool
			select {
			case d, ok = <-a:
				if !ok {
					a = nil
					continue
				}
			case d, ok = <-b:
				if !ok {
					b = nil
					continue
				}
			case <-done:
				return
			}
			select {
			case merged <- d:
			case <-done:
				return
			}
		}
	}(p.in, in)
	p.in = merged
}

// answerOf checks that m answers parent from sender and returns its args.
func answerOf(t *testing.T, m pyShape, name, parent, sender string) json.RawMessage {
	t.Helper()
	if m.Action.Name != name || m.Meta["parent_id"] != parent || m.From != sender {
		t.Fatalf("got %s from %s answering %v, want %s from %s answering %s", m.Action.Name, m.From, m.Meta["parent_id"], name, sender, parent)
	}
	return m.Action.Args
}

// sameJSON fails t unless got and want are the same JSON value.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// record is one log record, with its attributes.
type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// records is a slog.Handler that keeps every record.
type records struct {
	mu   sync.Mutex
	all  []record
	more chan struct{}
}

func newRecords() *records { return &records{more: make(chan struct{}, 1)} }

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	r.all = append(r.all, record{rec.Level, rec.Message, attrs})
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// expect waits for a record whose message contains text and whose
// attribute "from" is from, and removes it.
func (r *records) expect(t *testing.T, text, from string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		r.mu.Lock()
		for i, rec := range r.all {
			if strings.Contains(rec.msg, text) && rec.attrs["from"] == from {
				r.all = slices.Delete(r.all, i, i+1)
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("no log record %q naming the sender %s; records: %v", text, from, r.warnings())
		}
	}
}

// warnings returns the records at Warn or above.
func (r *records) warnings() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var w []record
	for _, rec := range r.all {
		if rec.level >= slog.LevelWarn {
			w = append(w, rec)
		}
	}
	return w
}

// The Python-compatible mode on the wire, with no Python: a bare client
// plays an operand/agency agent, publishing messages exactly as
// operand/agency 1.6 does (json.dumps, kombu's properties) and answering
// as it would.
func TestInteropWire(t *testing.T) {
	logs := newRecords()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: amqpspace.InteropOperandAgency, Logger: slog.New(logs)})
	var adds counter
	calc, other := newAdder("Calc", &adds), newAdder("Other", &counter{})
	asker := agency.MustNewAgent(randomName("Asker"))
	addAll(t, sp, calc, other, asker)
	py := newProbe(t, ex)
	publish := func(to string, body []byte) {
		t.Helper()
		key := to
		if to == "*" {
			key = "__broadcast__"
		}
		py.publish(key, body, kombuProperties)
	}
	request := func(id, action string) {
		t.Helper()
		publish(calc.ID(), pyMessage(fmt.Sprintf(`{"id": %q}`, id), py.id, calc.ID(), action))
	}
	good := func(id string) {
		t.Helper()
		request(id, `{"name": "add", "args": {"a": 1, "b": 2}}`)
		sameJSON(t, answerOf(t, py.nextPython(), "[response]", id, calc.ID()), `{"value": 3}`)
	}
	addHelp := `{"args": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "returns": {"type": "integer"}}`

	t.Run("request", func(t *testing.T) { good("py-1") })
	t.Run("help without args", func(t *testing.T) {
		request("py-help-1", `{"name": "help"}`)
		sameJSON(t, answerOf(t, py.nextPython(), "[response]", "py-help-1", calc.ID()), `{"value": {"add": `+addHelp+`}}`)
	})
	t.Run("help for one action", func(t *testing.T) {
		request("py-help-2", `{"name": "help", "args": {"action_name": "add"}}`)
		sameJSON(t, answerOf(t, py.nextPython(), "[response]", "py-help-2", calc.ID()), `{"value": {"add": `+addHelp+`}}`)
		request("py-help-3", `{"name": "help", "args": {"action_name": "nope"}}`)
		args := answerOf(t, py.nextPython(), "[error]", "py-help-3", calc.ID())
		var e struct{ Type, Error string }
		if json.Unmarshal(args, &e) != nil || e.Type != "not_found" || !strings.Contains(e.Error, "nope") {
			t.Errorf("help for an unknown action: %s", args)
		}
	})
	t.Run("errors", func(t *testing.T) {
		request("py-err-1", `{"name": "subtract", "args": {"a": 1, "b": 2}}`)
		var e struct{ Type, Error string }
		args := answerOf(t, py.nextPython(), "[error]", "py-err-1", calc.ID())
		if json.Unmarshal(args, &e) != nil || e.Type != "not_found" || !strings.Contains(e.Error, `"subtract"`) {
			t.Errorf("unknown action: %s", args)
		}
		request("py-err-2", `{"name": "add", "args": {"a": "one", "b": 2}}`)
		args = answerOf(t, py.nextPython(), "[error]", "py-err-2", calc.ID())
		if json.Unmarshal(args, &e) != nil || e.Type != "invalid_args" || !strings.Contains(e.Error, "a") {
			t.Errorf("invalid args: %s", args)
		}
		// Unreadable: answered in operand/agency's shape, by its meta.id.
		request("py-err-3", `{"args": {"a": 1}}`)
		args = answerOf(t, py.nextPython(), "[error]", "py-err-3", calc.ID())
		if json.Unmarshal(args, &e) != nil || e.Type != "invalid_args" || !strings.Contains(e.Error, "could not read your message") {
			t.Errorf("unreadable request: %s", args)
		}
	})
	t.Run("broadcast help", func(t *testing.T) {
		publish("*", pyMessage(`{"id": "py-bhelp"}`, py.id, "*", `{"name": "help"}`))
		want := map[string]string{
			calc.ID():  `{"value": {"add": ` + addHelp + `}}`,
			other.ID(): `{"value": {"add": ` + addHelp + `}}`,
			asker.ID(): `{"value": {}}`,
		}
		for range len(want) {
			m := py.nextPython()
			w, ok := want[m.From]
			if !ok {
				t.Fatalf("unexpected answer from %s", m.From)
			}
			delete(want, m.From)
			sameJSON(t, answerOf(t, m, "[response]", "py-bhelp", m.From), w)
		}
	})
	t.Run("never answered", func(t *testing.T) {
		// A broadcast of an action no one has, answers to nothing, and
		// unreadable broadcasts and answers: the next answer the probe
		// gets is the good request's.
		publish("*", pyMessage(`{"id": "py-n1"}`, py.id, "*", `{"name": "nobody_has_this"}`))
		publish(calc.ID(), pyMessage(`{"id": "py-n2", "parent_id": "nothing"}`, py.id, calc.ID(), `{"name": "[response]", "args": {"value": 1}}`))
		publish(calc.ID(), pyMessage(`{"id": "py-n3", "parent_id": "nothing"}`, py.id, calc.ID(), `{"name": "[error]", "args": {"error": "ValueError: x"}}`))
		publish(calc.ID(), pyMessage(`{"id": "py-n4", "parent_id": "nothing"}`, py.id, calc.ID(), `{"name": "[error]", "args": [1]}`))
		logs.expect(t, "dropped an unreadable answer", py.id)
		publish("*", pyMessage(`{"id": "py-n5"}`, py.id, "*", `{"args": {}}`))
		for range 3 {
			logs.expect(t, "dropped an unreadable broadcast", py.id)
		}
		good("py-n6")
	})
	t.Run("Go calls Python", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		type result struct {
			v   string
			err error
		}
		done := make(chan result, 1)
		call := func(action string, args any) {
			go func() {
				v, err := agency.Call[string](ctx, asker, py.id, action, args)
				done <- result{v, err}
			}()
		}
		call("shout", map[string]string{"text": "hi"})
		m := py.nextPython()
		if m.From != asker.ID() || m.To != py.id || m.Action.Name != "shout" || m.Meta["deadline"] == nil {
			t.Errorf("the request as operand/agency sees it: %+v", m)
		}
		sameJSON(t, m.Action.Args, `{"text": "hi"}`)
		publish(asker.ID(), pyMessage(fmt.Sprintf(`{"parent_id": %q, "id": "py-r1"}`, m.Meta["id"]), py.id, asker.ID(), `{"name": "[response]", "args": {"value": "HI"}}`))
		if r := <-done; r.err != nil || r.v != "HI" {
			t.Errorf("Call = %q, %v; want HI", r.v, r.err)
		}

		for text, want := range map[string]error{
			`AttributeError: \"nope\" not found on \"` + py.id + `\"`:             agency.ErrNotFound,
			`PermissionError: \"` + py.id + `.secret\" not permitted`:             agency.ErrPermissionDenied,
			`TypeError: PyAgent.shout() got an unexpected keyword argument 'txt'`: agency.ErrInvalidArgs,
			`ValueError: boom`: agency.ErrActionFailed,
		} {
			call("shout", map[string]string{"text": "hi"})
			m := py.nextPython()
			publish(asker.ID(), pyMessage(fmt.Sprintf(`{"parent_id": %q, "id": "py-r2"}`, m.Meta["id"]), py.id, asker.ID(), `{"name": "[error]", "args": {"error": "`+text+`"}}`))
			r := <-done
			var ae *agency.ActionError
			if !errors.Is(r.err, want) || !errors.As(r.err, &ae) || ae.Text != strings.ReplaceAll(text, `\"`, `"`) {
				t.Errorf("the error %s reached the caller as %v, want %v with the text kept", text, r.err, want)
			}
		}
	})
	t.Run("Go help to Python", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		done := make(chan json.RawMessage, 1)
		go func() {
			v, err := agency.Call[json.RawMessage](ctx, asker, py.id, "help", nil)
			if err != nil {
				t.Error(err)
			}
			done <- v
		}()
		m := py.nextPython()
		if m.Action.Name != "help" {
			t.Fatalf("got %+v, want help", m)
		}
		help := `{"shout": {"description": "Shouts the text.", "args": {"text": {"type": "string", "description": "what to shout"}}, "returns": {"type": "string", "description": "the text in capitals"}}}`
		publish(asker.ID(), pyMessage(fmt.Sprintf(`{"parent_id": %q, "id": "py-h"}`, m.Meta["id"]), py.id, asker.ID(), `{"name": "[response]", "args": {"value": `+help+`}}`))
		sameJSON(t, <-done, help)
	})
	t.Run("answers Go asked none for", func(t *testing.T) {
		// operand/agency answers even a message sent with no_reply; the
		// asker, with no hooks for answers, drops it without a word.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		before := len(logs.warnings())
		if _, err := asker.Send(ctx, py.id, "shout", map[string]string{"text": "hi"}); err != nil {
			t.Fatal(err)
		}
		m := py.nextPython()
		if m.Meta["no_reply"] != true {
			t.Errorf("a send from an agent without hooks: meta %v, want no_reply", m.Meta)
		}
		publish(asker.ID(), pyMessage(fmt.Sprintf(`{"parent_id": %q, "id": "py-q1"}`, m.Meta["id"]), py.id, asker.ID(), `{"name": "[response]", "args": {"value": "HI"}}`))
		publish(asker.ID(), pyMessage(fmt.Sprintf(`{"parent_id": %q, "id": "py-q2"}`, m.Meta["id"]), py.id, asker.ID(), `{"name": "[error]", "args": {"error": "ValueError: late"}}`))
		// The asker is still served, in order, after those two.
		go func() {
			m := py.nextPython()
			publish(asker.ID(), pyMessage(fmt.Sprintf(`{"parent_id": %q, "id": "py-q3"}`, m.Meta["id"]), py.id, asker.ID(), `{"name": "[response]", "args": {"value": "again"}}`))
		}()
		if v, err := agency.Call[string](ctx, asker, py.id, "shout", map[string]string{"text": "again"}); err != nil || v != "again" {
			t.Errorf("Call after the unwanted answers: %q, %v", v, err)
		}
		if w := logs.warnings(); len(w) != before {
			t.Errorf("unwanted answers were logged: %v", w[before:])
		}
	})
	if n := adds.calls(); n != 2 {
		t.Errorf("add ran %d times, want 2 (the good requests)", n)
	}
}

// Never harm, with the mode off: every message goes out as text/plain in
// UTF-8, and no operand/agency message, unreadable broadcast or answer
// of either shape is answered; each is dropped with one log line naming
// its sender.
func TestNeverHarm(t *testing.T) {
	logs := newRecords()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Logger: slog.New(logs)})
	var adds counter
	calc := newAdder("Calc", &adds)
	addAll(t, sp, calc)
	p := newProbe(t, ex)
	p.listen()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	t.Run("Go traffic is text/plain", func(t *testing.T) {
		for _, to := range []string{p.id, agency.Broadcast} {
			if _, err := calc.Send(ctx, to, "note", map[string]string{"text": "hi"}); err != nil {
				t.Fatal(err)
			}
			d := p.next()
			checkTextPlain(t, d)
			if m, err := agency.DecodeMessage(d.Body); err != nil || m.Action != "note" {
				t.Errorf("not in this library's shape: %s (%v)", d.Body, err)
			}
		}
	})
	t.Run("nothing harmful is answered", func(t *testing.T) {
		pub := func(key string, body []byte) { p.publish(key, body, kombuProperties) }
		pub(calc.ID(), pyMessage(`{"id": "h-1"}`, p.id, calc.ID(), `{"name": "add", "args": {"a": 1, "b": 2}}`))
		logs.expect(t, "dropped an operand/agency (Python) message", p.id)
		pub("__broadcast__", pyMessage(`{"id": "h-2"}`, p.id, "*", `{"name": "help"}`))
		logs.expect(t, "dropped an operand/agency (Python) message", p.id)
		pub(calc.ID(), pyMessage(`{"id": "h-3", "parent_id": "x"}`, p.id, calc.ID(), `{"name": "[response]", "args": {"value": 3}}`))
		logs.expect(t, "dropped an operand/agency (Python) message", p.id)
		pub(calc.ID(), pyMessage(`{"id": "h-4", "parent_id": "x"}`, p.id, calc.ID(), `{"name": "[error]", "args": {"error": "ValueError: x"}}`))
		logs.expect(t, "dropped an operand/agency (Python) message", p.id)
		pub("__broadcast__", fmt.Appendf(nil, `{"to":"*","from":%q,"action":{"__meta__":{"id":"h-5"},"add":[1,2]}}`, p.id))
		logs.expect(t, "dropped an unreadable broadcast", p.id)
		pub(calc.ID(), fmt.Appendf(nil, `{"to":%q,"from":%q,"action":{"__meta__":{"id":"h-6","parent_id":"x"},"[error]":{"error":"no type"}}}`, calc.ID(), p.id))
		logs.expect(t, "dropped an unreadable answer", p.id)
		// The next thing the probe gets, besides its own broadcasts, is
		// the answer to this.
		p.request(calc.ID(), "h-7", "add", addArgs{A: 2, B: 2})
		d := p.next()
		for peekFrom(d.Body) == p.id {
			d = p.next()
		}
		checkTextPlain(t, d)
		m, err := agency.DecodeMessage(d.Body)
		if err != nil || m.ParentID != "h-7" {
			t.Fatalf("the probe got %s (%v), want the answer to h-7", d.Body, err)
		}
		if n := adds.calls(); n != 1 {
			t.Errorf("add ran %d times, want 1", n)
		}
	})
}

// peekFrom returns the sender a message body names, in either shape.
func peekFrom(body []byte) string {
	var m struct {
		From string `json:"from"`
	}
	_ = json.Unmarshal(body, &m)
	return m.From
}

// ConfigFromEnv reads AMQP_INTEROP; Config.Interop takes one dialect.
func TestInteropConfig(t *testing.T) {
	t.Setenv("AMQP_URL", "")
	t.Setenv("AMQP_INTEROP", "operand-agency")
	cfg, err := amqpspace.ConfigFromEnv()
	if err != nil || cfg.Interop != amqpspace.InteropOperandAgency {
		t.Errorf("AMQP_INTEROP=operand-agency: %+v, %v", cfg.Interop, err)
	}
	t.Setenv("AMQP_URL", "amqp://guest:guest@localhost:5672/")
	if cfg, err := amqpspace.ConfigFromEnv(); err != nil || cfg.Interop != amqpspace.InteropOperandAgency {
		t.Errorf("with AMQP_URL: %+v, %v", cfg.Interop, err)
	}
	t.Setenv("AMQP_INTEROP", "")
	if cfg, err := amqpspace.ConfigFromEnv(); err != nil || cfg.Interop != "" {
		t.Errorf("unset: %+v, %v", cfg.Interop, err)
	}
	t.Setenv("AMQP_INTEROP", "python")
	if _, err := amqpspace.ConfigFromEnv(); !errors.Is(err, amqpspace.ErrInvalidConfig) || !strings.Contains(err.Error(), "operand-agency") {
		t.Errorf("AMQP_INTEROP=python: %v, want ErrInvalidConfig naming operand-agency", err)
	}
	if _, err := amqpspace.New(context.Background(), amqpspace.Config{Interop: "python"}); !errors.Is(err, amqpspace.ErrInvalidConfig) {
		t.Errorf("New with Interop python: %v, want ErrInvalidConfig", err)
	}
}

// pyAgents starts a Python process of operand/agency agents on the
// exchange and adds one agent per id.
func pyAgents(t *testing.T, exchange string, ids ...string) *amqptest.Python {
	t.Helper()
	py := amqptest.StartPython(t, exchange)
	for _, id := range ids {
		py.Add(id)
	}
	return py
}

// The issue this all began with: one message published as
// application/json stops an operand/agency agent's receiving thread for
// good. (This is why the space publishes text/plain.)
func TestPythonReceiverDiesOnJSONContentType(t *testing.T) {
	t.Parallel()
	ex := testExchange(t)
	pyID := randomName("Py")
	py := pyAgents(t, ex, pyID)
	if alive, err := py.Alive(pyID); !alive {
		t.Fatalf("the receiver is not running to begin with: %s", err)
	}
	ch := bareChannel(t)
	body := pyMessage(`{"id": "j-1"}`, "Someone", pyID, `{"name": "note", "args": {"text": "hi"}}`)
	if err := ch.Publish(ex, pyID, false, false, amqp.Publishing{ContentType: "application/json", Body: body}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		alive, err := py.Alive(pyID)
		if !alive {
			t.Logf("the receiver ended: %s", err)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the receiver survived an application/json message: the reason for publishing text/plain is gone")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A Python agent's receiver survives Go traffic of every kind, in either
// mode: sends, broadcasts, requests, responses and errors.
func TestPythonSurvivesGoTraffic(t *testing.T) {
	t.Parallel()
	for _, mode := range []amqpspace.Interop{"", amqpspace.InteropOperandAgency} {
		t.Run("mode="+string(mode), func(t *testing.T) {
			t.Parallel() // each mode on an exchange and Python agents of its own
			ex := testExchange(t)
			sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: mode})
			pyID, pyOther := randomName("Py"), randomName("PyOther")
			py := pyAgents(t, ex, pyID, pyOther)
			gv := &valueCatcher{values: make(chan *agency.Message, 16)}
			goAgent := agency.MustNewAgent(randomName("Go"), agency.Hooks(gv))
			agency.Handle(goAgent, "echo", func(_ context.Context, a echoArgs) (string, error) { return a.Text, nil })
			addAll(t, sp, goAgent)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()

			// Sends, and broadcasts of an action Python has and one it has not.
			for _, to := range []string{pyID, agency.Broadcast} {
				for _, action := range []string{"note", "help", "nobody_has_this"} {
					if _, err := goAgent.Send(ctx, to, action, map[string]string{"text": "from Go to " + to}); err != nil {
						t.Fatal(err)
					}
				}
			}
			// A request, answered in Python's shape.
			short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
			v, err := agency.Call[string](short, goAgent, pyID, "shout", map[string]string{"text": "hi"})
			cancelShort()
			if mode == "" {
				if !errors.Is(err, agency.ErrTimeout) {
					t.Errorf("a request without the mode: %q, %v; want a timeout (Python cannot read it)", v, err)
				}
			} else if err != nil || v != "HI" {
				t.Errorf("a request in the mode: %q, %v; want HI", v, err)
			}
			// Stray responses and errors.
			for _, m := range []*agency.Message{
				{To: pyID, ParentID: "nothing", Action: agency.ResponseAction, Args: 1},
				{To: pyID, ParentID: "nothing", Action: agency.ErrorAction, Args: &agency.ActionError{Type: agency.TypeActionFailed, Text: "stray"}},
			} {
				if _, err := goAgent.SendMessage(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			// Python's own requests to Go: answered in the mode, dropped
			// without it.
			val, errText, class := py.Request(pyID, goAgent.ID(), "echo", map[string]string{"text": "hello"}, 2*time.Second)
			if mode == "" {
				if class != "TimeoutError" {
					t.Errorf("Python got %s %s %s from Go without the mode, want a TimeoutError", val, class, errText)
				}
			} else if string(val) != `"hello"` {
				t.Errorf("Python's request in the mode: %s, %s", val, errText)
			}
			py.Send(pyID, goAgent.ID(), "nobody_has_this", nil)
			py.Send(pyID, "*", "help", nil)

			// Still alive, and still serving: another Python agent's
			// request gets its answer.
			if alive, e := py.Alive(pyID); !alive {
				t.Fatalf("the Python agent's receiver died: %s", e)
			}
			val, errText, _ = py.Request(pyOther, pyID, "shout", map[string]string{"text": "still there"}, 5*time.Second)
			if string(val) != `"STILL THERE"` {
				t.Errorf("the Python agent after Go's traffic: %s, %s", val, errText)
			}
			if mode != "" {
				// It understood what Go sent it: the direct note and the
				// broadcast one (taken on threads of their own, in any
				// order).
				want := []string{"from Go to *", "from Go to " + pyID}
				var notes []string
				for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if notes = py.Notes(pyID); len(notes) >= len(want) {
						break
					}
				}
				slices.Sort(notes)
				if !slices.Equal(notes, want) {
					t.Errorf("the Python agent's notes: %q, want %q", notes, want)
				}
			}
		})
	}
}

// valueCatcher is a hooks value that takes answers to sends.
type valueCatcher struct{ values chan *agency.Message }

func (v *valueCatcher) HandleActionValue(_ context.Context, m *agency.Message) { v.take(m) }
func (v *valueCatcher) HandleActionError(_ context.Context, m *agency.Message, _ *agency.ActionError) {
	v.take(m)
}

func (v *valueCatcher) take(m *agency.Message) {
	select {
	case v.values <- m:
	default:
	}
}

// calculator returns an agent like the example's Calculator, with an id of
// its own.
func calculator() *agency.Agent {
	type addArgs struct {
		A float64 `json:"a" jsonschema:"description=first addend"`
		B float64 `json:"b" jsonschema:"description=second addend"`
	}
	a := agency.MustNewAgent(randomName("Calculator"))
	agency.Handle(a, "add", func(_ context.Context, args addArgs) (float64, error) { return args.A + args.B, nil },
		agency.Describe("Adds two numbers"), agency.Returns("the sum"))
	agency.Handle(a, "secret", func(context.Context, struct{}) (bool, error) { return true, nil },
		agency.AccessForAll(agency.Denied))
	return a
}

// A Python agent calls the Go Calculator's add and gets 3; its errors
// reach Python as operand/agency's ActionError; a send's answer reaches
// handle_action_value.
func TestPythonCallsGo(t *testing.T) {
	t.Parallel()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: amqpspace.InteropOperandAgency})
	calc := calculator()
	addAll(t, sp, calc)
	pyID := randomName("Py")
	py := pyAgents(t, ex, pyID)

	val, errText, _ := py.Request(pyID, calc.ID(), "add", map[string]int{"a": 1, "b": 2}, 5*time.Second)
	if string(val) != "3" {
		t.Errorf("add(1, 2) from Python: %s, %s; want 3", val, errText)
	}
	for action, want := range map[string]string{
		"subtract": `"` + calc.ID() + `" has no action "subtract"`,
		"secret":   `"` + calc.ID() + `.secret" not permitted for "` + pyID + `"`,
	} {
		_, errText, class := py.Request(pyID, calc.ID(), action, map[string]int{}, 5*time.Second)
		if class != "ActionError" || !strings.HasPrefix(errText, want) {
			t.Errorf("%s from Python: %s %q, want ActionError %q", action, class, errText, want)
		}
	}
	_, errText, class := py.Request(pyID, calc.ID(), "add", map[string]any{"a": 1}, 5*time.Second)
	if class != "ActionError" || !strings.Contains(errText, "b: missing required field") {
		t.Errorf("add with b missing from Python: %s %q", class, errText)
	}
	id := py.Send(pyID, calc.ID(), "add", map[string]int{"a": 2, "b": 3})
	answers := py.Answers(pyID, []string{calc.ID()}, wait)
	if len(answers) != 1 || answers[0].ParentID != id || string(answers[0].Value) != "5" {
		t.Errorf("answers to a send: %+v, want 5 answering %s", answers, id)
	}
}

// A Go agent calls a Python agent's action and gets its value; Python's
// errors come back with the types their texts imply.
func TestGoCallsPython(t *testing.T) {
	t.Parallel()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: amqpspace.InteropOperandAgency})
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, sp, caller)
	pyID := randomName("Py")
	pyAgents(t, ex, pyID)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	v, err := agency.Call[string](ctx, caller, pyID, "shout", map[string]string{"text": "hello from Go"})
	if err != nil || v != "HELLO FROM GO" {
		t.Errorf("shout: %q, %v", v, err)
	}
	for _, tt := range []struct {
		action string
		args   any
		want   error
		text   string
	}{
		{"fail", map[string]string{"reason": "boom"}, agency.ErrActionFailed, "ValueError: boom"},
		{"nope", nil, agency.ErrNotFound, `AttributeError: "nope" not found on "` + pyID + `"`},
		{"secret", nil, agency.ErrPermissionDenied, `PermissionError: "` + pyID + `.secret" not permitted`},
		{"shout", map[string]string{"txt": "x"}, agency.ErrInvalidArgs, "TypeError: PyAgent.shout() got an unexpected keyword argument 'txt'"},
	} {
		_, err := caller.Request(ctx, pyID, tt.action, tt.args)
		var ae *agency.ActionError
		if !errors.Is(err, tt.want) || !errors.As(err, &ae) || ae.Text != tt.text {
			t.Errorf("%s: %v, want %v with text %q", tt.action, err, tt.want, tt.text)
		}
	}
}

// A Python broadcast help lists the Go agents' actions, in operand/agency's
// help format; a Go help to a Python agent returns its actions as
// operand/agency describes them.
func TestHelpAcrossLanguages(t *testing.T) {
	t.Parallel()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: amqpspace.InteropOperandAgency})
	calc := calculator()
	addAll(t, sp, calc)
	pyID := randomName("Py")
	py := pyAgents(t, ex, pyID)

	t.Run("Python broadcasts help", func(t *testing.T) {
		id := py.Send(pyID, "*", "help", nil)
		answers := py.Answers(pyID, []string{calc.ID(), pyID}, wait)
		var fromGo *amqptest.PyAnswer
		for i, a := range answers {
			if a.From == calc.ID() {
				fromGo = &answers[i]
			}
		}
		if fromGo == nil || fromGo.ParentID != id {
			t.Fatalf("no help from the Go agent answering %s: %+v", id, answers)
		}
		sameJSON(t, fromGo.Value, `{"add": {"description": "Adds two numbers",
			"args": {"a": {"type": "number", "description": "first addend"}, "b": {"type": "number", "description": "second addend"}},
			"returns": {"type": "number", "description": "the sum"}}}`)
	})
	t.Run("Go asks a Python agent", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		help, err := agency.Call[map[string]json.RawMessage](ctx, calc, pyID, "help", nil)
		if err != nil {
			t.Fatal(err)
		}
		if names := slices.Sorted(maps.Keys(help)); !slices.Equal(names, []string{"fail", "note", "secret", "shout", "slow"}) {
			t.Errorf("help from Python lists %v", names)
		}
		sameJSON(t, help["shout"], `{"description": "Shouts the text.",
			"args": {"text": {"type": "string", "description": "what to shout"}},
			"returns": {"type": "string", "description": "the text in capitals"}}`)
	})
	t.Run("Survey lists Python agents", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		all, err := agency.Survey(ctx, calc)
		if err != nil {
			t.Fatal(err)
		}
		// Read leniently: the description, and args in operand/agency's format.
		shout := all[pyID]["shout"]
		if shout.Description != "Shouts the text." {
			t.Errorf("Survey's entry of the Python agent's shout: %+v", shout)
		}
		sameJSON(t, shout.Args, `{"text": {"type": "string", "description": "what to shout"}}`)
	})
}

// operand/agency answers what Go asked no answer for (a send with
// no_reply, a request whose deadline passed): Go drops those answers
// without a word.
func TestUnwantedPythonAnswersDropped(t *testing.T) {
	t.Parallel()
	logs := newRecords()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: amqpspace.InteropOperandAgency, Logger: slog.New(logs)})
	agentLogs := newRecords()
	caller := agency.MustNewAgent(randomName("Caller"), agency.Logger(slog.New(agentLogs)))
	addAll(t, sp, caller)
	pyID := randomName("Py")
	pyAgents(t, ex, pyID)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	if _, err := caller.Send(ctx, pyID, "shout", map[string]string{"text": "no reply, please"}); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := caller.Request(short, pyID, "slow", map[string]any{"seconds": 1, "text": "late"})
	cancelShort()
	if !errors.Is(err, agency.ErrTimeout) {
		t.Fatalf("a request to a slow action: %v, want a timeout", err)
	}
	// Messages from one Python agent arrive in order: once this answer is
	// in, the unwanted two have arrived too.
	v, err := agency.Call[string](ctx, caller, pyID, "slow", map[string]any{"seconds": 1.5, "text": "on time"})
	if err != nil || v != "on time" {
		t.Fatalf("slow: %q, %v", v, err)
	}
	if w := append(logs.warnings(), agentLogs.warnings()...); len(w) > 0 {
		t.Errorf("unwanted answers were logged: %v", w)
	}
	// The answer to the send and the late one.
	agentLogs.expect(t, "dropping a response nobody waits for", pyID)
	agentLogs.expect(t, "dropping a response nobody waits for", pyID)
}

// An id is unique across both languages: the queues are named after it,
// and each side refuses an id the other holds.
func TestIDsUniqueAcrossLanguages(t *testing.T) {
	t.Parallel()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: amqpspace.InteropOperandAgency})
	goHeld, pyHeld := randomName("GoHeld"), randomName("PyHeld")
	addAll(t, sp, agency.MustNewAgent(goHeld))
	py := pyAgents(t, ex, pyHeld)
	if err := py.TryAdd(goHeld); err == "" {
		t.Errorf("operand/agency added %s, which a Go process holds", goHeld)
	} else {
		t.Logf("operand/agency refuses an id Go holds: %s", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := sp.Add(ctx, agency.MustNewAgent(pyHeld)); !errors.Is(err, space.ErrAgentExists) {
		t.Errorf("Add of an id a Python process holds: %v, want ErrAgentExists", err)
	}
}

// A Go caller that stops reading a stream from an operand/agency agent
// (which sends no part) sends it no [cancel]: the agent would take it for
// a call of an action it lacks, and answer with an error. Only the caller's
// next message reaches the agent.
func TestStreamToPythonNoCancel(t *testing.T) {
	t.Parallel()
	ex := testExchange(t)
	sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: amqpspace.InteropOperandAgency})
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, sp, caller)
	pyID := randomName("Py")
	py := pyAgents(t, ex, pyID)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ended := make(chan error, 1)
	go func() {
		var last error
		for _, err := range caller.Stream(sctx, pyID, "slow", map[string]any{"seconds": 0.5, "text": "late"}) {
			last = err
		}
		ended <- last
	}()
	pyReceived(t, py, pyID, "slow")
	stop()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the stream ended with %v, want context.Canceled", err)
	}
	if _, err := caller.Send(ctx, pyID, "note", map[string]string{"text": "after"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range pyReceived(t, py, pyID, "note") {
		if strings.Contains(string(m), "[cancel]") {
			t.Fatalf("the Python agent received %s", m)
		}
	}
}

// pyReceived waits until the operand/agency agent id has received a call of
// action, and returns what it has received.
func pyReceived(t *testing.T, py *amqptest.Python, id, action string) []json.RawMessage {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got := py.Received(id)
		for _, m := range got {
			var shape pyShape
			if json.Unmarshal(m, &shape) == nil && shape.Action.Name == action {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never received %s; it received %s", id, action, got)
		}
		time.Sleep(20 * time.Millisecond) // asking again: the harness has no way to wait
	}
}
