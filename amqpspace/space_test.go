package amqpspace_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
	"github.com/seed72275b23/agency-go/space/spacetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	spacetest.Run(t, func(t *testing.T) space.Space {
		return newSpace(t, amqpspace.Config{})
	}, spacetest.SizeLimited(64<<10, func(t *testing.T) space.Space {
		return newSpace(t, amqpspace.Config{MaxMessageSize: 64 << 10})
	}))
}

// An Add that overlaps Close either fails with ErrClosed or lets in an
// agent that Close then takes out: none is left behind, still in use.
func TestAddDuringClose(t *testing.T) {
	ex := testExchange(t)
	for i := range 20 {
		s, err := amqpspace.New(context.Background(), amqpspace.Config{URL: brokerURL(t), Exchange: ex})
		if err != nil {
			t.Fatal(err)
		}
		a := agency.MustNewAgent(randomName("Late"))
		added := make(chan error, 1)
		go func() { added <- s.Add(context.Background(), a) }()
		// Close at varied points of Add's work with the broker.
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-added; err != nil && !errors.Is(err, amqpspace.ErrClosed) {
			t.Fatalf("Add during Close: %v, want nil or ErrClosed", err)
		}
		// Whatever Add said, the agent is free to join another space.
		local := space.NewLocal()
		if err := local.Add(context.Background(), a); err != nil {
			t.Fatalf("the agent is still held by the closed space: %v", err)
		}
		_ = local.Close(context.Background())
	}
}

// Two Removes of one agent at once: both return when it is out, and the
// removal runs once.
func TestConcurrentRemove(t *testing.T) {
	logs := newLogRecorder()
	s := newSpace(t, amqpspace.Config{Logger: slog.New(logs)})
	a := agency.MustNewAgent(randomName("Twice"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.Add(ctx, a); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- s.Remove(ctx, a.ID()) }()
	}
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, space.ErrUnknownAgent) {
			t.Errorf("Remove: %v", err)
		}
	}
	for {
		select {
		case m := <-logs.msgs:
			t.Errorf("logged during the removal: %s", m)
			continue
		default:
		}
		break
	}
}
