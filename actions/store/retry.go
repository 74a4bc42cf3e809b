package store

import (
	"context"
	"errors"
)

// Retries is how often ApplyRetrying builds and applies a change again
// after ErrConflict: enough for a handful of writers of one document to
// each get through, few enough that a document changed without end
// fails the caller instead of holding it.
const Retries = 16

// ApplyRetrying is the read-decide-write loop of a compare-and-set store:
// it calls build, which reads what it needs from st and returns the
// Changes it decides on, and applies them; when another writer got there
// first (ErrConflict), it calls build again, on a fresh read, up to
// Retries times, then returns the last ErrConflict. An error of build, or
// of Apply other than ErrConflict, is returned as it is, and so is the
// context's error once ctx ends. build may be called several times and
// must decide from what it reads, not from what an earlier call saw.
func ApplyRetrying(ctx context.Context, st Store, build func(ctx context.Context) (Changes, error)) error {
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := build(ctx)
		if err != nil {
			return err
		}
		err = st.Apply(ctx, c)
		if errors.Is(err, ErrConflict) && try < Retries {
			continue
		}
		return err
	}
}
