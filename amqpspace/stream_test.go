package amqpspace_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// A peer process killed in the middle of a stream: its caller's stream
// ends with ErrDisconnected once the broker sees the peer's connection go,
// not with a timeout at its deadline (peerTimeout away).
func TestStreamPeerKilled(t *testing.T) {
	ex := testExchange(t)
	bin := buildPeer(t)
	id := randomName("Streamer")
	p := startPeer(t, bin, ex, id)

	sp := newSpace(t, amqpspace.Config{Exchange: ex})
	caller := agency.MustNewAgent(randomName("Reader"))
	addAll(t, sp, caller)
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	parts := 0
	var last error
	for m, err := range caller.Stream(ctx, id, "stream", nil) {
		if err != nil {
			last = err
			break
		}
		if m.Action != agency.PartAction {
			t.Fatalf("an answer from a stream that never ends: %v", m)
		}
		if parts++; parts == 3 {
			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if parts < 3 || !errors.Is(last, amqpspace.ErrDisconnected) {
		t.Fatalf("%d parts, then %v: want 3 or more, then ErrDisconnected", parts, last)
	}
	if errors.Is(last, agency.ErrTimeout) || ctx.Err() != nil {
		t.Fatalf("the stream waited for its deadline: %v", last)
	}
}
