package agency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// lastError keeps the error the AfterAction hook saw last.
type lastError struct {
	mu  sync.Mutex
	err error
}

func (l *lastError) AfterAction(_ context.Context, _ *agency.Message, _ any, err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// A constructor's text reaches the caller as it is up to 4 KiB, and cut to
// its first 4 KiB past that, with its type; the handler's side keeps it
// whole.
func TestConstructorTextBounded(t *testing.T) {
	long := strings.Repeat("quantity must be at least 1; ", 500) // about 14 KiB
	seen := &lastError{}
	shop := agency.MustNewAgent("Shop", agency.Hooks(seen))
	agency.Handle(shop, "short", func(context.Context, struct{}) (int, error) {
		return 0, agency.InvalidArgsf("quantity must be at least 1")
	})
	agency.Handle(shop, "long", func(context.Context, struct{}) (int, error) {
		return 0, agency.InvalidArgsf("%s", long)
	})
	user := agency.MustNewAgent("User")
	joinLocal(t, shop, user)

	_, err := user.Request(callCtx(t), "Shop", "short", nil)
	if ae := asActionError(t, err, agency.TypeInvalidArgs); ae.Text != "quantity must be at least 1" {
		t.Errorf("short text %q", ae.Text)
	}
	_, err = user.Request(callCtx(t), "Shop", "long", nil)
	ae := asActionError(t, err, agency.TypeInvalidArgs)
	if !errors.Is(err, agency.ErrInvalidArgs) {
		t.Errorf("%v does not match ErrInvalidArgs", err)
	}
	if len(ae.Text) > 4096 || !strings.HasSuffix(ae.Text, "…") || !strings.HasPrefix(long, strings.TrimSuffix(ae.Text, "…")) {
		t.Errorf("the caller read %d bytes ending %q, want the text's start within 4096 bytes, ending in \"…\"", len(ae.Text), ae.Text[len(ae.Text)-10:])
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	var local *agency.ActionError
	if !errors.As(seen.err, &local) || local.Text != long {
		t.Errorf("AfterAction saw %v, want the whole text", seen.err)
	}
}
