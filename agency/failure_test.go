package agency

import (
	"errors"
	"io"
	"testing"
)

func TestHandlerErrorConstructors(t *testing.T) {
	for _, tc := range []struct {
		err      error
		typ      ErrorType
		sentinel error
	}{
		{InvalidArgsf("bad %s", "n"), TypeInvalidArgs, ErrInvalidArgs},
		{PermissionDeniedf("bad %s", "n"), TypePermissionDenied, ErrPermissionDenied},
		{ActionFailedf("bad %s", "n"), TypeActionFailed, ErrActionFailed},
	} {
		ae := asActionError(tc.err)
		if ae.Type != tc.typ || ae.Text != "bad n" || !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%v: type %q text %q, want %q \"bad n\" matching %v", tc.err, ae.Type, ae.Text, tc.typ, tc.sentinel)
		}
	}
	err := ActionFailedf("reading the order: %w", io.EOF)
	if !errors.Is(err, io.EOF) || !errors.Is(err, ErrActionFailed) {
		t.Errorf("%v: a %%w operand must stay reachable with errors.Is", err)
	}
	if got := asActionError(err).Text; got != "reading the order: EOF" {
		t.Errorf("text %q", got)
	}
	// The old way, a sentinel wrapped with fmt.Errorf, loses its doubled prefix.
	if got := asActionError(errors.Join(ErrInvalidArgs)).Text; got != ErrInvalidArgs.Error() {
		t.Errorf("a bare sentinel reads %q", got)
	}
}
