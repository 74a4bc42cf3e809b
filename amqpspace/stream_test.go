package amqpspace_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// A peer process killed in the middle of a stream: its caller's stream
// ends with ErrDisconnected once the broker sees the peer's connection go,
// not with a timeout at its deadline (peerTimeout away). So does a second
// stream, whose request waits in the peer's queue behind the first (the
// peer's agent runs one action at a time); the two share one watch.
func TestStreamPeerKilled(t *testing.T) {
	t.Parallel()
	ex := testExchange(t)
	bin := buildPeer(t)
	id := randomName("Streamer")
	p := startPeer(t, bin, ex, id)

	sp := newSpace(t, amqpspace.Config{Exchange: ex})
	first, second := agency.MustNewAgent(randomName("Reader")), agency.MustNewAgent(randomName("Waiter"))
	addAll(t, sp, first, second)
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	type result struct {
		parts int
		err   error
	}
	results := make(chan result, 2)
	read := func(c *agency.Agent, started chan<- struct{}) {
		var r result
		for m, err := range c.Stream(ctx, id, "stream", nil) {
			if err != nil {
				r.err = err
				break
			}
			if m.Action != agency.PartAction {
				r.err = fmt.Errorf("an answer from a stream that never ends: %v", m)
				break
			}
			if r.parts++; r.parts == 3 {
				close(started)
			}
		}
		results <- r
	}
	started := make(chan struct{})
	go read(first, started)
	select {
	case <-started:
	case r := <-results:
		t.Fatalf("the stream ended before its third part: %d parts, %v", r.parts, r.err)
	}
	go read(second, make(chan struct{}))
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := <-results
		if !errors.Is(r.err, amqpspace.ErrDisconnected) || errors.Is(r.err, agency.ErrTimeout) {
			t.Errorf("%d parts, then %v: want ErrDisconnected, not a wait for the deadline", r.parts, r.err)
		}
	}
}

// A caller that never asks for parts, on the wire, gets none: an
// operand/agency agent (in the Python-compatible mode) and an agent of an
// earlier release (this library's shape, without __meta__.stream) calling
// an action that emits parts get its answer alone, as their next message.
func TestNoPartsUnasked(t *testing.T) {
	for _, mode := range []amqpspace.Interop{"", amqpspace.InteropOperandAgency} {
		t.Run("mode="+string(mode), func(t *testing.T) {
			ex := testExchange(t)
			sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: mode})
			w := agency.MustNewAgent(randomName("Writer"))
			agency.Handle(w, "write", func(ctx context.Context, _ struct{}) (string, error) {
				for _, p := range []string{"It ", "rains."} {
					if err := agency.Emit(ctx, p); err != nil {
						return "", err
					}
				}
				return "It rains.", nil
			})
			addAll(t, sp, w)
			probe := newProbe(t, ex)
			for i := range 2 {
				id := fmt.Sprintf("old-%d", i)
				var body []byte
				if mode == amqpspace.InteropOperandAgency {
					body = pyMessage(fmt.Sprintf(`{"id": %q}`, id), probe.id, w.ID(), `{"name": "write", "args": {}}`)
				} else {
					body = fmt.Appendf(nil, `{"to": %q, "from": %q, "action": {"__meta__": {"id": %q}, "write": {}}}`, w.ID(), probe.id, id)
				}
				probe.publish(w.ID(), body, kombuProperties)
				d := probe.next()
				if strings.Contains(string(d.Body), agency.PartAction) || !strings.Contains(string(d.Body), agency.ResponseAction) || !strings.Contains(string(d.Body), id) {
					t.Fatalf("request %s: the next message is %s; want its [response] alone", id, d.Body)
				}
			}
		})
	}
}

// What a stream's caller that stops before any part sends its responder,
// as the responder's queue sees it: a [cancel] at once on an exchange of
// agency-go agents alone; nothing in the Python-compatible mode (an
// operand/agency agent would take a [cancel] for a request and answer it
// with an error), where only a part shows that the responder speaks
// streams. A bare client plays the responder, which sends no part; the
// caller's next message comes next.
func TestStreamStopBeforePartOnTheWire(t *testing.T) {
	for _, mode := range []amqpspace.Interop{"", amqpspace.InteropOperandAgency} {
		t.Run(cmp.Or(string(mode), "native"), func(t *testing.T) {
			ex := testExchange(t)
			sp := newSpace(t, amqpspace.Config{Exchange: ex, Interop: mode})
			caller := agency.MustNewAgent(randomName("Reader"))
			addAll(t, sp, caller)
			p := newProbe(t, ex)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			sctx, stop := context.WithCancel(ctx)
			ended := make(chan error, 1)
			go func() {
				var last error
				for _, err := range caller.Stream(sctx, p.id, "write", nil) {
					last = err
				}
				ended <- last
			}()
			req := p.next()
			if !strings.Contains(string(req.Body), `"write"`) {
				t.Fatalf("the probe got %s, want the request", req.Body)
			}
			stop()
			// Canceled, or ErrDisconnected if the caller's watch found no
			// queue named after the probe (its queue has the broker's name)
			// first: either way the stream stopped before any part.
			if err := <-ended; !errors.Is(err, context.Canceled) && !errors.Is(err, amqpspace.ErrDisconnected) {
				t.Fatalf("the stream ended with %v", err)
			}
			if _, err := caller.Send(ctx, p.id, "marker", nil); err != nil {
				t.Fatal(err)
			}
			next := string(p.next().Body)
			if mode == "" {
				if !strings.Contains(next, `"[cancel]"`) || !strings.Contains(next, `"no_reply":true`) {
					t.Fatalf("the probe got %s after the request, want a [cancel] with no_reply", next)
				}
				next = string(p.next().Body)
			}
			if !strings.Contains(next, `"marker"`) {
				t.Fatalf("the probe got %s, want the marker", next)
			}
		})
	}
}
