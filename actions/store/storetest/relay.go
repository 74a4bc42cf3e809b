package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

var relayTests = []test{
	{"SendsInOrder", testRelayOrder},
	{"SendsWhatADeadRelayHeld", testRelayDeadClaim},
	{"TwoRelaysOneAgent", testTwoRelays},
	{"SendFailureKeepsEntry", testRelayFailure},
	{"SendFailureThenPassAfterHalfTheLease", testRelayFailureLateRetry},
	{"RecipientAbsentThenAdded", testRelayAbsentRecipient},
	{"AbsentRecipientHoldsBackNoOther", testRelayAbsentRecipientOthersGoOn},
	{"AbsentRecipientDueAtOnce", testRelayAbsentRecipientNoWait},
	{"Send", testRelaySend},
}

// runArgs are the arguments of the receiver's action in the relay tests.
type runArgs struct {
	N int `json:"n"`
}

// receiver is an agent that records the messages its run action handles.
type receiver struct {
	mu   sync.Mutex
	ids  []string // __meta__.id of each message handled, in order
	ns   []int
	more chan struct{} // a value after each message
}

func newReceiver(id string) (*agency.Agent, *receiver) {
	r := &receiver{more: make(chan struct{}, 1)}
	a := agency.MustNewAgent(id)
	agency.Handle(a, "run", func(ctx context.Context, args runArgs) (struct{}, error) {
		r.mu.Lock()
		r.ids = append(r.ids, agency.MessageFrom(ctx).ID)
		r.ns = append(r.ns, args.N)
		r.mu.Unlock()
		select {
		case r.more <- struct{}{}:
		default:
		}
		return struct{}{}, nil
	})
	return a, r
}

// waitFor waits until the receivers together have handled n messages.
func (e *env) waitFor(n int, rs ...*receiver) {
	e.t.Helper()
	deadline := time.After(timeout)
	for {
		total := 0
		for _, r := range rs {
			r.mu.Lock()
			total += len(r.ids)
			r.mu.Unlock()
		}
		if total >= n {
			return
		}
		// Wake on any receiver's next message, or look again soon: with
		// several receivers only one channel is waited on at a time.
		select {
		case <-rs[0].more:
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			e.t.Fatalf("%d of %d messages arrived within %v", total, n, timeout)
		}
	}
}

// localSpace returns a space with the given agents, closed when the test
// ends.
func (e *env) localSpace(agents ...*agency.Agent) *space.Local {
	e.t.Helper()
	sp := space.NewLocal()
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = sp.Close(ctx)
	})
	for _, a := range agents {
		if err := sp.Add(e.ctx(), a); err != nil {
			e.t.Fatalf("Add(%s): %v", a.ID(), err)
		}
	}
	return sp
}

// queueRuns queues run messages from "Coordinator" to "Hr" with the
// numbers from, from+1, …, n in one Apply, and returns their message ids.
func (e *env) queueRuns(from, n int) []string {
	e.t.Helper()
	return e.queueRunsTo("Hr", from, n)
}

// queueRunsTo is queueRuns to the agent with id to.
func (e *env) queueRunsTo(to string, from, n int) []string {
	e.t.Helper()
	var c store.Changes
	var ids []string
	for i := from; i < from+n; i++ {
		m := &agency.Message{To: to, Action: "run", ID: agency.NewID(), Args: runArgs{N: i}}
		o, err := store.NewOutgoing("Coordinator", m)
		if err != nil {
			e.t.Fatal(err)
		}
		c.Send = append(c.Send, o)
		ids = append(ids, m.ID)
	}
	e.apply(c)
	return ids
}

