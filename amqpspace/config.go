package amqpspace

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Defaults of Config.
const (
	DefaultURL             = "amqp://guest:guest@localhost:5672/"
	DefaultExchange        = "agency"
	DefaultPrefetch        = 256
	DefaultHeartbeat       = 10 * time.Second
	DefaultMaxMessageSize  = 4 << 20 // 4 MiB
	DefaultPublishTimeout  = 10 * time.Second
	DefaultQueueExpiry     = 30 * time.Second
	DefaultMaxPendingBytes = 64 << 20 // 64 MiB
)

// Limits of Config's fields.
const (
	maxPrefetch       = 65535     // basic.qos takes a 16-bit count
	maxMessageSize    = 128 << 20 // RabbitMQ's default max_message_size
	maxExchangeLength = 255
	minQueueExpiry    = time.Second
)

// ErrInvalidConfig is wrapped by every error New and ConfigFromEnv return
// for configuration that cannot work.
var ErrInvalidConfig = errors.New("amqpspace: invalid configuration")

// Config configures a Space. The zero value, with defaults filled in by New,
// connects to a broker on localhost with guest/guest.
type Config struct {
	// URL of the broker: amqp://user:password@host:port/vhost, or amqps://
	// for TLS. Empty means DefaultURL. Special characters in the user name
	// or password must be percent-encoded.
	URL string
	// URLs lists the nodes of one RabbitMQ cluster, in place of URL
	// (setting both is an error). The space connects to one of them, in a
	// shuffled order, and when it loses that node it reconnects to another
	// (see Durable for what a lost node costs). All must name the same
	// vhost and, with TLS set, be amqps://.
	URLs []string
	// Exchange is the durable topic exchange every process of one space
	// shares. Empty means DefaultExchange. Names starting with "amq." are
	// the broker's own and refused.
	Exchange string
	// ExchangeMustExist makes New (and every reconnect) only check that
	// the exchange exists, rather than declare it: a process that joins a
	// space others serve (a client, a tool) then fails with ErrNoExchange
	// on a misspelt name instead of leaving a new durable exchange behind
	// on the broker.
	ExchangeMustExist bool
	// Prefetch bounds how many messages the broker hands each of an
	// agent's two consumers (its own queue and its broadcast queue) that
	// the agent has not taken yet (basic.qos, per consumer): a slow
	// agent's backlog waits in the broker. 0 means DefaultPrefetch.
	Prefetch int
	// Heartbeat is the AMQP heartbeat interval; a connection silent for
	// three times as long counts as lost. 0 means DefaultHeartbeat.
	// Heartbeats cannot be turned off: they are how a dead peer is noticed.
	Heartbeat time.Duration
	// TLS is used with an amqps:// URL (nil means the system's roots and
	// the URL's host name). Giving it with an amqp:// URL is an error,
	// rather than a connection that silently goes unencrypted.
	TLS *tls.Config
	// MaxMessageSize bounds an encoded message, both ways: a larger
	// outgoing message is an error for its sender, a larger incoming one is
	// dropped with a log line, its body never held in memory.
	// 0 means DefaultMaxMessageSize.
	MaxMessageSize int
	// MaxPendingBytes bounds the bytes of incoming messages that the
	// space holds and its agents have not taken yet, across all its
	// agents: at the bound it stops reading from the broker, which keeps
	// what is sent meanwhile, until they take some. The bound may be
	// passed by one message. What an agent takes while it waits for the
	// response to a Request of its own is not counted: the response may
	// be behind it. 0 means DefaultMaxPendingBytes; at least
	// MaxMessageSize.
	MaxPendingBytes int64
	// Durable makes the messages the space publishes persistent, and its
	// agents' queues quorum queues (x-queue-type: quorum): the broker
	// writes a message to disk, on a majority of a cluster's nodes, before
	// it confirms it, and what is queued survives a restart of the broker
	// or the loss of a minority of its nodes. Without it the queues are
	// transient classic queues, which live on one node: a restart or the
	// loss of that node drops them with what they hold, and the agents
	// declare them again on the node they reconnect to. A queue's type is
	// decided by the receiving process, a message's persistence by the
	// sending one: every process of one space should use the same
	// setting. It costs throughput (see docs/amqp.md). Off by default.
	Durable bool
	// PublishTimeout bounds the wait for the broker's confirmation of a
	// message, unless the sender's context ends earlier.
	// 0 means DefaultPublishTimeout.
	PublishTimeout time.Duration
	// QueueExpiry is how long the broker keeps an agent's queues once no
	// process consumes them: long enough to ride out a reconnect, short
	// enough that a crashed process's ids stop collecting mail.
	// 0 means DefaultQueueExpiry; at least one second.
	QueueExpiry time.Duration
	// Logger receives connection events and dropped wire input.
	// nil means silence.
	Logger *slog.Logger
	// Interop lets the space share its exchange with agents of another
	// library: InteropOperandAgency ("operand-agency") writes every
	// message in the shape of operand/agency 1.6 (Python) and reads both
	// (see interop.go, and docs/interop.md in the repository). Empty means
	// this library's own shape only. Every Go process on one exchange
	// should use the same setting. With it set, a stream's caller that
	// stops tells a responder so only after a part came from it (see
	// driver.NativeRouter): an agent of another library would answer a
	// [cancel].
	Interop Interop
}

