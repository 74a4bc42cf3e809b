package openai

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// The defaults of the options.
const (
	defaultModel       = "gpt-4o-mini"
	defaultMaxSteps    = 8
	defaultHistory     = 40
	defaultRetries     = 3
	defaultBackoff     = 500 * time.Millisecond
	defaultCallTimeout = 60 * time.Second
)

// Option configures an [Agent] in [New]. Each option may be given once; an
// invalid value or a repeated option makes New fail with an error that
// matches agency.ErrInvalidOption.
type Option func(*config) error

type config struct {
	apiKey, baseURL, model, systemPrompt *string

	maxSteps, history int
	retriesSet        bool
	retries           int
	backoff           time.Duration
	callTimeout       time.Duration
	httpClient        *http.Client
	logger            *slog.Logger
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: openai: "+format, append([]any{agency.ErrInvalidOption}, args...)...)
}

func setOnce(p **string, name, v string) error {
	if *p != nil {
		return invalid("%s given twice", name)
	}
	*p = &v
	return nil
}

// APIKey sets the API key. Without it the agent reads OPENAI_API_KEY.
func APIKey(key string) Option {
	return func(c *config) error {
		if key == "" {
			return invalid("APIKey(\"\")")
		}
		return setOnce(&c.apiKey, "APIKey", key)
	}
}

// BaseURL sets the URL of the OpenAI-compatible API, up to and including
// its version ("http://localhost:11434/v1" for Ollama). Without it the agent
// reads OPENAI_BASE_URL, and without that it talks to api.openai.com.
func BaseURL(u string) Option {
	return func(c *config) error {
		if err := checkBaseURL(u); err != nil {
			return err
		}
		return setOnce(&c.baseURL, "BaseURL", u)
	}
}

func checkBaseURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return invalid("base URL %q: want an absolute http or https URL such as http://localhost:11434/v1", u)
	}
	return nil
}

// Model sets the model name. Without it the agent reads OPENAI_MODEL, and
// without that it uses "gpt-4o-mini".
func Model(name string) Option {
	return func(c *config) error {
		if name == "" {
			return invalid("Model(\"\")")
		}
		return setOnce(&c.model, "Model", name)
	}
}

// SystemPrompt replaces the default system prompt, which tells the model
// that it is an agent in a space whose tools are other agents' actions. The
// agent appends a line naming the partner of the conversation. An empty
// text sends no system message at all.
func SystemPrompt(text string) Option {
	return func(c *config) error {
		return setOnce(&c.systemPrompt, "SystemPrompt", text)
	}
}

// MaxSteps bounds the model calls of one turn (default 8).
// A turn that reaches it without a text answer ends with a note saying so.
func MaxSteps(n int) Option {
	return func(c *config) error {
		if c.maxSteps != 0 {
			return invalid("MaxSteps given twice")
		}
		if n < 1 {
			return invalid("MaxSteps(%d): at least 1", n)
		}
		c.maxSteps = n
		return nil
	}
}

// History bounds the messages kept per conversation partner (default
// 40). Older messages are dropped first; a tool call is never
// kept without its results.
func History(n int) Option {
	return func(c *config) error {
		if c.history != 0 {
			return invalid("History given twice")
		}
		if n < 1 {
			return invalid("History(%d): at least 1", n)
		}
		c.history = n
		return nil
	}
}

// Retries sets how often a model call that failed with HTTP 429 or a 5xx
// status is tried again (n, default 3) and the wait before the
// first retry (default 500ms), which doubles on each further one.
func Retries(n int, backoff time.Duration) Option {
	return func(c *config) error {
		if c.retriesSet {
			return invalid("Retries given twice")
		}
		if n < 0 || backoff < 0 || (n > 0 && backoff == 0) {
			return invalid("Retries(%d, %v): want n >= 0 and a positive backoff", n, backoff)
		}
		c.retriesSet, c.retries, c.backoff = true, n, backoff
		return nil
	}
}

// CallTimeout bounds each tool call, a Request to another agent (default
// 60s). A call that runs out returns a timeout error to the
// model.
func CallTimeout(d time.Duration) Option {
	return func(c *config) error {
		if c.callTimeout != 0 {
			return invalid("CallTimeout given twice")
		}
		if d <= 0 {
			return invalid("CallTimeout(%v): must be positive", d)
		}
		c.callTimeout = d
		return nil
	}
}

// HTTPClient sets the HTTP client of the API calls (default: a client
// without a timeout; the turn's context bounds each call).
func HTTPClient(hc *http.Client) Option {
	return func(c *config) error {
		if c.httpClient != nil {
			return invalid("HTTPClient given twice")
		}
		if hc == nil {
			return invalid("HTTPClient(nil)")
		}
		c.httpClient = hc
		return nil
	}
}

// Logger sets where the agent logs (failed model calls, help answers it
// cannot read); it is also the logger of its *agency.Agent. The default logs
// nothing.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if c.logger != nil {
			return invalid("Logger given twice")
		}
		if l == nil {
			return invalid("Logger(nil)")
		}
		c.logger = l
		return nil
	}
}
