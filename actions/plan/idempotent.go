package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// IdempotencyKey is the __meta__ key of the key a handler wrapped by
// Idempotent runs once for. The coordinator sets it to the step's id; an
// LLM agent of actions/openai sets it on each tool call to a key made of
// its turn's and the call's ids, the same when the call is sent again
// after a crash (see openai.Journal). Idempotent serves any action so
// called, not only plan steps.
const IdempotencyKey = "idempotency_key"

// claimTTL is how long a run holds its key without renewing the claim;
// a process that dies mid-run gives the key up after it, unless the
// agent's next delivery comes to another process first (see claim).
const claimTTL = 30 * time.Second

// incarnation names this process in the claims it makes: a claim of
// another incarnation of the same agent is one of a process that is gone.
var incarnation = newID()

// idemRecord is the stored state of one key: running (with the claim's
// end and the process that holds it) or done (with the value or the
// error).
type idemRecord struct {
	Done   bool            `json:"done"`
	Until  time.Time       `json:"until,omitempty"`
	Owner  string          `json:"owner,omitempty"` // the incarnation of the claim's process
	Run    string          `json:"run,omitempty"`   // the claim's delivery, kept across its retries
	Value  json.RawMessage `json:"value,omitempty"`
	Error  *idemError      `json:"error,omitempty"`
	Agent  string          `json:"agent"`
	Action string          `json:"action"`
	Key    string          `json:"key"`
}

type idemError struct {
	Type agency.ErrorType `json:"type"`
	Text string           `json:"text"`
}

// effects collects the Changes a run of a handler wrapped by Idempotent
// writes with its record (see Effect).
type effects struct {
	mu sync.Mutex
	c  store.Changes
}

type effectsKey struct{}

