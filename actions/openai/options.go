package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// The defaults of the options.
const (
	defaultModel          = "gpt-4o-mini"
	defaultMaxSteps       = 8
	defaultHistory        = 40
	defaultConversations  = 1000
	defaultRetries        = 3
	defaultBackoff        = 500 * time.Millisecond
	defaultCallTimeout    = 60 * time.Second
	defaultRequestTimeout = 2 * time.Minute
	defaultConcurrency    = 16
	defaultRediscover     = 10 * time.Second
	defaultSettle         = 250 * time.Millisecond
)

// Option configures an [Agent] in [New]. Each option may be given once,
// but for Allow, Deny and Extend, which add up; an invalid value or a
// repeated option makes New fail with an error that matches
// agency.ErrInvalidOption.
type Option func(*config) error

type config struct {
	apiKey, baseURL, model, systemPrompt *string

	maxSteps, history int
	memory            Memory
	retriesSet        bool
	retries           int
	backoff           time.Duration
	callTimeout       time.Duration
	requestTimeout    time.Duration
	concurrency       int
	rediscoverSet     bool
	rediscover        time.Duration
	settle            time.Duration
	httpClient        *http.Client
	logger            *slog.Logger
	agentOpts         []agency.Option // see AgentOptions

	params                           Params
	temperatureSet, topPSet, seedSet bool
	allow, deny                      []selector
	exts                             []Extension
	stream                           func(context.Context, Chunk)
	onUsage                          func(ctx context.Context, owner, conversation string, turn, sum Usage)
	relays                           []string
	resumesSet                       bool
	maxResumes                       int
	maxTurnAge                       time.Duration
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: openai: "+format, append([]any{agency.ErrInvalidOption}, args...)...)
}

func setOnce(p **string, name, v string) error {
	if *p != nil {
		return invalidf("%s given twice", name)
	}
	*p = &v
	return nil
}

// APIKey sets the API key. Without it the agent reads OPENAI_API_KEY.
func APIKey(key string) Option {
	return func(c *config) error {
		if key == "" {
			return invalidf("APIKey(\"\")")
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
		return invalidf("base URL %q: want an absolute http or https URL such as http://localhost:11434/v1", u)
	}
	return nil
}

// Model sets the model name. Without it the agent reads OPENAI_MODEL, and
// without that it uses "gpt-4o-mini".
func Model(name string) Option {
	return func(c *config) error {
		if name == "" {
			return invalidf("Model(\"\")")
		}
		return setOnce(&c.model, "Model", name)
	}
}

// SystemPrompt replaces the default system prompt, which tells the model
// that it is an agent in a space whose tools are other agents' actions. The
// agent appends a line naming the partner of the conversation. An empty
// text sends no system message at all. An [Extension] may change the
// prompt of each model call.
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
			return invalidf("MaxSteps given twice")
		}
		if n < 1 {
			return invalidf("MaxSteps(%d): at least 1", n)
		}
		c.maxSteps = n
		return nil
	}
}

// History bounds the messages the default memory keeps per conversation
// (default 40). Older messages are dropped first; a tool call is never
// kept without its results. It cannot be given with WithMemory.
func History(n int) Option {
	return func(c *config) error {
		if c.history != 0 {
			return invalidf("History given twice")
		}
		if n < 1 {
			return invalidf("History(%d): at least 1", n)
		}
		c.history = n
		return nil
	}
}

// WithMemory sets where the agent keeps its conversations. The default is
// NewMemory(40, 1000): in process, 40 messages for each of the 1,000
// conversations used last.
func WithMemory(m Memory) Option {
	return func(c *config) error {
		if c.memory != nil {
			return invalidf("WithMemory given twice")
		}
		if m == nil {
			return invalidf("WithMemory(nil)")
		}
		c.memory = m
		return nil
	}
}

// Concurrency sets how many turns, each of another conversation, the agent
// runs at once (default 16). Turns of one conversation always run one at
// a time; a say that finds its conversation busy, or every turn taken,
// waits.
func Concurrency(n int) Option {
	return func(c *config) error {
		if c.concurrency != 0 {
			return invalidf("Concurrency given twice")
		}
		if n < 1 {
			return invalidf("Concurrency(%d): at least 1", n)
		}
		c.concurrency = n
		return nil
	}
}

// Retries sets how often a model call that failed with HTTP 408, 429 or a
// 5xx status, or that ran out of its RequestTimeout, is tried again (n,
// default 3), and the wait before the first retry (default 500ms), which
// doubles on each further one. A Retry-After (or retry-after-ms) header of
// at most a minute on the failed answer sets the wait instead.
func Retries(n int, backoff time.Duration) Option {
	return func(c *config) error {
		if c.retriesSet {
			return invalidf("Retries given twice")
		}
		if n < 0 || backoff < 0 || (n > 0 && backoff == 0) {
			return invalidf("Retries(%d, %v): want n >= 0 and a positive backoff", n, backoff)
		}
		c.retriesSet, c.retries, c.backoff = true, n, backoff
		return nil
	}
}

