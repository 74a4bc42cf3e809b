package amqpspace_test

import (
	"crypto/tls"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// proxy passes TCP connections on to the broker. Given a TLS
// configuration it terminates TLS first: an amqps:// broker without
// reconfiguring RabbitMQ. Paused, it stops passing on what clients send,
// as a broker under a resource alarm, or a stalled network, would; with
// its answers paused, it passes on what clients send but not what the
// broker answers.
type proxy struct {
	addr     string
	accepted atomic.Int32 // connections passed on

	mu   sync.Mutex
	gate [2]chan struct{} // up (to the broker), down: closed while traffic flows

	openMu sync.Mutex
	open   []net.Conn
}

func newProxy(t testing.TB, tlsConf *tls.Config) *proxy {
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
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	p := &proxy{addr: ln.Addr().String(), gate: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
	close(p.gate[up])
	close(p.gate[down])

	var wg sync.WaitGroup
	track := func(c net.Conn) {
		p.openMu.Lock()
		p.open = append(p.open, c)
		p.openMu.Unlock()
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
				if tc, ok := c.(*tls.Conn); ok && tc.Handshake() != nil {
					return // a client that does not trust the certificate
				}
				upstream, err := net.Dial("tcp", broker)
				if err != nil {
					return
				}
				track(upstream)
				defer upstream.Close()
				p.accepted.Add(1)
				done := make(chan struct{}, 2)
				go func() { p.pass(upstream, c, up); done <- struct{}{} }()
				go func() { p.pass(c, upstream, down); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		p.resume()
		ln.Close()
		p.cut()
		wg.Wait()
	})
	return p
}

// The directions of the traffic.
const (
	up   = 0 // from the clients to the broker
	down = 1 // from the broker to the clients
)

// pass copies from src to dst until either ends, holding back what it
// read while direction dir is paused.
func (p *proxy) pass(dst, src net.Conn, dir int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		gate := p.gate[dir]
		p.mu.Unlock()
		<-gate
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes every connection passed on so far, as a network failure
// would.
func (p *proxy) cut() {
	p.openMu.Lock()
	defer p.openMu.Unlock()
	for _, c := range p.open {
		c.Close()
	}
	p.open = nil
}

// pause stops the traffic; resume lets it flow again.
func (p *proxy) pause() {
	p.mu.Lock()
	p.gate = [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	p.mu.Unlock()
}

// pauseAnswers stops what the broker sends, and lets through what the
// clients send.
func (p *proxy) pauseAnswers() {
	p.mu.Lock()
	p.gate[down] = make(chan struct{})
	p.mu.Unlock()
}

func (p *proxy) resume() {
	p.mu.Lock()
	for _, g := range p.gate {
		select {
		case <-g:
		default:
			close(g)
		}
	}
	p.mu.Unlock()
}
