package spacetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// streamTests cover answers streamed in parts (agency.Emit, Agent.Stream):
// order, the answer after the parts, callers that did not ask, gaps, a
// caller that falls behind, and a caller that stops.
var streamTests = []test{
	{"Parts", testStreamParts},
	{"ManyParts", testStreamManyParts},
	{"PlainCallerGetsNoParts", testStreamPlainCaller},
	{"ErrorAfterParts", testStreamErrorAfterParts},
	{"Gap", testStreamGap},
	{"GapAtEnd", testStreamGapAtEnd},
	{"Overflow", testStreamOverflow},
	{"Break", testStreamBreak},
	{"ContextCancelled", testStreamContextCancelled},
	{"CancelledBeforeFirstPart", testStreamCancelledBeforeFirstPart},
	{"StoppedBeforeAnyPart", testStreamStoppedBeforeAnyPart},
}

// streamed is what a stream yielded: its parts' values and numbers, and
// how it ended.
type streamed struct {
	parts  []string
	seqs   []uint32
	answer *agency.Message
	err    error
}

// drain reads a whole stream.
func drain(e *env, seq func(yield func(*agency.Message, error) bool)) streamed {
	e.t.Helper()
	var s streamed
	for m, err := range seq {
		if err != nil {
			s.err = err
			break
		}
		if m.Action == agency.PartAction {
			s.parts = append(s.parts, value[string](e.t, m))
			s.seqs = append(s.seqs, m.Seq)
			continue
		}
		if s.answer != nil {
			e.t.Fatalf("a second answer: %v", m)
		}
		s.answer = m
	}
	return s
}

// wantInOrder checks that parts are numbered 1, 2, … and carry "p1", "p2", ….
func wantInOrder(e *env, s streamed) {
	e.t.Helper()
	for i, p := range s.parts {
		if want := fmt.Sprintf("p%d", i+1); p != want || s.seqs[i] != uint32(i+1) {
			e.t.Fatalf("part %d is %q numbered %d, want %q numbered %d (parts %q)", i, p, s.seqs[i], want, i+1, s.parts)
		}
	}
}

// writer returns an agent whose action "write" emits n parts, "p1" to
// "pn", and answers "done".
func (e *env) writer(n int) *agency.Agent {
	w := e.newAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		for i := range n {
			if err := agency.Emit(ctx, fmt.Sprintf("p%d", i+1)); err != nil {
				return "", err
			}
		}
		return "done", nil
	})
	return w
}

// The parts come in order, numbered from 1, each from the responder with
// the request's id as its parent, and then the answer, which counts them.
func testStreamParts(e *env) {
	w := e.writer(3)
	caller := e.newAgent("Reader")
	e.add(w, caller)
	req := &agency.Message{To: w.ID(), Action: "write"}
	var s streamed
	for m, err := range caller.StreamMessage(e.ctx(), req) {
		if err != nil {
			e.t.Fatalf("stream: %v", err)
		}
		if m.From != w.ID() || m.To != caller.ID() || m.ParentID != req.ID {
			e.t.Errorf("%v: want it from %s to %s with parent_id %s", m, w.ID(), caller.ID(), req.ID)
		}
		if m.Action == agency.PartAction {
			s.parts = append(s.parts, value[string](e.t, m))
			s.seqs = append(s.seqs, m.Seq)
			continue
		}
		s.answer = m
	}
	wantInOrder(e, s)
	if len(s.parts) != 3 {
		e.t.Fatalf("parts %q, want 3", s.parts)
	}
	if s.answer == nil || s.answer.Action != agency.ResponseAction || value[string](e.t, s.answer) != "done" {
		e.t.Fatalf("answer %v, want a [response] \"done\" after the parts", s.answer)
	}
	if s.answer.Seq != 3 {
		e.t.Errorf("the answer counts %d parts, want 3", s.answer.Seq)
	}
}

// A thousand parts, in order.
func testStreamManyParts(e *env) {
	w := e.writer(1000)
	caller := e.newAgent("Reader")
	e.add(w, caller)
	s := drain(e, caller.Stream(e.ctx(), w.ID(), "write", nil))
	if s.err != nil {
		e.t.Fatalf("stream: %v (after %d parts)", s.err, len(s.parts))
	}
	wantInOrder(e, s)
	if len(s.parts) != 1000 || s.answer == nil {
		e.t.Fatalf("%d parts and answer %v, want 1000 and the answer", len(s.parts), s.answer)
	}
}

