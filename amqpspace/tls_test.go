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
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// selfSigned returns a certificate for 127.0.0.1 and a pool of roots that
// holds it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "agency-go test broker"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, roots
}

// With an amqps:// URL the space speaks TLS, verifying the broker with
// Config.TLS; a broker it cannot verify is an error at construction.
func TestTLS(t *testing.T) {
	cert, roots := selfSigned(t)
	front := newProxy(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	url := fmt.Sprintf("amqps://guest:guest@%s/", front.addr)

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if s, err := amqpspace.New(ctx, amqpspace.Config{URL: url}); err == nil {
		_ = s.Close(ctx)
		t.Fatal("New trusted a broker whose certificate no root vouches for")
	} else if !errors.Is(err, amqpspace.ErrDisconnected) {
		t.Errorf("New with an unknown certificate: %v, want ErrDisconnected", err)
	}

	sp := newSpace(t, amqpspace.Config{URL: url, Exchange: testExchange(t), TLS: &tls.Config{RootCAs: roots}})
	echo, caller := newEcho(), agency.MustNewAgent(randomName("Caller"))
	addAll(t, sp, echo, caller)
	got, err := agency.Call[string](ctx, caller, echo.ID(), "echo", map[string]string{"text": "over TLS"})
	if err != nil || got != "over TLS" {
		t.Fatalf("echo over TLS: %q, %v", got, err)
	}
	if n := front.accepted.Load(); n != 2 {
		t.Errorf("%d TLS connections, want 2 (publish and consume)", n)
	}
}