func testRelayOrder(e *env) {
	coord := agency.MustNewAgent("Coordinator")
	hr, got := newReceiver("Hr")
	e.localSpace(coord, hr)
	// Queued before the relay starts: what a restart finds.
	want := e.queueRuns(0, 30)
	r := store.NewRelay(e.st, coord, store.RelayConfig{Poll: time.Hour, Batch: 7})
	r.Start()
	defer r.Stop()
	e.waitFor(30, got)
	// Queued while it runs, then woken: sent without waiting for a poll.
	want = append(want, e.queueRuns(30, 5)...)
	r.Wake()
	e.waitFor(35, got)
	r.Stop()
	r.Stop() // idempotent
	got.mu.Lock()
	defer got.mu.Unlock()
	if !slices.Equal(got.ids, want) {
		e.t.Errorf("message ids received in this order:\n%v\nwant the order queued:\n%v", got.ids, want)
	}
	for i, n := range got.ns {
		if n != i {
			e.t.Fatalf("message %d carried n=%d", i, n)
		}
	}
	if out := e.claim("", 10, time.Hour); len(out) != 0 {
		e.t.Errorf("%d entries left in the outbox after sending", len(out))
	}
}

func testRelayDeadClaim(e *env) {
	coord := agency.MustNewAgent("Coordinator")
	hr, got := newReceiver("Hr")
	e.localSpace(coord, hr)
	want := e.queueRuns(0, 3)
	// A relay claimed them and died.
	if dead := e.claim("Coordinator", 10, time.Millisecond); len(dead) != 3 {
		e.t.Fatalf("claimed %d", len(dead))
	}
	r := store.NewRelay(e.st, coord, store.RelayConfig{Poll: 5 * time.Millisecond})
	r.Start()
	defer r.Stop()
	e.waitFor(3, got)
	r.Stop()
	got.mu.Lock()
	defer got.mu.Unlock()
	if !slices.Equal(got.ids, want) {
		e.t.Errorf("received %v, want %v: the same messages, ids included", got.ids, want)
	}
}