// A caller that did not ask for parts (Request, Call) gets the answer
// alone, and the handler's Emit sends nothing and returns nil.
func testStreamPlainCaller(e *env) {
	emitted := make(chan error, 1)
	w := e.newAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		signal(emitted, agency.Emit(ctx, "p1"))
		return "done", nil
	})
	caller := e.newAgent("Plain")
	e.add(w, caller)
	if got := call[string](e, caller, w.ID(), "write", nil); got != "done" {
		e.t.Fatalf("Call: %q, want done", got)
	}
	if err := receive(e.t, emitted, "Emit's result"); err != nil {
		e.t.Fatalf("Emit for a caller that asked for no parts: %v, want nil", err)
	}
	// Nothing else reached the caller: the next answer on the same path
	// is the next request's.
	m, err := e.request(caller, w.ID(), "write", nil)
	if err != nil || m.Action != agency.ResponseAction || m.Seq != 0 {
		e.t.Fatalf("second request: %v, %v; want a [response] counting no parts", m, err)
	}
}

// An action that fails after some parts: the parts, then its error.
func testStreamErrorAfterParts(e *env) {
	w := e.newAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		if err := agency.Emit(ctx, "p1"); err != nil {
			return "", err
		}
		return "", errors.New("out of ink")
	})
	caller := e.newAgent("Reader")
	e.add(w, caller)
	s := drain(e, caller.Stream(e.ctx(), w.ID(), "write", nil))
	wantInOrder(e, s)
	if len(s.parts) != 1 || s.answer != nil {
		e.t.Fatalf("parts %q, answer %v: want one part and no answer", s.parts, s.answer)
	}
	wantActionError(e.t, s.err, agency.ErrActionFailed, agency.TypeActionFailed)
}

// A part that comes with a number past the next one (here, part 2 lost on
// the way) fails the stream with ErrStreamGap after part 1: never passed
// over. The responder is told to stop.
func testStreamGap(e *env) {
	stopped := make(chan error, 1)
	w := e.newAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		if err := agency.Emit(ctx, "p1"); err != nil {
			return "", err
		}
		in := agency.MessageFrom(ctx)
		// Part 3, as if part 2 had been lost.
		forged := &agency.Message{To: in.From, ParentID: in.ID, Action: agency.PartAction, Seq: 3, Args: "p3"}
		if _, err := agency.AgentFrom(ctx).SendMessage(ctx, forged); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
			signal(stopped, agency.Emit(ctx, "late"))
		case <-e.stop:
		}
		return "done", nil
	})
	caller := e.newAgent("Reader")
	e.add(w, caller)
	s := drain(e, caller.Stream(e.ctx(), w.ID(), "write", nil))
	wantInOrder(e, s)
	if len(s.parts) != 1 || !errors.Is(s.err, agency.ErrStreamGap) {
		e.t.Fatalf("parts %q, error %v: want p1, then ErrStreamGap", s.parts, s.err)
	}
	if err := receive(e.t, stopped, "the writer's context to end"); !errors.Is(err, agency.ErrStreamClosed) {
		e.t.Errorf("Emit after the caller stopped: %v, want ErrStreamClosed", err)
	}
}

// An answer that counts more parts than came (the last one lost) fails
// the stream with ErrStreamGap instead of the answer.
func testStreamGapAtEnd(e *env) {
	w := e.newAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		if err := agency.Emit(ctx, "p1"); err != nil {
			return "", err
		}
		in := agency.MessageFrom(ctx)
		// An answer, as if part 2 had been lost on the way: the first, so
		// the one the caller reads.
		forged := &agency.Message{To: in.From, ParentID: in.ID, Action: agency.ResponseAction, Seq: 2, Args: "done"}
		_, err := agency.AgentFrom(ctx).SendMessage(ctx, forged)
		return "done", err
	})
	caller := e.newAgent("Reader")
	e.add(w, caller)
	s := drain(e, caller.Stream(e.ctx(), w.ID(), "write", nil))
	if len(s.parts) != 1 || s.answer != nil || !errors.Is(s.err, agency.ErrStreamGap) {
		e.t.Fatalf("parts %q, answer %v, error %v: want p1, then ErrStreamGap", s.parts, s.answer, s.err)
	}
}

