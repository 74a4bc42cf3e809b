package agency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// StreamSent tells when the request has gone, before the answer: the
// handler here waits until it has been told; and it tells an absent
// recipient's error, which the loop yields too.
func TestStreamSent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	release := make(chan struct{})
	w := agency.MustNewAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		if err := agency.Emit(ctx, "It "); err != nil {
			return "", err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "It rains.", nil
	})
	caller := agency.MustNewAgent("Caller")
	for _, a := range []*agency.Agent{w, caller} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	calls := 0
	var got []string
	for m, err := range caller.Stream(ctx, "Writer", "write", nil, agency.StreamSent(func(err error) {
		calls++
		if err != nil {
			t.Errorf("StreamSent: %v, want nil", err)
		}
		close(release) // the answer can come only after this
	})) {
		if err != nil {
			t.Fatal(err)
		}
		v, _ := agency.Value[string](m)
		got = append(got, v)
	}
	if calls != 1 || len(got) != 2 || got[1] != "It rains." {
		t.Errorf("StreamSent called %d times; the loop yielded %q", calls, got)
	}

	var sentErr error
	calls = 0
	for _, err := range caller.Stream(ctx, "Nobody", "write", nil, agency.StreamSent(func(err error) { calls++; sentErr = err })) {
		if !errors.Is(err, agency.ErrNoRecipient) {
			t.Errorf("the loop yielded %v, want ErrNoRecipient", err)
		}
	}
	if calls != 1 || !errors.Is(sentErr, agency.ErrNoRecipient) {
		t.Errorf("StreamSent called %d times with %v, want once with ErrNoRecipient", calls, sentErr)
	}
}

// answerHook takes the answers nobody waits for.
type answerHook struct{ got chan string }

func (h answerHook) HandleActionValue(_ context.Context, m *agency.Message) {
	v, _ := agency.Value[string](m)
	h.got <- v
}

// With StreamCancel(false), a caller that stops early leaves the
// responder alone: its action runs on, its context not cancelled, and its
// answer reaches the caller's ValueHandler.
func TestStreamCancelOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	started, release := make(chan struct{}), make(chan struct{})
	w := agency.MustNewAgent("Worker")
	agency.Handle(w, "work", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-release
		if err := ctx.Err(); err != nil {
			return "", err
		}
		return "done", nil
	})
	hook := answerHook{got: make(chan string, 1)}
	caller := agency.MustNewAgent("Caller", agency.Hooks(hook))
	for _, a := range []*agency.Agent{w, caller} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	sctx, stop := context.WithCancel(ctx)
	go func() { <-started; stop() }()
	for _, err := range caller.Stream(sctx, "Worker", "work", nil, agency.StreamCancel(false)) {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the stopped loop yielded %v", err)
		}
	}
	close(release)
	select {
	case v := <-hook.got:
		if v != "done" {
			t.Errorf("the answer: %q", v)
		}
	case <-ctx.Done():
		t.Fatal("no answer reached the ValueHandler")
	}
}