// testTwoRelays runs two replicas of agent "Coordinator", each in its own
// space with its own receiver, relaying one outbox: each message is sent
// by one of them, once.
func testTwoRelays(e *env) {
	const batches, per = 20, 10
	var relays []*store.Relay
	var recvs []*receiver
	for range 2 {
		coord := agency.MustNewAgent("Coordinator")
		hr, got := newReceiver("Hr")
		e.localSpace(coord, hr)
		r := store.NewRelay(e.st, coord, store.RelayConfig{Poll: 2 * time.Millisecond, Batch: 3, Lease: time.Minute})
		r.Start()
		defer r.Stop()
		relays = append(relays, r)
		recvs = append(recvs, got)
	}
	var want []string
	for b := range batches {
		want = append(want, e.queueRuns(b*per, per)...)
		for _, r := range relays {
			r.Wake()
		}
	}
	e.waitFor(batches*per, recvs...)
	for _, r := range relays {
		r.Stop() // and wait: nothing is still being sent
	}
	seen := make(map[string]int)
	counts := make([]int, len(recvs))
	for i, got := range recvs {
		got.mu.Lock()
		for _, id := range got.ids {
			seen[id]++
		}
		counts[i] = len(got.ids)
		got.mu.Unlock()
	}
	for _, id := range want {
		if seen[id] != 1 {
			e.t.Errorf("message %s was received %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		e.t.Errorf("%d distinct messages received, want %d", len(seen), len(want))
	}
	e.t.Logf("two relays sent %v messages", counts)
}

func testRelayFailure(e *env) {
	coord := agency.MustNewAgent("Coordinator") // in no space: it cannot send
	want := e.queueRuns(0, 2)
	r := store.NewRelay(e.st, coord, store.RelayConfig{Lease: time.Hour})
	n, err := r.Flush(e.ctx())
	if n != 0 || !errors.Is(err, agency.ErrNotAdded) {
		e.t.Fatalf("Flush from an agent in no space: %d sent, error %v; want 0 and ErrNotAdded", n, err)
	}
	// The relay gave them back at once: another relay (a replica whose
	// agent can send) would claim them now, oldest first. This one gives
	// them back again.
	back := e.claim("Coordinator", 10, time.Hour)
	if ids := e.messageIDs(back); !slices.Equal(ids, want) {
		e.t.Fatalf("claim after the failed pass: %v, want %v", ids, want)
	}
	if err := e.st.Release(e.ctx(), 0, back...); err != nil {
		e.t.Fatal(err)
	}
	want = append(want, e.queueRuns(2, 1)...)
	// Once the agent is in a space, the next pass sends them first, without
	// waiting for a lease, then the newer one: all in order.
	hr, got := newReceiver("Hr")
	e.localSpace(coord, hr)
	if n, err := r.Flush(e.ctx()); n != 3 || err != nil {
		e.t.Fatalf("Flush once the agent can send: %d sent, %v; want 3", n, err)
	}
	e.waitFor(3, got)
	got.mu.Lock()
	defer got.mu.Unlock()
	if !slices.Equal(got.ids, want) {
		e.t.Errorf("received %v, want %v in that order", got.ids, want)
	}
	if out := e.claim("", 10, time.Millisecond); len(out) != 0 {
		e.t.Errorf("%d entries left after they were sent", len(out))
	}
}

// flushUntil flushes r until the receivers together have handled n
// messages. An absent recipient is not a failure here; any other error
// is.
func (e *env) flushUntil(r *store.Relay, n int, rs ...*receiver) {
	e.t.Helper()
	deadline := time.After(timeout)
	for {
		if _, err := r.Flush(e.ctx()); err != nil && !errors.Is(err, agency.ErrNoRecipient) {
			e.t.Fatalf("Flush: %v", err)
		}
		total := 0
		for _, r := range rs {
			r.mu.Lock()
			total += len(r.ids)
			r.mu.Unlock()
		}
		if total >= n {
			return
		}
		select {
		case <-rs[0].more:
		case <-time.After(2 * time.Millisecond):
		case <-deadline:
			e.t.Fatalf("%d of %d messages arrived within %v", total, n, timeout)
		}
	}
}

// messageIDs returns the __meta__.id of each entry's message, in order.
func (e *env) messageIDs(out []store.Outgoing) []string {
	e.t.Helper()
	ids := make([]string, len(out))
	for i, o := range out {
		m, err := agency.DecodeMessage(o.Message)
		if err != nil {
			e.t.Fatalf("entry %d: %v", o.ID, err)
		}
		ids[i] = m.ID
	}
	return ids
}

// received returns the message ids r handled, in order.
func (r *receiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

// testRelayFailureLateRetry: a pass that fails, then a pass that starts
// after half the lease of the failed pass's claim and before its end,
// with a newer entry queued in between: the older entry still goes first.
func testRelayFailureLateRetry(e *env) {
	const lease = time.Second
	coord := agency.MustNewAgent("Coordinator") // in no space yet
	want := e.queueRuns(0, 1)
	r := store.NewRelay(e.st, coord, store.RelayConfig{Lease: lease})
	start := time.Now() // the claim starts after this
	if n, err := r.Flush(e.ctx()); n != 0 || !errors.Is(err, agency.ErrNotAdded) {
		e.t.Fatalf("Flush from an agent in no space: %d sent, error %v; want 0 and ErrNotAdded", n, err)
	}
	hr, got := newReceiver("Hr")
	e.localSpace(coord, hr)
	want = append(want, e.queueRuns(1, 1)...)
	// Not a measurement: this places the next pass between half the
	// lease and its end, where the entry that failed may still be
	// leased.
	time.Sleep(time.Until(start.Add(lease * 7 / 10)))
	if n, err := r.Flush(e.ctx()); n != 2 || err != nil {
		e.t.Fatalf("Flush once the agent can send: %d sent, %v; want 2", n, err)
	}
	e.waitFor(2, got)
	if ids := got.received(); !slices.Equal(ids, want) {
		e.t.Errorf("received %v, want %v in that order", ids, want)
	}
}

// testRelayAbsentRecipient: entries to an agent that is not in the space
// stay queued (Flush says so with ErrNoRecipient) and are tried again;
// once the agent is there they arrive, each once, in the order queued,
// with those queued after it came behind them.
func testRelayAbsentRecipient(e *env) {
	coord := agency.MustNewAgent("Coordinator")
	sp := e.localSpace(coord)
	want := e.queueRuns(0, 3)
	r := store.NewRelay(e.st, coord, store.RelayConfig{Lease: time.Hour, Batch: 2, Backoff: 20 * time.Millisecond})
	if n, err := r.Flush(e.ctx()); n != 0 || !errors.Is(err, agency.ErrNoRecipient) {
		e.t.Fatalf("Flush to an absent agent: %d sent, error %v; want 0 and ErrNoRecipient", n, err)
	}
	// Tried again (or not yet: it waits), and still absent.
	if n, err := r.Flush(e.ctx()); n != 0 || (err != nil && !errors.Is(err, agency.ErrNoRecipient)) {
		e.t.Fatalf("second Flush to an absent agent: %d sent, error %v; want 0", n, err)
	}
	hr, got := newReceiver("Hr")
	if err := sp.Add(e.ctx(), hr); err != nil {
		e.t.Fatal(err)
	}
	want = append(want, e.queueRuns(3, 1)...)
	// A pass may come before the retry is due: then it sends nothing to
	// Hr, not the newest entry ahead of the others.
	if _, err := r.Flush(e.ctx()); err != nil {
		e.t.Fatalf("Flush once Hr is there: %v", err)
	}
	if ids := got.received(); !slices.Equal(ids, want[:len(ids)]) {
		e.t.Fatalf("received %v, want a beginning of %v", ids, want)
	}
	e.flushUntil(r, len(want), got)
	if ids := got.received(); !slices.Equal(ids, want) {
		e.t.Errorf("received %v, want %v: each once, in the order queued", ids, want)
	}
	if out := e.claim("", 10, time.Millisecond); len(out) != 0 {
		e.t.Errorf("%d entries left after they were delivered", len(out))
	}
}

// testRelayAbsentRecipientOthersGoOn: entries to an absent agent wait, in
// their order, while the entries to another agent, queued between them,
// go out; one entry per claim, so that the claims after the failure must
// pass over the waiting entry's successor.
func testRelayAbsentRecipientOthersGoOn(e *env) {
	e.absentBesidePresent(20 * time.Millisecond)
}

// testRelayAbsentRecipientNoWait is testRelayAbsentRecipientOthersGoOn
// with a backoff so short that the waiting entry is due again within the
// pass: the pass neither tries it in circles nor stops before the other
// agent's entries.
func testRelayAbsentRecipientNoWait(e *env) {
	e.absentBesidePresent(time.Nanosecond)
}

func (e *env) absentBesidePresent(backoff time.Duration) {
	coord := agency.MustNewAgent("Coordinator")
	hr, toHr := newReceiver("Hr")
	sp := e.localSpace(coord, hr)
	var wantOps, wantHr []string
	wantOps = append(wantOps, e.queueRunsTo("Ops", 0, 1)...)
	wantHr = append(wantHr, e.queueRunsTo("Hr", 0, 1)...)
	wantOps = append(wantOps, e.queueRunsTo("Ops", 1, 1)...)
	wantHr = append(wantHr, e.queueRunsTo("Hr", 1, 2)...)
	r := store.NewRelay(e.st, coord, store.RelayConfig{Lease: time.Hour, Batch: 1, Backoff: backoff, MaxBackoff: backoff})
	n, err := r.Flush(e.ctx())
	if n != 3 || !errors.Is(err, agency.ErrNoRecipient) {
		e.t.Fatalf("Flush with Ops absent: %d sent, error %v; want Hr's 3, and ErrNoRecipient for Ops's", n, err)
	}
	e.waitFor(3, toHr)
	if ids := toHr.received(); !slices.Equal(ids, wantHr) {
		e.t.Errorf("Hr received %v, want %v", ids, wantHr)
	}
	ops, toOps := newReceiver("Ops")
	if err := sp.Add(e.ctx(), ops); err != nil {
		e.t.Fatal(err)
	}
	e.flushUntil(r, len(wantOps), toOps)
	if ids := toOps.received(); !slices.Equal(ids, wantOps) {
		e.t.Errorf("Ops received %v, want %v: each once, in the order queued", ids, wantOps)
	}
	if ids := toHr.received(); len(ids) != len(wantHr) {
		e.t.Errorf("Hr received %d messages, want %d", len(ids), len(wantHr))
	}
	if out := e.claim("", 10, time.Millisecond); len(out) != 0 {
		e.t.Errorf("%d entries left after they were delivered", len(out))
	}
}

// testRelaySend: a relay with a RelayConfig.Send sends through it, not
// through Forward, and reads its errors as Forward's: ErrNoRecipient makes
// the entry wait (and those behind it to the same recipient), another
// error gives the batch back for the next pass, nil marks the entry sent
// whatever Send did with it.
func testRelaySend(e *env) {
	coord := agency.MustNewAgent("Coordinator")
	hr, got := newReceiver("Hr")
	e.localSpace(coord, hr)
	down := errors.New("storetest: the line is down")
	var mu sync.Mutex
	calls := map[int]int{} // n → how often Send was called with it
	var wrongAgent []string
	send := func(ctx context.Context, a *agency.Agent, m *agency.Message) error {
		var args runArgs
		raw, _ := m.Args.(json.RawMessage) // entries are decoded from their JSON
		if err := json.Unmarshal(raw, &args); err != nil {
			return err
		}
		mu.Lock()
		calls[args.N]++
		first := calls[args.N] == 1
		if a != coord {
			wrongAgent = append(wrongAgent, a.ID())
		}
		mu.Unlock()
		switch {
		case args.N == 1 && first:
			return fmt.Errorf("storetest: %w: Hr is not back yet", agency.ErrNoRecipient)
		case args.N == 3 && first:
			return down
		case args.N == 5:
			return nil // dropped: it counts as sent
		}
		// Sent as a request: sent means answered.
		_, err := a.RequestMessage(ctx, m)
		return err
	}
	r := store.NewRelay(e.st, coord, store.RelayConfig{Lease: time.Hour, Backoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Send: send})

	// An absent recipient, as Send says: 1 waits, and 2 behind it.
	want := e.queueRuns(0, 3)
	if n, err := r.Flush(e.ctx()); n != 1 || !errors.Is(err, agency.ErrNoRecipient) {
		e.t.Fatalf("Flush with Send saying Hr is absent: %d sent, %v; want 1 and ErrNoRecipient", n, err)
	}
	if ids := got.received(); !slices.Equal(ids, want[:1]) {
		e.t.Fatalf("Hr received %v, want only %v: the others wait behind the absent one", ids, want[:1])
	}
	e.flushUntil(r, 3, got)

	// Another error: the entry and the rest go back, and the next pass
	// sends them in order.
	want = append(want, e.queueRuns(3, 2)...)
	if n, err := r.Flush(e.ctx()); n != 0 || !errors.Is(err, down) {
		e.t.Fatalf("Flush with Send failing: %d sent, %v; want 0 and Send's error", n, err)
	}
	if n, err := r.Flush(e.ctx()); n != 2 || err != nil {
		e.t.Fatalf("Flush after the failure: %d sent, %v; want 2", n, err)
	}

	// nil without sending: marked sent all the same.
	e.queueRuns(5, 1)
	if n, err := r.Flush(e.ctx()); n != 1 || err != nil {
		e.t.Fatalf("Flush of an entry Send drops: %d sent, %v; want 1", n, err)
	}
	if ids := got.received(); !slices.Equal(ids, want) {
		e.t.Errorf("Hr received %v, want %v: each once, in the order queued", ids, want)
	}
	if out := e.claim("", 10, time.Millisecond); len(out) != 0 {
		e.t.Errorf("%d entries left after they were sent", len(out))
	}
	mu.Lock()
	defer mu.Unlock()
	if calls[1] != 2 || calls[3] != 2 || calls[0] != 1 || calls[2] != 1 || calls[4] != 1 || calls[5] != 1 {
		e.t.Errorf("Send called %v times per n; want twice for 1 and 3 (refused once), once for the others", calls)
	}
	if len(wrongAgent) > 0 {
		e.t.Errorf("Send was given agents %v, want the relay's", wrongAgent)
	}
}