// Effect adds c to the transaction in which Idempotent records that the
// run of the handler ctx belongs to is done: the documents it puts and
// deletes and the messages it queues are written in the same store
// transaction as the run's result, all or nothing, and only when the
// handler returns no error. That makes the effect exactly once: a process
// that dies before the transaction wrote none of it (the next delivery
// runs the handler again), one that dies after it wrote all of it (the
// next delivery is answered from the record, without running the
// handler). When the transaction fails because another writer changed a
// document first (store.ErrConflict), nothing of it is written and the
// run is tried again from the start, so the handler should read what it
// changes within the run.
//
// c goes to the store the handler was wrapped with, and Effect may be
// called several times in one run. It returns an error when ctx is not
// the context of a handler wrapped by Idempotent: an effect written there
// would have nothing to be once with.
//
//	agency.Handle(hr, "create_employee_record", plan.Idempotent(st,
//		func(ctx context.Context, e Employee) (string, error) {
//			row := store.Doc{Kind: "employee", ID: e.Email, Body: …}
//			return "created", plan.Effect(ctx, store.Changes{Put: []store.Doc{row}})
//		}))
func Effect(ctx context.Context, c store.Changes) error {
	e, _ := ctx.Value(effectsKey{}).(*effects)
	if e == nil {
		return errors.New("plan: Effect outside a handler wrapped by plan.Idempotent: the effect would not be once")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.c.Put = append(e.c.Put, c.Put...)
	e.c.Delete = append(e.c.Delete, c.Delete...)
	e.c.Send = append(e.c.Send, c.Send...)
	return nil
}

// Idempotent wraps an action's handler so that it runs once per
// idempotency key (__meta__.idempotency_key, the step's id when the
// coordinator sends a step): a message that comes again with a key already
// done gets the stored value or error, and one that comes while the key's
// first run is under way in this process waits for it. The key, the agent
// and the action name the record; a message without a key runs h as it is
// (its Effect changes are written when it returns).
//
//	agency.Handle(hr, "create_employee_record", plan.Idempotent(st, createEmployeeRecord))
//
// What is once depends on where the effect goes:
//
//   - An effect h writes through the store with Effect is exactly once:
//     it is written in the transaction that records the run as done.
//   - An effect outside the store (a call to another system) is at least
//     once: a process that dies after the effect and before that
//     transaction leaves the key to the next delivery, which runs h again.
//     Give the other system the key (the step's id) so that it can tell
//     the repeat, as an idempotency key of its own.
//
// A run's claim on the key is renewed while h runs. The next delivery
// takes it over at once when the claim is of an earlier process of the
// same agent (an agent's id is one process's at a time in a space, so that
// process is gone), else when the claim has run out (30 s). A handler
// whose context ends before it returns records nothing.
func Idempotent[A, R any](st store.Store, h func(context.Context, A) (R, error)) func(context.Context, A) (R, error) {
	return func(ctx context.Context, args A) (R, error) {
		var zero R
		m := agency.MessageFrom(ctx)
		a := agency.AgentFrom(ctx)
		key := ""
		if m != nil {
			key, _ = m.Meta[IdempotencyKey].(string)
		}
		if a == nil || key == "" {
			eff := &effects{}
			value, err := h(context.WithValue(ctx, effectsKey{}, eff), args)
			if err == nil && ctx.Err() == nil && !eff.empty() {
				if werr := st.Apply(ctx, eff.c); werr != nil {
					return zero, fmt.Errorf("plan: writing the effect: %w", werr)
				}
			}
			return value, err
		}
		idb, _ := json.Marshal([]string{a.ID(), m.Action, key})
		id := string(idb)
		fresh := idemRecord{Agent: a.ID(), Action: m.Action, Key: key, Owner: incarnation, Run: newID()}
		for try := 0; ; try++ {
			// After a conflict the key may be held by a run in another
			// process that took it over from this one: wait for it rather
			// than take it back.
			value, herr, err := runOnce(ctx, st, id, fresh, try == 0, h, args)
			if errors.Is(err, store.ErrConflict) && try < store.Retries {
				continue // another run took the key, or a document the effect changes moved: start again
			}
			if err != nil {
				return zero, err
			}
			return value, herr
		}
	}
}

func (e *effects) empty() bool {
	return len(e.c.Put) == 0 && len(e.c.Delete) == 0 && len(e.c.Send) == 0
}

// runOnce claims the key id, runs h unless the key is done, and writes its
// result with its effects. It returns store.ErrConflict when that write
// failed on a version: nothing of it was written.
func runOnce[A, R any](ctx context.Context, st store.Store, id string, fresh idemRecord, takeOver bool, h func(context.Context, A) (R, error), args A) (R, error, error) {
	var zero R
	rec, version, err := claim(ctx, st, id, fresh, takeOver)
	if err != nil {
		return zero, nil, err
	}
	if rec.Done {
		if rec.Error != nil {
			return zero, &agency.ActionError{Type: rec.Error.Type, Text: rec.Error.Text}, nil
		}
		var v R
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			return zero, nil, fmt.Errorf("plan: the stored result of %s: %w", id, err)
		}
		return v, nil, nil
	}

	// Renew the claim while h runs.
	runCtx, stop := context.WithCancel(ctx)
	renewed := make(chan int64, 1)
	go func() {
		v := version
		defer func() { renewed <- v }()
		t := time.NewTicker(claimTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			r := rec
			r.Until = time.Now().Add(claimTTL)
			body, _ := json.Marshal(r)
			if err := st.Apply(runCtx, store.Changes{Put: []store.Doc{{Kind: kindIdem, ID: id, Version: v, Body: body}}}); err == nil {
				v++
			}
		}
	}()
	eff := &effects{}
	value, herr := h(context.WithValue(ctx, effectsKey{}, eff), args)
	stop()
	version = <-renewed
	if ctx.Err() != nil {
		return value, herr, nil
	}
	done := idemRecord{Done: true, Agent: rec.Agent, Action: rec.Action, Key: rec.Key}
	var c store.Changes
	if herr != nil {
		var ae *agency.ActionError
		if !errors.As(herr, &ae) {
			ae = &agency.ActionError{Type: agency.TypeActionFailed, Text: herr.Error()}
		}
		done.Error = &idemError{Type: ae.Type, Text: ae.Text}
	} else {
		b, err := json.Marshal(value)
		if err != nil {
			return value, nil, err
		}
		done.Value = b
		c = eff.c
	}
	body, _ := json.Marshal(done)
	c.Put = append(c.Put[:len(c.Put):len(c.Put)], store.Doc{Kind: kindIdem, ID: id, Version: version, Body: body})
	if err := st.Apply(ctx, c); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return zero, nil, err
		}
		return zero, nil, fmt.Errorf("plan: recording the result of %s: %w", id, err)
	}
	return value, herr, nil
}