// RequestTimeout bounds each model request, until its reply is complete
// (default 2m). A request that runs out is retried as an HTTP 5xx is.
func RequestTimeout(d time.Duration) Option {
	return func(c *config) error {
		if c.requestTimeout != 0 {
			return invalidf("RequestTimeout given twice")
		}
		if d <= 0 {
			return invalidf("RequestTimeout(%v): must be positive", d)
		}
		c.requestTimeout = d
		return nil
	}
}

// CallTimeout bounds each tool call, a Request to another agent (default
// 60s). A call that runs out returns a timeout error to the
// model.
func CallTimeout(d time.Duration) Option {
	return func(c *config) error {
		if c.callTimeout != 0 {
			return invalidf("CallTimeout given twice")
		}
		if d <= 0 {
			return invalidf("CallTimeout(%v): must be positive", d)
		}
		c.callTimeout = d
		return nil
	}
}

// Rediscover sets how the agent keeps its view of the space fresh. A turn
// that starts when the agent last asked the space for help longer ago than
// every (default 10s; 0: every turn) surveys the space before its first
// model call, with agency.Survey: one broadcast help, whose answers it
// waits for, on a space that can tell who a broadcast reached (space.Local)
// until each has answered, on one that cannot (amqpspace) until none has
// come for settle (default 250ms), and at most twice settle in all. The
// agents it knew that did not answer (gone, or busy with a long action)
// are then asked directly, at most 8: one the space says is gone is
// forgotten, however long the space takes to say so (a broker under load
// returns an unroutable message late); the others are kept, their answers
// awaited for settle once the space has taken the help, and taken
// whenever they come.
func Rediscover(every, settle time.Duration) Option {
	return func(c *config) error {
		if c.rediscoverSet {
			return invalidf("Rediscover given twice")
		}
		if every < 0 || settle <= 0 {
			return invalidf("Rediscover(%v, %v): want every >= 0 and a positive settle", every, settle)
		}
		c.rediscoverSet, c.rediscover, c.settle = true, every, settle
		return nil
	}
}

// Allow offers the model only the actions that an Allow names (and the
// access policies let the agent call): every action of the agent with the
// given id when no action is named, else the actions named. The id "*"
// stands for every agent. Allow may be given several times; without any,
// every action is offered but each agent's say.
//
// An agent's say is offered only when an Allow names it, by name or with
// every action of that agent: Allow("*") offers every action, each say
// included, so that an LLM agent can talk to the others.
func Allow(agent string, actions ...string) Option {
	return func(c *config) error {
		s, err := newSelector("Allow", agent, actions)
		if err != nil {
			return err
		}
		c.allow = append(c.allow, s)
		return nil
	}
}

// Deny never offers the model the actions named, or every action of the
// agent with the given id when none is named ("*" for every agent). Deny
// wins over Allow. It may be given several times.
func Deny(agent string, actions ...string) Option {
	return func(c *config) error {
		s, err := newSelector("Deny", agent, actions)
		if err != nil {
			return err
		}
		c.deny = append(c.deny, s)
		return nil
	}
}

// Temperature sets the sampling temperature (0 to 2). The API client
// leaves a zero out of the request, so a temperature of 0 is sent as the
// smallest positive float32 (about 1.4e-45), which servers treat as 0.
func Temperature(t float64) Option {
	return func(c *config) error {
		if c.temperatureSet {
			return invalidf("Temperature given twice")
		}
		if t < 0 || t > 2 || math.IsNaN(t) {
			return invalidf("Temperature(%v): want 0 to 2", t)
		}
		c.temperatureSet, c.params.Temperature = true, &t
		return nil
	}
}

// TopP sets nucleus sampling's probability mass (above 0, at most 1).
func TopP(p float64) Option {
	return func(c *config) error {
		if c.topPSet {
			return invalidf("TopP given twice")
		}
		if !(p > 0 && p <= 1) {
			return invalidf("TopP(%v): want more than 0 and at most 1", p)
		}
		c.topPSet, c.params.TopP = true, &p
		return nil
	}
}

// MaxTokens bounds the tokens of each model reply (sent as max_tokens,
// which every OpenAI-compatible server takes).
func MaxTokens(n int) Option {
	return func(c *config) error {
		if c.params.MaxTokens != 0 {
			return invalidf("MaxTokens given twice")
		}
		if n < 1 {
			return invalidf("MaxTokens(%d): at least 1", n)
		}
		c.params.MaxTokens = n
		return nil
	}
}

