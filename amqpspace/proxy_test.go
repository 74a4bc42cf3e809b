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
// as a broker under a resource alarm, or a stalled network, would.
type proxy struct {
	addr     string
	accepted atomic.Int32 // connections passed on

	mu   sync.Mutex
	gate chan struct{} // closed while traffic flows

	openMu sync.Mutex
	open   []net.Conn
}

func newProxy(t *testing.T, tlsConf *tls.Config) *proxy {
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
	p := &proxy{addr: ln.Addr().String(), gate: make(chan struct{})}
	close(p.gate)

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
				up, err := net.Dial("tcp", broker)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				p.accepted.Add(1)
				done := make(chan struct{}, 2)
				go func() { p.pass(up, c); done <- struct{}{} }()
				go func() { p.pass(c, up); done <- struct{}{} }()
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

// pass copies from src to dst until either ends, holding back what it
// read while the proxy is paused.
func (p *proxy) pass(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		gate := p.gate
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
	p.gate = make(chan struct{})
	p.mu.Unlock()
}

func (p *proxy) resume() {
	p.mu.Lock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
	p.mu.Unlock()
}
