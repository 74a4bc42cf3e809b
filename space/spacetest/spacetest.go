// Package spacetest is the conformance suite that every [space.Space]
// implementation runs: messaging (Send, Request, responses, errors,
// broadcasts, absent recipients, meta and trace context), access
// (policies and approvers), help and Survey, the agents' lifecycle, and
// runtime behaviour (one action at a time, concurrency, requests from
// actions, forged senders), and answers streamed in parts (order, gaps, a
// caller that falls behind or stops).
//
// An implementation's test calls Run with a constructor:
//
//	func TestLocal(t *testing.T) {
//		spacetest.Run(t, func(t *testing.T) space.Space { return space.NewLocal() })
//	}
//
// The suite holds for a space whose messages cross a wire: it waits on
// channels and contexts, never sleeps to synchronise; its timeouts (10s)
// are safety nets, not measurements; it compares values after their JSON
// encoding; and every
// agent id carries a random suffix, so that runs sharing a broker do not
// read each other's mail. Subtests do not run in parallel.
//
// Besides the Space methods' contracts, the suite relies on what every
// space must do: messages from one agent to another arrive in the
// order they were sent (broadcasts in the order they were broadcast), and a
// Request to an id no agent has fails with agency.ErrNoRecipient. Where it
// must show that something did not happen (an unknown broadcast was not
// answered, an agent did not receive its own broadcast), it sends a later
// message along the same path and waits for that instead of sleeping; two
// tests (AfterAddBeforeActions, RequestWhileDraining) leave a window of 200
// ms for a space to get something wrong in, which a passing space waits
// out. The Hardening tests send arguments of about 1.2 MB (a space's size
// limit must allow them) and make 80 requests whose deadlines, 10 to 30 ms,
// pass while their handlers wait for them. The Limits tests run on a
// space with a message size limit that SizeLimited gives.
package spacetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// timeout bounds every wait of the suite. It is a safety net that turns a
// hang into a failure, never a measure of speed.
const timeout = 10 * time.Second

// test is one subtest of the suite.
type test struct {
	name string
	run  func(e *env)
}

// Run runs the conformance suite. Each subtest gets a fresh space from
// newSpace and closes it when the subtest ends (newSpace need not arrange
// that itself). newSpace may fail the test with t.Fatal or skip it with
// t.Skip. The options give the suite what some tests need beyond that
// (see SizeLimited), or tell it what the space does not promise (see
// OtherDialects); Run fails the test on an option with a wrong value.
func Run(t *testing.T, newSpace func(t *testing.T) space.Space, opts ...Option) {
	t.Helper()
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"Messaging", messagingTests},
		{"Access", accessTests},
		{"Help", helpTests},
		{"Lifecycle", lifecycleTests},
		{"Runtime", runtimeTests},
		{"Hardening", hardeningTests},
		{"Stream", streamTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tt := range g.tests {
				t.Run(tt.name, func(t *testing.T) {
					e := newEnv(t, newSpace)
					e.otherDialects = o.otherDialects
					tt.run(e)
				})
			}
		})
	}
	t.Run("Limits", func(t *testing.T) {
		if o.limitedSpace == nil {
			t.Skip("spacetest: no space with a size limit given (spacetest.SizeLimited): the Limits tests did not run")
		}
		for _, tt := range limitsTests {
			t.Run(tt.name, func(t *testing.T) {
				e := newEnv(t, o.limitedSpace)
				e.limit = o.limit
				tt.run(e)
			})
		}
	})
}

// env is one subtest's space and the helpers its tests share.
type env struct {
	t  *testing.T
	sp space.Space
	// stop is closed when the subtest ends, before the space closes: every
	// handler that blocks also waits on it, so that no test can leave the
	// space waiting for an action that will never finish.
	stop chan struct{}
	// limit is the space's message size limit, in the Limits tests.
	limit int
	// otherDialects: the space may carry agents of another library (see
	// OtherDialects).
	otherDialects bool
}

