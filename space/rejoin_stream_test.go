package space_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// An agent that left and joined again under the same id gets the parts
// of the streams it asks for: the responder's router, which remembers the
// Conn it last delivered to, does not hand them to the Conn that left
// (which would drop them, and the stream would fail with a gap).
func TestStreamAfterRejoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	w := agency.MustNewAgent("Writer")
	agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
		if err := agency.Emit(ctx, "It "); err != nil {
			return "", err
		}
		return "It rains.", nil
	})
	if err := sp.Add(ctx, w); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		c := agency.MustNewAgent("Caller")
		if err := sp.Add(ctx, c); err != nil {
			t.Fatal(err)
		}
		var got []string
		for m, err := range c.Stream(ctx, "Writer", "write", nil) {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			v, _ := agency.Value[string](m)
			got = append(got, v)
		}
		if len(got) != 2 || got[0] != "It " || got[1] != "It rains." {
			t.Errorf("round %d: %q", round, got)
		}
		if err := sp.Remove(ctx, "Caller"); err != nil {
			t.Fatal(err)
		}
	}
}
