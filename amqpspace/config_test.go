package amqpspace_test

import (
	"context"
	"crypto/tls"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/amqpspace"
)

// Configuration that cannot work fails in New, before any connection, with
// an error that names the setting.
func TestNewRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  amqpspace.Config
		want string
	}{
		{"scheme", amqpspace.Config{URL: "http://localhost:5672/"}, "URL"},
		{"garbage URL", amqpspace.Config{URL: "::not a url"}, "URL"},
		{"password hidden", amqpspace.Config{URL: "amqp://user:s3cret@host:99999/"}, "URL"},
		{"password hidden when unparsable", amqpspace.Config{URL: "amqp://user:s3cret@host:notaport/"}, "URL"},
		{"password hidden with a bad escape", amqpspace.Config{URL: "amqp://user:s3cret%zz@host/"}, "URL"},
		{"password hidden with a bracket", amqpspace.Config{URL: "amqp://user:s3cret@[host/"}, "URL"},
		{"TLS without amqps", amqpspace.Config{URL: "amqp://localhost/", TLS: &tls.Config{}}, "amqps"},
		{"reserved exchange", amqpspace.Config{Exchange: "amq.topic"}, "reserved"},
		{"exchange characters", amqpspace.Config{Exchange: "my exchange"}, "Exchange"},
		{"exchange length", amqpspace.Config{Exchange: strings.Repeat("x", 256)}, "Exchange"},
		{"negative prefetch", amqpspace.Config{Prefetch: -1}, "Prefetch"},
		{"prefetch too large", amqpspace.Config{Prefetch: 70000}, "Prefetch"},
		{"heartbeat too short", amqpspace.Config{Heartbeat: time.Millisecond}, "Heartbeat"},
		{"negative heartbeat", amqpspace.Config{Heartbeat: -time.Second}, "Heartbeat"},
		{"message size too small", amqpspace.Config{MaxMessageSize: 10}, "MaxMessageSize"},
		{"message size too large", amqpspace.Config{MaxMessageSize: 129 << 20}, "MaxMessageSize"},
		{"negative publish timeout", amqpspace.Config{PublishTimeout: -time.Second}, "PublishTimeout"},
		{"queue expiry too short", amqpspace.Config{QueueExpiry: time.Millisecond}, "QueueExpiry"},
		{"URL and URLs", amqpspace.Config{URL: "amqp://a/", URLs: []string{"amqp://b/"}}, "URLs"},
		{"URLs with another vhost", amqpspace.Config{URLs: []string{"amqp://a/one", "amqp://b/two"}}, "vhost"},
		{"one of URLs bad", amqpspace.Config{URLs: []string{"amqp://a/", "amqp://user:s3cret@b:99999/"}}, "URL"},
		{"TLS with an amqp:// node", amqpspace.Config{URLs: []string{"amqps://a/", "amqp://b/"}, TLS: &tls.Config{}}, "amqps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := amqpspace.New(context.Background(), tt.cfg)
			if err == nil {
				_ = s.Close(context.Background())
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, amqpspace.ErrInvalidConfig) {
				t.Errorf("New: %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %q does not name %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("New: %q shows the password", err)
			}
		})
	}
}

// A broker that does not answer is an error from New, not a space that
// waits for one.
func TestNewUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := amqpspace.New(ctx, amqpspace.Config{URL: "amqp://guest:guest@127.0.0.1:1/"})
	if err == nil {
		_ = s.Close(ctx)
		t.Fatal("New succeeded without a broker")
	}
	if !errors.Is(err, amqpspace.ErrDisconnected) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("New: %v, want ErrDisconnected naming the address", err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want amqp.URI
	}{
		{"defaults", nil, amqp.URI{Scheme: "amqp", Host: "localhost", Port: 5672, Username: "guest", Password: "guest", Vhost: "/"}},
		{"URL", map[string]string{"AMQP_URL": "amqps://u:p@broker.example:5671/prod"},
			amqp.URI{Scheme: "amqps", Host: "broker.example", Port: 5671, Username: "u", Password: "p", Vhost: "prod"}},
		{"parts", map[string]string{
			"AMQP_HOST": "10.0.0.7", "AMQP_PORT": "5673", "AMQP_USERNAME": "agent smith",
			"AMQP_PASSWORD": "p@ss/w:rd?", "AMQP_VHOST": "team/a",
		}, amqp.URI{Scheme: "amqp", Host: "10.0.0.7", Port: 5673, Username: "agent smith", Password: "p@ss/w:rd?", Vhost: "team/a"}},
		{"default vhost spelled out", map[string]string{"AMQP_VHOST": "/"},
			amqp.URI{Scheme: "amqp", Host: "localhost", Port: 5672, Username: "guest", Password: "guest", Vhost: "/"}},
		{"IPv6 host", map[string]string{"AMQP_HOST": "::1"},
			amqp.URI{Scheme: "amqp", Host: "::1", Port: 5672, Username: "guest", Password: "guest", Vhost: "/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := amqpspace.ConfigFromEnv()
			if err != nil {
				t.Fatalf("ConfigFromEnv: %v", err)
			}
			got, err := amqp.ParseURI(cfg.URL)
			if err != nil {
				t.Fatalf("ParseURI(%q): %v", cfg.URL, err)
			}
			w := tt.want
			if got.Scheme != w.Scheme || got.Host != w.Host || got.Port != w.Port ||
				got.Username != w.Username || got.Password != w.Password || got.Vhost != w.Vhost {
				t.Errorf("URL %q parses as %s://%s:%s@%s:%d vhost %q, want %s://%s:%s@%s:%d vhost %q", cfg.URL,
					got.Scheme, got.Username, got.Password, got.Host, got.Port, got.Vhost,
					w.Scheme, w.Username, w.Password, w.Host, w.Port, w.Vhost)
			}
		})
	}
}

