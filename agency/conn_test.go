package agency_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// removeCounter counts BeforeRemove calls.
type removeCounter struct{ n atomic.Int32 }

func (r *removeCounter) BeforeRemove(context.Context) { r.n.Add(1) }

// A space may run the BeforeRemove hook itself, before Close; Close then
// does not run it again.
func TestConnBeforeRemoveOnce(t *testing.T) {
	for _, early := range []bool{false, true} {
		hook := &removeCounter{}
		a := agency.MustNewAgent("Leaver", agency.Hooks(hook))
		c, err := agency.Connect(a, agency.RouterFunc(func(context.Context, *agency.Message) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		c.Added(context.Background())
		if early {
			c.BeforeRemove(context.Background())
			c.BeforeRemove(context.Background())
			if n := hook.n.Load(); n != 1 {
				t.Fatalf("BeforeRemove twice ran the hook %d times, want 1", n)
			}
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := hook.n.Load(); n != 1 {
			t.Errorf("early=%v: the hook ran %d times, want 1", early, n)
		}
	}
}