// ConfigFromEnv reads the broker's address from the environment: AMQP_URL,
// or AMQP_URLS (the nodes of a cluster, see Config.URLs: URLs separated by
// commas, a comma in a password percent-encoded as %2C), or else
// AMQP_HOST, AMQP_PORT, AMQP_USERNAME, AMQP_PASSWORD and AMQP_VHOST (each
// defaulting to localhost, 5672, guest, guest and "/"). Setting more than
// one of these forms is an error: one of them would be ignored. For TLS,
// give amqps:// URLs. AMQP_INTEROP sets
// Config.Interop: "operand-agency" to share the exchange with
// operand/agency (Python) agents, or unset.
func ConfigFromEnv() (Config, error) {
	var c Config
	if err := c.interopFromEnv(); err != nil { // interop.go
		return Config{}, err
	}
	u, us := os.Getenv("AMQP_URL"), os.Getenv("AMQP_URLS")
	if u != "" || us != "" {
		var both []string
		for _, k := range []string{"AMQP_URLS", "AMQP_HOST", "AMQP_PORT", "AMQP_USERNAME", "AMQP_PASSWORD", "AMQP_VHOST"} {
			if os.Getenv(k) != "" && (u != "" || k != "AMQP_URLS") {
				both = append(both, k)
			}
		}
		if len(both) > 0 {
			given := "AMQP_URL"
			if u == "" {
				given = "AMQP_URLS"
			}
			return Config{}, fmt.Errorf("%w: %s is set together with %s; set one or the other",
				ErrInvalidConfig, given, strings.Join(both, ", "))
		}
		if u != "" {
			c.URL = u
			return c, nil
		}
		for _, one := range strings.Split(us, ",") {
			if one = strings.TrimSpace(one); one != "" {
				c.URLs = append(c.URLs, one)
			}
		}
		if len(c.URLs) == 0 {
			return Config{}, fmt.Errorf("%w: AMQP_URLS=%q holds no URL", ErrInvalidConfig, us)
		}
		return c, nil
	}
	host := envOr("AMQP_HOST", "localhost")
	port := envOr("AMQP_PORT", "5672")
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Config{}, fmt.Errorf("%w: AMQP_PORT=%q is not a port number (1-65535)", ErrInvalidConfig, port)
	}
	if strings.ContainsAny(host, "/?#@ ") {
		return Config{}, fmt.Errorf("%w: AMQP_HOST=%q is not a host name", ErrInvalidConfig, host)
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return Config{}, fmt.Errorf("%w: AMQP_HOST=%q: give the port in AMQP_PORT", ErrInvalidConfig, host)
	}
	addr := url.URL{
		Scheme: "amqp",
		User:   url.UserPassword(envOr("AMQP_USERNAME", "guest"), envOr("AMQP_PASSWORD", "guest")),
		Host:   net.JoinHostPort(host, port),
		Path:   "/",
	}
	if v := os.Getenv("AMQP_VHOST"); v != "" && v != "/" {
		addr.Path = "/" + v
		addr.RawPath = "/" + url.PathEscape(v)
	}
	c.URL = addr.String()
	return c, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// settings is a validated Config with its defaults filled in.
type settings struct {
	Config
	nodes []node // URLs, or URL alone; at least one
}

// node is one address of the broker.
type node struct {
	url string // as configured, for redact
	uri amqp.URI
}

