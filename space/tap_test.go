package space_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A tap sees each message an agent sends, requests, responses and
// broadcasts alike, once, until it is removed.
func TestTap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	calc := agency.MustNewAgent("Calculator")
	agency.Handle(calc, "add", func(ctx context.Context, args struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}) (float64, error) {
		return args.A + args.B, nil
	})
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{calc, user} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var seen []string
	untap := sp.Tap(func(m *agency.Message) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.From+">"+m.To+":"+m.Action)
	})
	if _, err := agency.Call[float64](ctx, user, "Calculator", "add", map[string]int{"a": 1, "b": 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := agency.Survey(ctx, user); err != nil {
		t.Fatal(err)
	}
	untap()
	untap() // a second call changes nothing
	if _, err := agency.Call[float64](ctx, user, "Calculator", "add", map[string]int{"a": 1, "b": 2}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{
		"User>Calculator:add":        1,
		"Calculator>User:[response]": 2, // add's answer, then help's
		"User>*:help":                1,
	}
	got := map[string]int{}
	for _, s := range seen {
		got[s]++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("tap saw %q %d times, want %d; saw %q", k, got[k], n, seen)
		}
	}
}
