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