// check fills in c's defaults and reports the first setting that cannot
// work.
func (c Config) check() (settings, error) {
	urls := c.URLs
	switch {
	case c.URL != "" && len(urls) > 0:
		return settings{}, fmt.Errorf("%w: URL and URLs are both set; give every node in URLs", ErrInvalidConfig)
	case len(urls) == 0 && c.URL == "":
		c.URL = DefaultURL
		fallthrough
	case len(urls) == 0:
		urls = []string{c.URL}
	default:
		c.URL = urls[0] // what messages name
	}
	nodes := make([]node, 0, len(urls))
	for _, raw := range urls {
		n, err := checkURL(raw, c.TLS != nil)
		if err != nil {
			return settings{}, err
		}
		if len(nodes) > 0 && n.uri.Vhost != nodes[0].uri.Vhost {
			return settings{}, fmt.Errorf("%w: URLs %q and %q name different vhosts; the nodes of one space share one", ErrInvalidConfig, redact(nodes[0].url), redact(raw))
		}
		nodes = append(nodes, n)
	}
	if c.Exchange == "" {
		c.Exchange = DefaultExchange
	}
	if err := checkExchange(c.Exchange); err != nil {
		return settings{}, err
	}
	switch {
	case c.Prefetch == 0:
		c.Prefetch = DefaultPrefetch
	case c.Prefetch < 0 || c.Prefetch > maxPrefetch:
		return settings{}, fmt.Errorf("%w: Prefetch %d is outside 1-%d", ErrInvalidConfig, c.Prefetch, maxPrefetch)
	}
	switch {
	case c.Heartbeat == 0:
		c.Heartbeat = DefaultHeartbeat
	case c.Heartbeat < time.Second || c.Heartbeat > time.Hour:
		return settings{}, fmt.Errorf("%w: Heartbeat %v is outside 1s-1h", ErrInvalidConfig, c.Heartbeat)
	}
	switch {
	case c.MaxMessageSize == 0:
		c.MaxMessageSize = DefaultMaxMessageSize
	case c.MaxMessageSize < 1024 || c.MaxMessageSize > maxMessageSize:
		return settings{}, fmt.Errorf("%w: MaxMessageSize %d is outside 1 KiB-128 MiB (the broker's own limit)", ErrInvalidConfig, c.MaxMessageSize)
	}
	switch {
	case c.MaxPendingBytes == 0:
		c.MaxPendingBytes = max(DefaultMaxPendingBytes, int64(c.MaxMessageSize))
	case c.MaxPendingBytes < int64(c.MaxMessageSize):
		return settings{}, fmt.Errorf("%w: MaxPendingBytes %d is under MaxMessageSize %d: one message must fit", ErrInvalidConfig, c.MaxPendingBytes, c.MaxMessageSize)
	}
	switch {
	case c.PublishTimeout == 0:
		c.PublishTimeout = DefaultPublishTimeout
	case c.PublishTimeout < 0:
		return settings{}, fmt.Errorf("%w: PublishTimeout %v is negative", ErrInvalidConfig, c.PublishTimeout)
	}
	switch {
	case c.QueueExpiry == 0:
		c.QueueExpiry = DefaultQueueExpiry
	case c.QueueExpiry < minQueueExpiry:
		return settings{}, fmt.Errorf("%w: QueueExpiry %v is under %v", ErrInvalidConfig, c.QueueExpiry, minQueueExpiry)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkInterop(c.Interop); err != nil { // interop.go
		return settings{}, err
	}
	return settings{Config: c, nodes: nodes}, nil
}

// checkURL parses one broker address.
func checkURL(raw string, withTLS bool) (node, error) {
	uri, err := amqp.ParseURI(raw)
	if err != nil {
		// The parser's message quotes the URL, password and all.
		return node{}, fmt.Errorf("%w: URL %q is not an AMQP URL (amqp://user:password@host:port/vhost, or amqps://; percent-encode special characters in the user name and password): %s",
			ErrInvalidConfig, redact(raw), scrub(err.Error(), raw))
	}
	if uri.Port < 1 || uri.Port > 65535 {
		return node{}, fmt.Errorf("%w: URL %q: port %d is outside 1-65535", ErrInvalidConfig, redact(raw), uri.Port)
	}
	if withTLS && uri.Scheme != "amqps" {
		return node{}, fmt.Errorf("%w: TLS is set but URL %q is not amqps://", ErrInvalidConfig, redact(raw))
	}
	return node{url: raw, uri: uri}, nil
}

// checkExchange refuses exchange names the broker would refuse, or that
// belong to it.
func checkExchange(name string) error {
	if len(name) > maxExchangeLength {
		return fmt.Errorf("%w: Exchange is %d bytes long, over %d", ErrInvalidConfig, len(name), maxExchangeLength)
	}
	if strings.HasPrefix(name, "amq.") {
		return fmt.Errorf("%w: Exchange %q: names starting with amq. are reserved by the broker", ErrInvalidConfig, name)
	}
	for _, r := range name {
		ok := r == '-' || r == '_' || r == '.' || r == ':' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
		if !ok {
			return fmt.Errorf("%w: Exchange %q: only letters, digits, - _ . and : are allowed", ErrInvalidConfig, name)
		}
	}
	return nil
}

// scrub removes from msg the password that raw, a URL, holds, whether or
// not raw parses.
func scrub(msg, raw string) string {
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		if userinfo, _, ok := strings.Cut(rest, "@"); ok {
			if _, password, ok := strings.Cut(userinfo, ":"); ok && password != "" {
				msg = strings.ReplaceAll(msg, password, "xxxxx")
			}
		}
	}
	return msg
}

// redact hides the password of a URL that is about to be shown.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
