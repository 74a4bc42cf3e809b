package driver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/driver"
)

// A Conn the space holds is attached in place and works as one Connect
// makes; attaching it again, or attaching an agent twice, is refused.
func TestConnInPlace(t *testing.T) {
	ctx := context.Background()
	sent := make(chan *agency.Message, 1)
	route := driver.RouterFunc(func(_ context.Context, m *agency.Message) error {
		sent <- m
		return nil
	})
	a := agency.MustNewAgent("Echo")
	agency.Handle(a, "echo", func(_ context.Context, args struct {
		N int `json:"n"`
	}) (int, error) {
		return args.N, nil
	})
	var held struct {
		other int
		conn  driver.Conn
	}
	if err := held.conn.Connect(a, route); err != nil {
		t.Fatal(err)
	}
	if held.conn.Agent() != a {
		t.Fatalf("the Conn's agent is %v", held.conn.Agent())
	}
	if _, err := driver.Connect(a, route); !errors.Is(err, agency.ErrAlreadyAdded) {
		t.Fatalf("a second Connect of the agent: %v, want ErrAlreadyAdded", err)
	}
	held.conn.Added(ctx)
	if err := held.conn.Deliver(&agency.Message{To: "Echo", From: "X", ID: "1", Action: "echo", Args: map[string]any{"n": 7}}); err != nil {
		t.Fatal(err)
	}
	r := <-sent
	if r.Action != agency.ResponseAction || r.ParentID != "1" || r.To != "X" {
		t.Fatalf("the response is %v", r)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Connect of a connected Conn did not panic")
			}
		}()
		_ = held.conn.Connect(agency.MustNewAgent("Other"), route)
	}()
	if err := held.conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.conn.Deliver(&agency.Message{To: "Echo", From: "X", ID: "2", Action: "echo", NoReply: true}); !errors.Is(err, agency.ErrNoRecipient) {
		t.Fatalf("Deliver after Close: %v, want ErrNoRecipient", err)
	}
	// The agent is free again.
	c, err := driver.Connect(a, route)
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.CloseAll(ctx, []*driver.Conn{c}); err != nil {
		t.Fatal(err)
	}
}

func TestConnectNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Connect with a nil Router did not panic")
		}
	}()
	_, _ = driver.Connect(agency.MustNewAgent("A"), nil)
}
