package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// IdempotencyKey is the __meta__ key of the key a handler wrapped by
// Idempotent runs once for. The coordinator sets it to the step's id.
const IdempotencyKey = "idempotency_key"

// claimTTL is how long a run holds its key without renewing the claim;
// a process that dies mid-run gives the key up after it.
const claimTTL = 30 * time.Second

// idemRecord is the stored state of one key: running (with the claim's
// end) or done (with the value or the error).
type idemRecord struct {
	Done   bool            `json:"done"`
	Until  time.Time       `json:"until,omitempty"`
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

// Idempotent wraps an action's handler so that it runs once per
// idempotency key (__meta__.idempotency_key, the step's id when the
// coordinator sends a step): a message that comes again with a key already
// done gets the stored value or error, and one that comes while the key's
// first run is under way (in any process sharing st) waits for it. The
// key, the agent and the action name the record; a message without a key
// runs h as it is.
//
//	agency.Handle(hr, "create_employee_record", plan.Idempotent(st, createEmployeeRecord))
//
// The result is recorded after h returns and before the answer is sent, so
// a process that dies in between answers the next delivery from the
// record; one that dies while h runs leaves the key to the next delivery
// once its claim, renewed while h runs, has run out (30 s): h then runs
// again. A handler whose context ends before it returns records nothing.
func Idempotent[A, R any](st store.Store, h func(context.Context, A) (R, error)) func(context.Context, A) (R, error) {
	return func(ctx context.Context, args A) (R, error) {
		var zero R
		m := agency.MessageFrom(ctx)
		a := agency.AgentFrom(ctx)
		if m == nil || a == nil {
			return h(ctx, args)
		}
		key, _ := m.Meta[IdempotencyKey].(string)
		if key == "" {
			return h(ctx, args)
		}
		idb, _ := json.Marshal([]string{a.ID(), m.Action, key})
		id := string(idb)
		rec, version, err := claim(ctx, st, id, idemRecord{Agent: a.ID(), Action: m.Action, Key: key})
		if err != nil {
			return zero, err
		}
		if rec.Done {
			if rec.Error != nil {
				return zero, &agency.ActionError{Type: rec.Error.Type, Text: rec.Error.Text}
			}
			var v R
			if err := json.Unmarshal(rec.Value, &v); err != nil {
				return zero, fmt.Errorf("plan: the stored result of %s: %w", id, err)
			}
			return v, nil
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
				r := idemRecord{Until: time.Now().Add(claimTTL), Agent: rec.Agent, Action: rec.Action, Key: key}
				body, _ := json.Marshal(r)
				if err := st.Apply(runCtx, store.Changes{Put: []store.Doc{{Kind: kindIdem, ID: id, Version: v, Body: body}}}); err == nil {
					v++
				}
			}
		}()
		value, herr := h(ctx, args)
		stop()
		version = <-renewed
		if ctx.Err() != nil {
			return value, herr
		}
		done := idemRecord{Done: true, Agent: rec.Agent, Action: rec.Action, Key: key}
		if herr != nil {
			var ae *agency.ActionError
			if !errors.As(herr, &ae) {
				ae = &agency.ActionError{Type: agency.ErrorActionFailed, Text: herr.Error()}
			}
			done.Error = &idemError{Type: ae.Type, Text: ae.Text}
		} else {
			b, err := json.Marshal(value)
			if err != nil {
				return value, err
			}
			done.Value = b
		}
		body, _ := json.Marshal(done)
		if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: kindIdem, ID: id, Version: version, Body: body}}}); err != nil {
			// Another delivery took the key over after our claim ran out:
			// its record stands. Ours is the answer to this message all the same.
			if !errors.Is(err, store.ErrConflict) {
				return zero, fmt.Errorf("plan: recording the result of %s: %w", id, err)
			}
		}
		return value, herr
	}
}

// claim returns the record of id once it is done, or claims it for a run
// and returns it with the version the claim wrote. It waits while another
// run holds the claim.
func claim(ctx context.Context, st store.Store, id string, fresh idemRecord) (idemRecord, int64, error) {
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
		if version == 0 || time.Now().After(rec.Until) {
			r := fresh
			r.Until = time.Now().Add(claimTTL)
			body, _ := json.Marshal(r)
			err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: kindIdem, ID: id, Version: version, Body: body}}})
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
