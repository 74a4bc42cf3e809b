package amqpspace_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// stallProxy passes TCP connections on to the broker, and can stop
// reading what clients send, as a broker does under a resource alarm or a
// stalled network would.
type stallProxy struct {
	addr string
	mu   sync.Mutex
	gate chan struct{} // closed while traffic flows
}

func newStallProxy(t *testing.T) *stallProxy {
	t.Helper()
	uri, err := amqp.ParseURI(brokerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	broker := net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{addr: ln.Addr().String(), gate: make(chan struct{})}
	close(p.gate)
	var wg sync.WaitGroup
	var open []net.Conn
	var openMu sync.Mutex
	track := func(c net.Conn) {
		openMu.Lock()
		open = append(open, c)
		openMu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				up, err := net.Dial("tcp", broker)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				go func() {
					buf := make([]byte, 32<<10)
					for {
						n, err := c.Read(buf)
						p.wait() // what was read while paused is held back too
						if n > 0 {
							if _, werr := up.Write(buf[:n]); werr != nil {
								break
							}
						}
						if err != nil {
							break
						}
					}
					done <- struct{}{}
				}()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		p.resume()
		ln.Close()
		openMu.Lock()
		for _, c := range open {
			c.Close()
		}
		openMu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *stallProxy) wait() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	<-g
}

func (p *stallProxy) pause() {
	p.mu.Lock()
	p.gate = make(chan struct{})
	p.mu.Unlock()
}

func (p *stallProxy) resume() {
	p.mu.Lock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
	p.mu.Unlock()
}

// When the broker stops taking what the space sends, a Send returns when
// its context ends instead of when the socket gives way, and so does
// every Send queued behind it; a write stuck for PublishTimeout fails the
// connection, and the space reconnects once the broker reads again.
func TestStalledBroker(t *testing.T) {
	proxy := newStallProxy(t)
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
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, a := range []*agency.Agent{recv, sender} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	proxy.pause()
	big := map[string]string{"pad": strings.Repeat("x", 8<<20)} // more than the socket buffers hold
	results := make(chan error, 2)
	send := func(args any) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := sender.Send(ctx, recv.ID(), "take", args)
		if ctx.Err() == nil {
			err = errors.New("returned before its context ended, with " + errString(err))
		} else if !errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("returned " + errString(err) + ", want the context's error")
		} else {
			err = nil
		}
		results <- err
	}
	go send(big)
	go send(map[string]string{"pad": "small"})
	for range 2 {
		select {
		case err := <-results:
			if err != nil {
				t.Errorf("Send while the broker does not read: %v", err)
			}
		case <-time.After(wait):
			t.Fatal("a Send hung past its context")
		}
	}
	logs.expect(t, "lost the broker")
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