// Seed asks the server for deterministic sampling with the given seed.
func Seed(n int) Option {
	return func(c *config) error {
		if c.seedSet {
			return invalidf("Seed given twice")
		}
		c.seedSet, c.params.Seed = true, &n
		return nil
	}
}

// ToolChoice sets whether the model may call tools: "auto" (the servers'
// default), "none", "required", or the name of the one tool it must call.
func ToolChoice(choice string) Option {
	return func(c *config) error {
		if c.params.ToolChoice != "" {
			return invalidf("ToolChoice given twice")
		}
		if choice == "" {
			return invalidf("ToolChoice(\"\")")
		}
		c.params.ToolChoice = choice
		return nil
	}
}

// ParallelToolCalls sets whether the model may make several tool calls in
// one reply (the servers' default is yes).
func ParallelToolCalls(on bool) Option {
	return func(c *config) error {
		if c.params.ParallelToolCalls != nil {
			return invalidf("ParallelToolCalls given twice")
		}
		c.params.ParallelToolCalls = &on
		return nil
	}
}

// Format asks the model to answer in JSON: matching f.Schema, or any JSON
// object when f.Schema is nil.
func Format(f ResponseFormat) Option {
	return func(c *config) error {
		if c.params.ResponseFormat != nil {
			return invalidf("Format given twice")
		}
		if f.Schema != nil && (f.Name == "" || !isObject(f.Schema)) {
			return invalidf("Format: a schema needs a name and must be a JSON object")
		}
		if f.Schema != nil {
			f.Schema = append(json.RawMessage(nil), f.Schema...)
		}
		c.params.ResponseFormat = &f
		return nil
	}
}

// Stream has the model's replies streamed, each piece of their text given
// to f as it arrives (see [Chunk]), and then a Done chunk; the Done chunk
// of a reply that broke part-way carries the error (Chunk.Err), and the
// text given before it is abandoned. f is called on the turn's goroutine,
// one call at a time per conversation; a slow f slows the turn.
//
// Without Stream, a reply is streamed all the same when the say's sender
// asked for the parts of its answer (agency.Agent.Stream): each piece of
// text goes to that sender, as a part (agency.Emit), as the model writes
// it; the text the model writes beside tool calls included.
func Stream(f func(ctx context.Context, c Chunk)) Option {
	return func(c *config) error {
		if c.stream != nil {
			return invalidf("Stream given twice")
		}
		if f == nil {
			return invalidf("Stream(nil)")
		}
		c.stream = f
		return nil
	}
}

// OnUsage has f called after each turn with the turn's usage and the
// conversation's since the agent started (see also [Agent.Usage]); owner
// is the agent the conversation belongs to (see [ConversationKey]).
func OnUsage(f func(ctx context.Context, owner, conversation string, turn, sum Usage)) Option {
	return func(c *config) error {
		if c.onUsage != nil {
			return invalidf("OnUsage given twice")
		}
		if f == nil {
			return invalidf("OnUsage(nil)")
		}
		c.onUsage = f
		return nil
	}
}

// Relays names the agents that speak for others (a web front that relays
// many people, say): a say from one of them may carry
// __meta__.on_behalf_of, the id of whom it speaks for, and is then a turn
// of that one's conversation, which it may read and continue as they
// could. No agent is a relay unless named here; a say with on_behalf_of
// from any other agent is refused with permission_denied.
func Relays(ids ...string) Option {
	return func(c *config) error {
		if c.relays != nil {
			return invalidf("Relays given twice")
		}
		if len(ids) == 0 {
			return invalidf("Relays(): name at least one agent")
		}
		for _, id := range ids {
			if err := agency.ValidateID(id); err != nil {
				return invalidf("Relays: %v", err)
			}
		}
		c.relays = slices.Clone(ids)
		return nil
	}
}

// Extend adds an extension, whose hooks the agent calls on every turn
// after those of the extensions given before it.
func Extend(x Extension) Option {
	return func(c *config) error {
		if x.Before == nil && x.Call == nil && x.Result == nil && x.Answer == nil && x.Added == nil && x.Removing == nil {
			return invalidf("Extend: the extension sets no hook")
		}
		c.exts = append(c.exts, x)
		return nil
	}
}

// HTTPClient sets the HTTP client of the API calls (default: a client
// without a timeout; RequestTimeout and the turn's context bound each call).
func HTTPClient(hc *http.Client) Option {
	return func(c *config) error {
		if c.httpClient != nil {
			return invalidf("HTTPClient given twice")
		}
		if hc == nil {
			return invalidf("HTTPClient(nil)")
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
			return invalidf("Logger given twice")
		}
		if l == nil {
			return invalidf("Logger(nil)")
		}
		c.logger = l
		return nil
	}
}