func newEnv(t *testing.T, newSpace func(t *testing.T) space.Space) *env {
	sp := newSpace(t)
	if sp == nil {
		t.Fatal("newSpace returned nil")
	}
	e := &env{t: t, sp: sp, stop: make(chan struct{})}
	// Cleanups run last-in first-out: handlers are released, then the space
	// closes.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := sp.Close(ctx); err != nil {
			t.Errorf("Close at the end of the test: %v", err)
		}
	})
	t.Cleanup(func() { close(e.stop) })
	return e
}

// ctx returns a context bounded by the safety-net timeout. It is cancelled
// at the latest when the test ends.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	e.t.Cleanup(cancel)
	return ctx
}

// id returns a fresh agent id: base, then a random suffix.
func (e *env) id(base string) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails
	return base + "-" + hex.EncodeToString(b[:])
}

// newAgent returns an agent named after base, not yet in the space.
func (e *env) newAgent(base string, opts ...agency.Option) *agency.Agent {
	e.t.Helper()
	a, err := agency.NewAgent(e.id(base), opts...)
	if err != nil {
		e.t.Fatalf("NewAgent(%q): %v", base, err)
	}
	return a
}

// add puts the agents in the space, in order.
func (e *env) add(agents ...*agency.Agent) {
	e.t.Helper()
	for _, a := range agents {
		if err := e.sp.Add(e.ctx(), a); err != nil {
			e.t.Fatalf("Add(%s): %v", a.ID(), err)
		}
	}
}

// remove takes the agent with the given id out of the space.
func (e *env) remove(id string) {
	e.t.Helper()
	if err := e.sp.Remove(e.ctx(), id); err != nil {
		e.t.Fatalf("Remove(%s): %v", id, err)
	}
}

// send sends the action and returns the message id.
func (e *env) send(from *agency.Agent, to, action string, args any) string {
	e.t.Helper()
	id, err := from.Send(e.ctx(), to, action, args)
	if err != nil {
		e.t.Fatalf("%s: Send %q to %s: %v", from.ID(), action, to, err)
	}
	if id == "" {
		e.t.Fatalf("%s: Send %q to %s returned an empty message id", from.ID(), action, to)
	}
	return id
}

// request sends a request and waits, within the safety-net timeout, for its
// first response.
func (e *env) request(from *agency.Agent, to, action string, args any) (*agency.Message, error) {
	return from.Request(e.ctx(), to, action, args)
}

// call makes a request that must succeed and decodes its value as an R.
func call[R any](e *env, from *agency.Agent, to, action string, args any) R {
	e.t.Helper()
	v, err := agency.Call[R](e.ctx(), from, to, action, args)
	if err != nil {
		e.t.Fatalf("%s: request %q to %s: %v", from.ID(), action, to, err)
	}
	return v
}

// wantActionError checks that err is an *agency.ActionError of the given
// type that errors.Is matches with the type's sentinel.
func wantActionError(t testing.TB, err error, sentinel error, typ agency.ErrorType) *agency.ActionError {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", typ)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %q (%T): errors.Is(err, %q) is false", err, err, sentinel)
	}
	var ae *agency.ActionError
	if !errors.As(err, &ae) {
		t.Fatalf("error %q (%T) is no *agency.ActionError", err, err)
	}
	if ae.Type != typ {
		t.Fatalf("error type %q, want %q (error %q)", ae.Type, typ, ae.Text)
	}
	return ae
}

// value decodes a [response] message's value as an R.
func value[R any](t testing.TB, m *agency.Message) R {
	t.Helper()
	v, err := agency.Value[R](m)
	if err != nil {
		t.Fatalf("value of %v: %v", m, err)
	}
	return v
}

// normalise returns v as JSON decodes it into an any, so that a value built
// in Go and one that crossed a wire (json.Number, json.RawMessage, a struct)
// compare equal when they encode alike.
func normalise(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %#v: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return out
}

// sameJSON reports whether got and want encode to the same JSON value.
func sameJSON(t testing.TB, got, want any) bool {
	t.Helper()
	return reflect.DeepEqual(normalise(t, got), normalise(t, want))
}

// signal sends on ch without blocking; ch is buffered for what the test
// expects.
func signal[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// receive waits for a value on ch, failing the test after the safety-net
// timeout.
func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
		var zero T
		return zero // not reached: Fatalf ends the test
	}
}

