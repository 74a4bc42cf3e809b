package amqpspace_test

import (
	"context"
	"crypto/tls"
	"errors"
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

func TestConfigFromEnvRefuses(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"URL and parts", map[string]string{"AMQP_URL": "amqp://localhost/", "AMQP_HOST": "other"}, "AMQP_HOST"},
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
	for _, k := range []string{"AMQP_URL", "AMQP_HOST", "AMQP_PORT", "AMQP_USERNAME", "AMQP_PASSWORD", "AMQP_VHOST"} {
		t.Setenv(k, "")
	}
}
