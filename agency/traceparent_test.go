package agency

import (
	"context"
	"testing"
)

func TestValidTraceparent(t *testing.T) {
	for tp, want := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":       true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra": false, // version 00 has nothing after the flags
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":       false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01":       false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01":       false,
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01":       false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0":        false,
		"": false,
	} {
		if got := validTraceparent(tp); got != want {
			t.Errorf("validTraceparent(%q) = %v, want %v", tp, got, want)
		}
	}
}

func TestCarryTrace(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := WithTraceparent(context.Background(), tp)
	if WithTraceparent(context.Background(), "nonsense") != context.Background() {
		t.Error("an invalid traceparent changed the context")
	}
	meta := map[string]any{"thoughts": "x"}
	m := &Message{Meta: meta}
	(&Agent{settings: defaultSettings}).carryTrace(ctx, m)
	if m.Meta[TraceparentKey] != tp || m.Meta["thoughts"] != "x" {
		t.Errorf("meta %v", m.Meta)
	}
	if _, ok := meta[TraceparentKey]; ok {
		t.Error("the caller's meta map was written to")
	}
	// A traceparent the sender gave in Meta is kept.
	m = &Message{Meta: map[string]any{TraceparentKey: "mine"}}
	(&Agent{settings: defaultSettings}).carryTrace(ctx, m)
	if m.Meta[TraceparentKey] != "mine" {
		t.Errorf("meta %v", m.Meta)
	}
}
