package spacetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// hardeningTests cover what must hold for every space however its input
// and its timing go: deadlines are honoured, required fields mean the same
// everywhere, and bad input gets a bounded answer.
var hardeningTests = []test{
	{"DeadlinePassedNotRun", testDeadlinePassedNotRun},
	{"TimeoutEveryTime", testTimeoutEveryTime},
	{"NilRequiredRefused", testNilRequiredRefused},
	{"ErrorTextBounded", testErrorTextBounded},
}

// A message whose deadline passes while it waits behind a busy action is
// not run when the agent gets to it: neither a Request whose caller timed
// out nor a Send that carries a deadline.
func testDeadlinePassedNotRun(e *env) {
	var got record[note]
	worker := e.newAgent("Worker")
	started, release := blocker(e, worker)
	handleNote(worker, &got)
	caller := e.newAgent("Caller")
	e.add(worker, caller)

	e.send(caller, worker.ID(), "wait", nil)
	receive(e.t, started, "the worker to be busy")

	ctx, cancel := context.WithTimeout(context.Background(), timeout/40)
	defer cancel()
	if _, err := caller.Request(ctx, worker.ID(), "note", textArgs{Text: "stale request"}); !errors.Is(err, agency.ErrTimeout) {
		e.t.Fatalf("Request to a busy agent: %v, want ErrTimeout", err)
	}
	deadline := time.Now().Add(timeout / 40)
	if _, err := caller.SendMessage(e.ctx(), &agency.Message{
		To: worker.ID(), Action: "note", Args: textArgs{Text: "stale send"}, Deadline: deadline,
	}); err != nil {
		e.t.Fatal(err)
	}
	<-time.After(time.Until(deadline)) // the deadline passes while the worker is busy

	close(release)
	call[bool](e, caller, worker.ID(), "note", textArgs{Text: "fresh"})
	// Messages from one sender arrive in order: the fresh note's answer
	// means the stale ones were reached before it.
	if ns := got.all(); len(ns) != 1 || ns[0].text != "fresh" {
		e.t.Errorf("the worker ran %+v; want only the fresh note (the stale ones' deadlines had passed)", ns)
	}
}

// A Request whose deadline passes gets ErrTimeout every time: whether the
// handler gives up with its context's error at that moment, or returns a
// value just after it.
func testTimeoutEveryTime(e *env) {
	const runs = 40
	worker := e.newAgent("Worker", agency.Concurrency(4))
	agency.Handle(worker, "giveUp", func(ctx context.Context, _ empty) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	agency.Handle(worker, "late", func(ctx context.Context, _ empty) (string, error) {
		<-ctx.Done()
		return "too late", nil
	})
	caller := e.newAgent("Caller")
	e.add(worker, caller)

	// The requests go four at a time, as many as the worker runs at once:
	// each still meets its deadline in its handler, in a quarter of the
	// time.
	for _, action := range []string{"giveUp", "late"} {
		var bad atomic.Int32
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := g; i < runs; i += 4 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(10+i%5*5)*time.Millisecond)
					m, err := caller.Request(ctx, worker.ID(), action, nil)
					cancel()
					if !errors.Is(err, agency.ErrTimeout) || m != nil {
						if bad.Add(1) <= 3 {
							e.t.Errorf("%s, run %d: Request returned %v, %v; want no message and ErrTimeout", action, i+1, m, err)
						}
					}
				}
			})
		}
		wg.Wait()
		if n := bad.Load(); n > 0 {
			e.t.Errorf("%s: %d of %d requests whose deadline passed did not time out", action, n, runs)
		}
	}
}

// Argument types whose required fields can hold nil.
type (
	listArgs struct {
		Items []string       `json:"items"`
		Tags  map[string]int `json:"tags"`
		Note  string         `json:"note,omitempty"`
	}
	nestedListArgs struct {
		Inner listArgs `json:"inner"`
	}
)

// A required slice or map that is nil in a typed Go value is refused as
// invalid_args, with the same text as the same arguments in their JSON
// form (where the field is null): required means present and not null,
// whichever way the arguments travel.
func testNilRequiredRefused(e *env) {
	var calls record[string]
	worker := e.newAgent("Worker")
	agency.Handle(worker, "list", func(_ context.Context, args listArgs) (int, error) {
		calls.add("list")
		return len(args.Items), nil
	})
	agency.Handle(worker, "nested", func(_ context.Context, args nestedListArgs) (int, error) {
		calls.add("nested")
		return len(args.Inner.Items), nil
	})
	caller := e.newAgent("Caller")
	e.add(worker, caller)

	for _, tc := range []struct {
		action string
		args   any
		want   []string
	}{
		{"list", listArgs{Tags: map[string]int{"a": 1}}, []string{"items: missing required field"}},
		{"list", listArgs{Items: []string{"x"}}, []string{"tags: missing required field"}},
		{"list", &listArgs{}, []string{"items: missing required field", "tags: missing required field"}},
		{"nested", nestedListArgs{Inner: listArgs{Items: []string{}}}, []string{"inner.tags: missing required field"}},
	} {
		_, err := e.request(caller, worker.ID(), tc.action, tc.args)
		typed := wantActionError(e.t, err, agency.ErrInvalidArgs, agency.TypeInvalidArgs)
		mustContain(e.t, "the error", typed.Text, tc.want...)
		raw, jerr := json.Marshal(tc.args)
		if jerr != nil {
			e.t.Fatal(jerr)
		}
		_, err = e.request(caller, worker.ID(), tc.action, json.RawMessage(raw))
		wire := wantActionError(e.t, err, agency.ErrInvalidArgs, agency.TypeInvalidArgs)
		if typed.Text != wire.Text {
			e.t.Errorf("%s(%#v):\n Go value: %q\n     JSON: %q\nwant the same error", tc.action, tc.args, typed.Text, wire.Text)
		}
	}
	// Empty, not nil, is present.
	if n := call[int](e, caller, worker.ID(), "list", listArgs{Items: []string{}, Tags: map[string]int{}}); n != 0 {
		e.t.Errorf("list with empty items = %d, want 0", n)
	}
	if got := calls.all(); len(got) != 1 {
		e.t.Errorf("the handlers ran %d times (%v), want once: for the empty, not nil, arguments", len(got), got)
	}
}