// AMQP_URLS lists the nodes of a cluster, comma-separated.
func TestConfigFromEnvURLs(t *testing.T) {
	clearEnv(t)
	t.Setenv("AMQP_URLS", " amqp://u:p%2Cq@n1:5681/v , amqp://u:p%2Cq@n2:5682/v,")
	cfg, err := amqpspace.ConfigFromEnv()
	if err != nil {
		t.Fatalf("ConfigFromEnv: %v", err)
	}
	want := []string{"amqp://u:p%2Cq@n1:5681/v", "amqp://u:p%2Cq@n2:5682/v"}
	if cfg.URL != "" || !slices.Equal(cfg.URLs, want) {
		t.Errorf("URL %q, URLs %q; want no URL, URLs %q", cfg.URL, cfg.URLs, want)
	}
	if u, err := amqp.ParseURI(cfg.URLs[1]); err != nil || u.Password != "p,q" || u.Port != 5682 {
		t.Errorf("URLs[1] parses as %+v, %v", u, err)
	}
}

// A space given several nodes connects to one that answers, whichever
// comes first in its shuffled order, and says which in its error when none
// does.
func TestNewTriesEveryNode(t *testing.T) {
	live := brokerURL(t)
	dead := "amqp://guest:guest@127.0.0.1:1/"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 6 { // either order, with a probability of 1-2^-6
		s, err := amqpspace.New(ctx, amqpspace.Config{URLs: []string{dead, live}, Exchange: testExchange(t)})
		if err != nil {
			t.Fatalf("New with a dead and a live node: %v", err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := amqpspace.New(ctx, amqpspace.Config{URLs: []string{dead, "amqp://guest:guest@127.0.0.1:2/"}})
	if !errors.Is(err, amqpspace.ErrDisconnected) || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "127.0.0.1:2") {
		t.Errorf("New with two dead nodes: %v, want ErrDisconnected naming both", err)
	}
}

func TestConfigFromEnvRefuses(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"URL and parts", map[string]string{"AMQP_URL": "amqp://localhost/", "AMQP_HOST": "other"}, "AMQP_HOST"},
		{"URL and URLS", map[string]string{"AMQP_URL": "amqp://localhost/", "AMQP_URLS": "amqp://a/,amqp://b/"}, "AMQP_URLS"},
		{"URLS and parts", map[string]string{"AMQP_URLS": "amqp://a/,amqp://b/", "AMQP_PORT": "5672"}, "AMQP_PORT"},
		{"URLS empty", map[string]string{"AMQP_URLS": " , "}, "AMQP_URLS"},
		{"port not a number", map[string]string{"AMQP_PORT": "amqp"}, "AMQP_PORT"},
		{"port out of range", map[string]string{"AMQP_PORT": "70000"}, "AMQP_PORT"},
		{"host with a path", map[string]string{"AMQP_HOST": "host/vhost"}, "AMQP_HOST"},
		{"host with a port", map[string]string{"AMQP_HOST": "localhost:5672"}, "AMQP_PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := amqpspace.ConfigFromEnv()
			if !errors.Is(err, amqpspace.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ConfigFromEnv: %v, want ErrInvalidConfig naming %s", err, tt.want)
			}
		})
	}
}

// A bad URL in the environment fails at construction too.
func TestNewFromEnvBadURL(t *testing.T) {
	clearEnv(t)
	t.Setenv("AMQP_URL", "amqp://localhost:notaport/")
	if _, err := amqpspace.NewFromEnv(context.Background()); !errors.Is(err, amqpspace.ErrInvalidConfig) {
		t.Errorf("NewFromEnv: %v, want ErrInvalidConfig", err)
	}
}

func clearEnv(t *testing.T) {
	for _, k := range []string{"AMQP_URL", "AMQP_URLS", "AMQP_HOST", "AMQP_PORT", "AMQP_USERNAME", "AMQP_PASSWORD", "AMQP_VHOST"} {
		t.Setenv(k, "")
	}
}