// record is a list that handlers and hooks append to from their own
// goroutines while the test waits for it to reach a state.
type record[T any] struct {
	mu      sync.Mutex
	items   []T
	changed chan struct{} // closed on the next add, when someone waits
}

func (r *record[T]) add(v T) {
	r.mu.Lock()
	r.items = append(r.items, v)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
	r.mu.Unlock()
}

// all returns what has been recorded so far.
func (r *record[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.items)
}

// waitFor waits until cond holds for what has been recorded, and returns
// that.
func (r *record[T]) waitFor(t testing.TB, what string, cond func([]T) bool) []T {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		items := slices.Clone(r.items)
		if cond(items) {
			r.mu.Unlock()
			return items
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s; recorded: %v", timeout, what, items)
		}
	}
}

// waitLen waits until at least n items are recorded.
func (r *record[T]) waitLen(t testing.TB, what string, n int) []T {
	t.Helper()
	return r.waitFor(t, what, func(items []T) bool { return len(items) >= n })
}

// reply is a response that reached an agent's ValueHandler or ErrorHandler.
type reply struct {
	msg *agency.Message
	err *agency.ActionError // nil for a [response]
}

func (r reply) String() string { return r.msg.String() }

// inbox is a hook value that records the responses an agent receives
// through its ValueHandler and ErrorHandler hooks.
type inbox struct {
	record[reply]
}

var (
	_ agency.ValueHandler = (*inbox)(nil)
	_ agency.ErrorHandler = (*inbox)(nil)
)

func (b *inbox) HandleActionValue(_ context.Context, m *agency.Message) {
	b.add(reply{msg: m})
}

func (b *inbox) HandleActionError(_ context.Context, m *agency.Message, err *agency.ActionError) {
	b.add(reply{msg: m, err: err})
}

// repliesTo waits for n responses to the message with the given id and
// returns those received so far, in order of arrival.
func (b *inbox) repliesTo(t testing.TB, id string, n int) []reply {
	t.Helper()
	items := b.waitFor(t, fmt.Sprintf("%d responses to %s", n, id), func(rs []reply) bool {
		return len(answering(rs, id)) >= n
	})
	return answering(items, id)
}

// answering returns the replies whose parent id is id.
func answering(rs []reply, id string) []reply {
	var out []reply
	for _, r := range rs {
		if r.msg.ParentID == id {
			out = append(out, r)
		}
	}
	return out
}

// Argument types of the suite's actions.
type (
	empty   struct{}
	addArgs struct {
		A float64 `json:"a" jsonschema:"description=first addend"`
		B float64 `json:"b" jsonschema:"description=second addend"`
	}
	numArgs struct {
		N int `json:"n"`
	}
	textArgs struct {
		Text string `json:"text"`
	}
)

// add is the suite's standard action: it returns a+b.
func add(_ context.Context, args addArgs) (float64, error) { return args.A + args.B, nil }

// pong answers ping.
func pong(context.Context, empty) (string, error) { return "pong", nil }

// note is a message an agent received through a recording action.
type note struct {
	receiver, from, to, text string
}

// handleNote registers the action "note" on a, recording each call in r.
func handleNote(a *agency.Agent, r *record[note]) {
	agency.Handle(a, "note", func(ctx context.Context, args textArgs) (bool, error) {
		m := agency.MessageFrom(ctx)
		r.add(note{receiver: agency.AgentFrom(ctx).ID(), from: m.From, to: m.To, text: args.Text})
		return true, nil
	})
}

// notes returns the notes matching receiver, from and text; an empty
// argument matches anything.
func notes(ns []note, receiver, from, text string) []note {
	var out []note
	for _, n := range ns {
		if (receiver == "" || n.receiver == receiver) && (from == "" || n.from == from) && (text == "" || n.text == text) {
			out = append(out, n)
		}
	}
	return out
}

// mustContain fails unless s contains each of the parts.
func mustContain(t testing.TB, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s %q does not mention %q", what, s, p)
		}
	}
}