// claim returns the record of id once it is done, or claims it for a run
// and returns it with the version the claim wrote. It waits while another
// run holds the claim, unless the claim is fresh's own (an earlier try of
// the same delivery) or takeOver is set and the claim is of another
// incarnation of the agent.
func claim(ctx context.Context, st store.Store, id string, fresh idemRecord, takeOver bool) (idemRecord, int64, error) {
	wait := 20 * time.Millisecond
	for {
		var rec idemRecord
		var version int64
		d, err := st.Get(ctx, kindIdem, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return rec, 0, err
		default:
			if err := json.Unmarshal(d.Body, &rec); err != nil {
				return rec, 0, fmt.Errorf("plan: the record of %s: %w", id, err)
			}
			version = d.Version
			if rec.Done {
				return rec, version, nil
			}
		}
		// A claim of another incarnation of this agent is of a process that
		// is gone: the agent's id is one process's at a time.
		if version == 0 || time.Now().After(rec.Until) || rec.Run == fresh.Run || (takeOver && rec.Owner != "" && rec.Owner != incarnation) {
			r := fresh
			r.Until = time.Now().Add(claimTTL)
			body, _ := json.Marshal(r)
			err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: kindIdem, ID: id, Version: version, Body: body}}})
			if err == nil && version == 0 {
				// Created: where a forgotten record was deleted, the version
				// goes on from the deleted one's, so read it.
				d, err := st.Get(ctx, kindIdem, id)
				if err != nil {
					return rec, 0, err
				}
				var got idemRecord
				if json.Unmarshal(d.Body, &got) != nil || got.Run != r.Run {
					continue // taken over already
				}
				return r, d.Version, nil
			}
			if err == nil {
				return r, version + 1, nil
			}
			if !errors.Is(err, store.ErrConflict) {
				return rec, 0, err
			}
			continue // someone else claimed it first
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return rec, 0, ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, time.Second)
	}
}

// ForgetIdempotent deletes from st the records of Idempotent whose runs
// ended before the given time, and returns how many it deleted. Records
// are kept until then so that a repeat of a key is answered from its
// record; a repeat that comes after its record was forgotten runs the
// handler again. A step is not sent again once its plan has recorded its
// answer, so a record older than the longest a step can wait for its
// answer (its lease, times the redeliveries) is not needed any more: a
// program that runs for long calls this now and then, for example once
// a day with a cutoff of a week ago. Records of runs under way are kept.
func ForgetIdempotent(ctx context.Context, st store.Store, before time.Time) (int, error) {
	docs, err := st.List(ctx, store.Query{Kind: kindIdem})
	if err != nil {
		return 0, err
	}
	const batch = 500
	var gone []store.Doc
	n := 0
	flush := func() error {
		if len(gone) == 0 {
			return nil
		}
		err := st.Apply(ctx, store.Changes{Delete: gone})
		if errors.Is(err, store.ErrConflict) {
			// One of them was written meanwhile (a run took an old key
			// again): delete the others one by one.
			for _, d := range gone {
				switch err := st.Apply(ctx, store.Changes{Delete: []store.Doc{d}}); {
				case err == nil:
					n++
				case !errors.Is(err, store.ErrConflict):
					return err
				}
			}
			gone = gone[:0]
			return nil
		}
		if err != nil {
			return err
		}
		n += len(gone)
		gone = gone[:0]
		return nil
	}
	for _, d := range docs {
		var rec idemRecord
		if err := json.Unmarshal(d.Body, &rec); err != nil || !rec.Done || !d.Updated.Before(before) {
			continue
		}
		gone = append(gone, store.Doc{Kind: d.Kind, ID: d.ID, Version: d.Version})
		if len(gone) == batch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	return n, nil
}
