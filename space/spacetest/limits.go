package spacetest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// Option configures Run, which fails the test on one with a wrong value.
type Option func(*options) error

type options struct {
	limit        int
	limitedSpace func(t *testing.T) space.Space
	// otherDialects: see OtherDialects.
	otherDialects bool
}

// OtherDialects tells the suite that the space may carry agents of
// another library, which do not speak agency-go's wire (amqpspace with
// Config.Interop set): a stream stopped before any part came then tells
// the responder nothing, since only a part shows that it speaks streams,
// and the suite checks that instead of the handler's context ending.
func OtherDialects() Option {
	return func(o *options) error {
		o.otherDialects = true
		return nil
	}
}

// SizeLimited gives the suite a space whose message size limit is limit
// bytes (of a message's encoding), made by newSpace, for the tests of what
// happens at the limit: a response over it reaches its caller at once as
// an error of type response_too_large. The other tests use Run's own
// constructor. Without SizeLimited, the Limits tests are skipped with a
// note. limit must be positive and newSpace not nil.
func SizeLimited(limit int, newSpace func(t *testing.T) space.Space) Option {
	return func(o *options) error {
		if limit <= 0 {
			return fmt.Errorf("spacetest: %w: SizeLimited(%d, …): the limit must be positive", agency.ErrInvalidOption, limit)
		}
		if newSpace == nil {
			return fmt.Errorf("spacetest: %w: SizeLimited(%d, nil): give the constructor of a space with that limit", agency.ErrInvalidOption, limit)
		}
		o.limit, o.limitedSpace = limit, newSpace
		return nil
	}
}

// limitsTests run on the space that SizeLimited makes.
var limitsTests = []test{
	{"ResponseTooLarge", testResponseTooLarge},
	{"PartTooLarge", testPartTooLarge},
}

// sizeInText finds the "N bytes" in an error text.
var sizeInText = regexp.MustCompile(`(\d+) bytes`)

// A handler's value too large to send reaches its caller at once as a
// response_too_large error that names the size and the limit, instead of
// leaving the caller waiting for a response that never comes; and the
// agent goes on answering.
func testResponseTooLarge(e *env) {
	big := e.newAgent("Big")
	agency.Handle(big, "big", func(context.Context, empty) (string, error) {
		return strings.Repeat("x", e.limit), nil // its encoding is over the limit
	})
	agency.Handle(big, "small", func(context.Context, empty) (string, error) {
		return "ok", nil
	})
	caller := e.newAgent("Caller")
	e.add(big, caller)

	// The safety net is the only deadline: a caller left waiting fails
	// with a timeout after it.
	_, err := e.request(caller, big.ID(), "big", nil)
	ae := wantActionError(e.t, err, agency.ErrResponseTooLarge, agency.TypeResponseTooLarge)
	mustContain(e.t, "the error", ae.Text, strconv.Itoa(e.limit))
	if m := sizeInText.FindStringSubmatch(ae.Text); m == nil {
		e.t.Errorf("the error %q names no size (\"N bytes\")", ae.Text)
	} else if n, _ := strconv.Atoi(m[1]); n <= e.limit {
		e.t.Errorf("the error %q names a size of %d bytes, want one over the limit, %d", ae.Text, n, e.limit)
	}

	if got := call[string](e, caller, big.ID(), "small", nil); got != "ok" {
		e.t.Errorf("small after the large response = %q, want \"ok\"", got)
	}
}

// A part too large to send fails the handler's Emit at once with an
// error matching ErrMessageTooLarge, so the handler can split it or give
// up; nothing of it reaches the caller, whose stream goes on with the
// next part and the answer, numbered without a gap.
func testPartTooLarge(e *env) {
	emitted := make(chan error, 1)
	w := e.newAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ empty) (string, error) {
		if err := agency.Emit(ctx, "p1"); err != nil {
			return "", err
		}
		emitted <- agency.Emit(ctx, strings.Repeat("x", e.limit))
		if err := agency.Emit(ctx, "p2"); err != nil {
			return "", err
		}
		return "done", nil
	})
	caller := e.newAgent("Reader")
	e.add(w, caller)
	s := drain(e, caller.Stream(e.ctx(), w.ID(), "write", nil))
	if err := <-emitted; !errors.Is(err, agency.ErrMessageTooLarge) {
		e.t.Errorf("Emit of a part over the limit: %v, want an error matching ErrMessageTooLarge", err)
	}
	if s.err != nil {
		e.t.Fatalf("stream: %v (after parts %q)", s.err, s.parts)
	}
	wantInOrder(e, s)
	if len(s.parts) != 2 || s.answer == nil || value[string](e.t, s.answer) != "done" || s.answer.Seq != 2 {
		e.t.Fatalf("parts %q and answer %v, want p1, p2 and \"done\" counting 2 parts", s.parts, s.answer)
	}
}
