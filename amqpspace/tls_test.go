package amqpspace_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// tlsFront terminates TLS on loopback and passes the bytes on to the
// broker's plain port: an amqps:// broker without reconfiguring RabbitMQ.
type tlsFront struct {
	addr     string
	roots    *x509.CertPool
	accepted atomic.Int32
}

func newTLSFront(t *testing.T) *tlsFront {
	t.Helper()
	uri, err := amqp.ParseURI(brokerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	broker := net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "agency-go test broker"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	f := &tlsFront{roots: x509.NewCertPool()}
	f.roots.AddCert(cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		open = append(open, c)
		mu.Unlock()
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
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return // a client that does not trust us
				}
				f.accepted.Add(1)
				up, err := net.Dial("tcp", broker)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return f
}

// With an amqps:// URL the space speaks TLS, verifying the broker with
// Config.TLS; a broker it cannot verify is an error at construction.
func TestTLS(t *testing.T) {
	front := newTLSFront(t)
	url := fmt.Sprintf("amqps://guest:guest@%s/", front.addr)

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if s, err := amqpspace.New(ctx, amqpspace.Config{URL: url}); err == nil {
		_ = s.Close(ctx)
		t.Fatal("New trusted a broker whose certificate no root vouches for")
	} else if !errors.Is(err, amqpspace.ErrDisconnected) {
		t.Errorf("New with an unknown certificate: %v, want ErrDisconnected", err)
	}

	sp := newSpace(t, amqpspace.Config{URL: url, Exchange: testExchange(t), TLS: &tls.Config{RootCAs: front.roots}})
	echo := agency.MustNewAgent(randomName("Echo"))
	agency.Handle(echo, "echo", func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return a.Text, nil
	})
	caller := agency.MustNewAgent(randomName("Caller"))
	for _, a := range []*agency.Agent{echo, caller} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := agency.Call[string](ctx, caller, echo.ID(), "echo", map[string]string{"text": "over TLS"})
	if err != nil || got != "over TLS" {
		t.Fatalf("echo over TLS: %q, %v", got, err)
	}
	if n := front.accepted.Load(); n != 2 {
		t.Errorf("%d TLS connections, want 2 (publish and consume)", n)
	}
}