// An error names at most the first ten problems, then how many more there
// are, and its text is at most 4 KiB, however much was wrong with the
// input; and the agent answers the next request as it would have anyway.
func testErrorTextBounded(e *env) {
	const keys = 100_000
	calc := e.newAgent("Calculator")
	agency.Handle(calc, "add", add)
	caller := e.newAgent("Caller")
	e.add(calc, caller)

	var b strings.Builder
	b.WriteString(`{"a":1,"b":2`)
	for i := range keys {
		fmt.Fprintf(&b, `,"k%06d":0`, i)
	}
	b.WriteString("}")
	_, err := e.request(caller, calc.ID(), "add", json.RawMessage(b.String()))
	ae := wantActionError(e.t, err, agency.ErrInvalidArgs, agency.TypeInvalidArgs)
	if n := len(ae.Text); n > 4096 {
		e.t.Errorf("the error's text is %d bytes, want at most 4096", n)
	}
	if n := strings.Count(ae.Text, "unknown field"); n < 1 || n > 10 {
		e.t.Errorf("the error names %d unknown fields, want 1 to 10", n)
	}
	mustContain(e.t, "the error", ae.Text, "k000000: unknown field", fmt.Sprintf("… and %d more", keys-10))

	// Long names are cut too.
	long := strings.Repeat("x", 100_000)
	_, err = e.request(caller, calc.ID(), "add", json.RawMessage(`{"a":1,"b":2,"`+long+`":0}`))
	ae = wantActionError(e.t, err, agency.ErrInvalidArgs, agency.TypeInvalidArgs)
	if n := len(ae.Text); n > 4096 {
		e.t.Errorf("the error about one long name is %d bytes, want at most 4096", n)
	}

	// A handler's own error is bounded the same way.
	loud := e.newAgent("Loud")
	agency.Handle(loud, "fail", func(context.Context, empty) (bool, error) {
		return false, errors.New(strings.Repeat("a long story; ", 100_000))
	})
	story := strings.Repeat("a long story; ", 1000)
	agency.Handle(loud, "refuse", func(_ context.Context, args numArgs) (bool, error) {
		switch args.N {
		case 1:
			return false, agency.InvalidArgsf("%s", story)
		case 2:
			return false, agency.PermissionDeniedf("%s", story)
		}
		return false, agency.ActionFailedf("%s", story)
	})
	e.add(loud)
	_, err = e.request(caller, loud.ID(), "fail", nil)
	ae = wantActionError(e.t, err, agency.ErrActionFailed, agency.TypeActionFailed)
	if n := len(ae.Text); n > 4096 {
		e.t.Errorf("the handler's error reached its caller with %d bytes of text, want at most 4096", n)
	}
	// So is one made with a constructor, whose text is otherwise exactly
	// what the caller reads: it keeps its type and is cut at the end.
	for _, tc := range []struct {
		n        int
		sentinel error
		typ      agency.ErrorType
	}{
		{1, agency.ErrInvalidArgs, agency.TypeInvalidArgs},
		{2, agency.ErrPermissionDenied, agency.TypePermissionDenied},
		{3, agency.ErrActionFailed, agency.TypeActionFailed},
	} {
		_, err = e.request(caller, loud.ID(), "refuse", numArgs{N: tc.n})
		ae = wantActionError(e.t, err, tc.sentinel, tc.typ)
		if n := len(ae.Text); n > 4096 || n < 4000 {
			e.t.Errorf("%s from a constructor reached its caller with %d bytes of text, want 4000 to 4096", tc.typ, n)
		}
		if cut := strings.TrimSuffix(ae.Text, "…"); cut == ae.Text || !strings.HasPrefix(story, cut) {
			e.t.Errorf("%s from a constructor reads %.60q…%q, want the start of the text and \"…\"", tc.typ, ae.Text, ae.Text[max(len(ae.Text)-20, 0):])
		}
	}

	if v := call[float64](e, caller, calc.ID(), "add", addArgs{A: 1, B: 2}); v != 3 {
		e.t.Errorf("add(1, 2) after the bad requests = %v, want 3", v)
	}
}