// A caller that falls behind: parts past its buffer are not held. It reads
// those in the buffer, in order, then ErrStreamOverflow; the responder is
// told to stop.
func testStreamOverflow(e *env) {
	const n, buffer = 20, 4
	emitted := make(chan struct{}, 1)
	stopped := make(chan error, 1)
	w := e.newAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		for i := range n {
			if err := agency.Emit(ctx, fmt.Sprintf("p%d", i+1)); err != nil {
				return "", err
			}
		}
		signal(emitted, struct{}{})
		select {
		case <-ctx.Done():
			signal(stopped, agency.Emit(ctx, "late"))
		case <-e.stop:
		}
		return "done", nil
	})
	caller := e.newAgent("Slow")
	e.add(w, caller)
	var s streamed
	for m, err := range caller.Stream(e.ctx(), w.ID(), "write", nil, agency.StreamBuffer(buffer)) {
		if err != nil {
			s.err = err
			break
		}
		if len(s.parts) == 0 {
			receive(e.t, emitted, "the writer to emit every part") // the caller falls behind
		}
		s.parts = append(s.parts, value[string](e.t, m))
		s.seqs = append(s.seqs, m.Seq)
	}
	wantInOrder(e, s)
	if len(s.parts) < buffer || len(s.parts) > buffer+1 || !errors.Is(s.err, agency.ErrStreamOverflow) {
		e.t.Fatalf("parts %q, error %v: want %d or %d parts, then ErrStreamOverflow", s.parts, s.err, buffer, buffer+1)
	}
	if err := receive(e.t, stopped, "the writer's context to end"); !errors.Is(err, agency.ErrStreamClosed) {
		e.t.Errorf("Emit after the caller stopped: %v, want ErrStreamClosed", err)
	}
}

// stopper returns an agent whose action emits parts until its context
// ends, and then reports the error of one more Emit on stopped. With
// first, it says it runs on running and waits for first to close before
// its first part.
func (e *env) stopper(first <-chan struct{}, running chan struct{}, stopped chan error) *agency.Agent {
	w := e.newAgent("Endless")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		if first != nil {
			signal(running, struct{}{})
			select {
			case <-first:
			case <-e.stop:
				return "", nil
			}
		}
		for i := 0; ; i++ {
			if ctx.Err() != nil {
				signal(stopped, agency.Emit(ctx, "late"))
				return "", ctx.Err()
			}
			if err := agency.Emit(ctx, fmt.Sprintf("p%d", i+1)); err != nil {
				<-ctx.Done() // Emit failed because the caller stopped: so must the context
				signal(stopped, err)
				return "", err
			}
			select {
			case <-ctx.Done():
			case <-e.stop:
				return "", nil
			case <-time.After(time.Millisecond): // a part now and then, not a flood
			}
		}
	})
	return w
}

// A caller that breaks out of its loop stops the responder: its context
// ends and its Emit fails.
func testStreamBreak(e *env) {
	stopped := make(chan error, 1)
	w := e.stopper(nil, nil, stopped)
	caller := e.newAgent("Reader")
	e.add(w, caller)
	var s streamed
	for m, err := range caller.Stream(e.ctx(), w.ID(), "write", nil) {
		if err != nil {
			e.t.Fatalf("stream: %v", err)
		}
		s.parts = append(s.parts, value[string](e.t, m))
		s.seqs = append(s.seqs, m.Seq)
		if len(s.parts) == 3 {
			break
		}
	}
	wantInOrder(e, s)
	if err := receive(e.t, stopped, "the writer's context to end"); !errors.Is(err, agency.ErrStreamClosed) {
		e.t.Errorf("Emit after the caller stopped: %v, want ErrStreamClosed", err)
	}
}

