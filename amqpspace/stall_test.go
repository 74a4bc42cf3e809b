package amqpspace_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// When the broker stops taking what the space sends, a Send returns when
// its context ends instead of when the socket gives way, and so does
// every Send queued behind it; a write stuck for PublishTimeout fails the
// connection, and the space reconnects once the broker reads again.
func TestStalledBroker(t *testing.T) {
	t.Parallel()
	proxy := newProxy(t, nil)
	logs := newLogRecorder()
	sp := newSpace(t, amqpspace.Config{
		URL:            "amqp://guest:guest@" + proxy.addr + "/",
		PublishTimeout: 3 * time.Second,
		MaxMessageSize: 16 << 20,
		Logger:         slog.New(logs),
	})
	recv := agency.MustNewAgent(randomName("Receiver"))
	agency.Handle(recv, "take", func(context.Context, struct {
		Pad string `json:"pad"`
	}) (bool, error) {
		return true, nil
	})
	sender := agency.MustNewAgent(randomName("Sender"))
	bystander := agency.MustNewAgent(randomName("Bystander"))
	addAll(t, sp, recv, sender, bystander)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	// More than the socket buffers hold. The big message's Send has time to
	// get its 8 MiB to the socket however slow the machine (encoding them
	// under the race detector on a busy machine can take seconds), and
	// returns once the space gives up on it after PublishTimeout (the
	// write stuck, or no confirmation), and gives up the connection; the
	// small one, queued behind it or waiting
	// for a confirmation that cannot come, returns when its context ends.
	big := map[string]string{"pad": strings.Repeat("x", 8<<20)}
	proxy.pause()
	results := make(chan error, 2)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
		defer cancel()
		_, err := sender.Send(ctx, recv.ID(), "take", big)
		if !errors.Is(err, amqpspace.ErrUnconfirmed) && !errors.Is(err, amqpspace.ErrDisconnected) {
			err = errors.New("the big message: returned " + errString(err) + ", want an error matching amqpspace.ErrUnconfirmed or ErrDisconnected")
		} else {
			err = nil
		}
		results <- err
	}()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := sender.Send(ctx, recv.ID(), "take", map[string]string{"pad": "small"})
		if ctx.Err() == nil {
			err = errors.New("the small message: returned before its context ended, with " + errString(err))
		} else if !errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("the small message: returned " + errString(err) + ", want the context's error")
		} else {
			err = nil
		}
		results <- err
	}()
	for range 2 {
		select {
		case err := <-results:
			if err != nil {
				t.Errorf("Send while the broker does not read: %v", err)
			}
		case <-time.After(3 * wait):
			t.Fatal("a Send hung past its context")
		}
	}
	logs.expect(t, "lost the broker")
	// The stuck connections are let go: removing an agent meanwhile is not
	// held up by them.
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	_ = sp.Remove(rctx, bystander.ID())
	if rctx.Err() != nil {
		t.Errorf("Remove during the stall ran until its context ended")
	}
	proxy.resume()
	logs.expect(t, "reconnected")
	if _, err := sender.Request(ctx, recv.ID(), "take", map[string]string{"pad": "x"}); err != nil {
		t.Errorf("Request after the broker reads again: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// Requests that wait in the agents' queues while their space reconnects
// are answered: sending works again as soon as the connection does, not
// only once every agent is subscribed again.
func TestAnsweredWhileResubscribing(t *testing.T) {
	const workers = 30
	proxy := newProxy(t, nil)
	logs := newLogRecorder()
	ex := testExchange(t)
	behind := newSpace(t, amqpspace.Config{URL: "amqp://guest:guest@" + proxy.addr + "/", Exchange: ex, Logger: slog.New(logs)})
	direct := newSpace(t, amqpspace.Config{Exchange: ex})
	var echoes []*agency.Agent
	for range workers {
		echoes = append(echoes, newEcho())
	}
	addAll(t, behind, echoes...)
	caller := agency.MustNewAgent(randomName("Caller"))
	addAll(t, direct, caller)

	proxy.cut()
	logs.expect(t, "lost the broker")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	errs := make(chan error, workers)
	for _, e := range echoes {
		go func() {
			got, err := agency.Call[string](ctx, caller, e.ID(), "echo", echoArgs{Text: e.ID()})
			if err == nil && got != e.ID() {
				err = errors.New("wrong answer " + got)
			}
			errs <- err
		}()
	}
	failed := 0
	for range workers {
		if err := <-errs; err != nil {
			failed++
			t.Log(err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d requests made during the reconnect got no answer", failed, workers)
	}
}
