package space_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
	"github.com/seed72275b23/agency-go/space/spacetest"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// agent's delivery loop and every handler the suite starts must be gone once
// the spaces are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestLocal(t *testing.T) {
	t.Parallel()
	spacetest.Run(t, func(*testing.T) space.Space { return space.NewLocal() },
		spacetest.SizeLimited(64<<10, func(*testing.T) space.Space { return space.NewLocal(space.MaxMessageSize(64 << 10)) }))
}

// A wrong option is reported by NewLocal, which applies it, with an error
// that names it; making the option is no mistake yet.
func TestNewLocalRefusesAWrongOption(t *testing.T) {
	for _, n := range []int{0, -1} {
		opt := space.MaxMessageSize(n) // no panic here: only NewLocal checks
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, agency.ErrInvalidOption) || !strings.Contains(err.Error(), fmt.Sprintf("MaxMessageSize(%d)", n)) {
					t.Errorf("NewLocal(MaxMessageSize(%d)) panicked with %v, want an error matching agency.ErrInvalidOption naming the option", n, err)
				}
			}()
			space.NewLocal(opt)
		}()
	}
}

// Under a limit so small that the response_too_large error, with its
// text, is itself over it, the caller still hears at once: a short error
// that fits takes its place.
func TestTinyLimitStillAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sp := space.NewLocal(space.MaxMessageSize(220))
	defer sp.Close(context.Background())
	big, caller := agency.MustNewAgent("Big-agent-with-a-long-name"), agency.MustNewAgent("Caller")
	agency.Handle(big, "a_rather_long_action_name", func(context.Context, struct{}) (string, error) {
		return strings.Repeat("x", 1000), nil
	})
	for _, a := range []*agency.Agent{big, caller} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	_, err := agency.Call[string](ctx, caller, big.ID(), "a_rather_long_action_name", struct{}{})
	if !errors.Is(err, agency.ErrResponseTooLarge) {
		t.Fatalf("the call: %v, want response_too_large", err)
	}
}