// A caller whose context is cancelled gets context.Canceled, and the
// responder stops.
func testStreamContextCancelled(e *env) {
	stopped := make(chan error, 1)
	w := e.stopper(nil, nil, stopped)
	caller := e.newAgent("Reader")
	e.add(w, caller)
	ctx, cancel := context.WithCancel(e.ctx())
	defer cancel()
	var s streamed
	for m, err := range caller.Stream(ctx, w.ID(), "write", nil) {
		if err != nil {
			s.err = err
			break
		}
		s.parts = append(s.parts, value[string](e.t, m))
		s.seqs = append(s.seqs, m.Seq)
		if len(s.parts) == 2 {
			cancel()
		}
	}
	wantInOrder(e, s)
	if !errors.Is(s.err, context.Canceled) {
		e.t.Fatalf("error %v, want context.Canceled", s.err)
	}
	if err := receive(e.t, stopped, "the writer's context to end"); !errors.Is(err, agency.ErrStreamClosed) {
		e.t.Errorf("Emit after the caller stopped: %v, want ErrStreamClosed", err)
	}
}

// A caller that stops before the first part came: the responder is told
// when that part comes.
func testStreamCancelledBeforeFirstPart(e *env) {
	first := make(chan struct{})
	stopped := make(chan error, 1)
	running := make(chan struct{}, 1)
	w := e.stopper(first, running, stopped)
	caller := e.newAgent("Reader")
	e.add(w, caller)
	ctx, cancel := context.WithCancel(e.ctx())
	go func() {
		select {
		case <-running:
		case <-e.stop:
		}
		cancel()
	}()
	var n int
	var last error
	for m, err := range caller.Stream(ctx, w.ID(), "write", nil) {
		if err == nil {
			e.t.Fatalf("a part before the first: %v", m)
		}
		last = err
		n++
	}
	if n != 1 || !errors.Is(last, context.Canceled) {
		e.t.Fatalf("%d results, last %v: want context.Canceled alone", n, last)
	}
	close(first)
	if err := receive(e.t, stopped, "the writer's context to end"); !errors.Is(err, agency.ErrStreamClosed) {
		e.t.Errorf("Emit after the caller stopped: %v, want ErrStreamClosed", err)
	}
}

// A stream stopped before any part came cancels the handler's context,
// though the handler has sent no part and may never send one: every agent
// of the space speaks agency-go's wire, so the caller tells the responder
// at once. On a space that may carry agents of another library
// (OtherDialects), a [cancel] goes only to a responder that has sent a
// part (an agent of another library could take it for a request): the
// handler's context lives on, as a later request along the same path,
// handled beside it, finds.
func testStreamStoppedBeforeAnyPart(e *env) {
	running := make(chan context.Context, 1)
	ended := make(chan error, 1)
	w := e.newAgent("Silent", agency.Concurrency(2))
	agency.Handle(w, "wait", func(ctx context.Context, _ struct{}) (string, error) {
		signal(running, ctx)
		select {
		case <-ctx.Done():
			signal(ended, ctx.Err())
			return "", ctx.Err()
		case <-e.stop:
			return "", nil
		}
	})
	waiting := make(chan context.Context, 1)
	agency.Handle(w, "alive", func(context.Context, struct{}) (bool, error) {
		ctx := <-waiting
		return ctx.Err() == nil, nil
	})
	caller := e.newAgent("Reader")
	e.add(w, caller)
	ctx, cancel := context.WithCancel(e.ctx())
	defer cancel()
	go func() {
		select {
		case hctx := <-running:
			waiting <- hctx
		case <-e.stop:
		}
		cancel()
	}()
	var n int
	var last error
	for m, err := range caller.Stream(ctx, w.ID(), "wait", nil) {
		if err == nil {
			e.t.Fatalf("a part or an answer from a handler that sends none: %v", m)
		}
		last, n = err, n+1
	}
	if n != 1 || !errors.Is(last, context.Canceled) {
		e.t.Fatalf("%d results, last %v: want context.Canceled alone", n, last)
	}
	if e.otherDialects {
		// A [cancel], had one been sent, came before this request, and
		// was acted on when it came.
		if !call[bool](e, caller, w.ID(), "alive", nil) {
			e.t.Fatal("the handler's context ended, though the space may carry agents of another library and no part came")
		}
		return
	}
	if err := receive(e.t, ended, "the handler's context to end"); !errors.Is(err, context.Canceled) {
		e.t.Errorf("the handler's context ended with %v, want context.Canceled", err)
	}
}
