package openai

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	gopenai "github.com/sashabaranov/go-openai"

	"github.com/seed72275b23/agency-go/agency"
)

// ErrNoEndpoint is returned by [New] when neither an API key nor a base URL
// is set, through the options or the environment.
var ErrNoEndpoint = errors.New("openai: no API key or base URL: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local model server), or pass APIKey or BaseURL")

// Agent is an agent backed by a language model behind an OpenAI-compatible
// chat-completions API. It learns what the space offers through help,
// offers every action of every other agent to the model as a tool, and runs
// the tool calls the model makes as requests to those agents.
//
// Add its [Agent.Agent] to a space. Others talk to it through its action
// "say" ([SayArgs]); it answers each say with a say of its own to the sender
// and returns the same text as the action's value.
//
// It runs one turn at a time, like any agent with the default concurrency,
// and keeps one conversation per partner. An action of another agent that
// asks this agent to say something while this agent waits for that action
// waits behind the running turn, until its call times out.
type Agent struct {
	agent  *agency.Agent
	client *gopenai.Client
	model  string
	prompt string // "" sends no system message

	maxSteps    int
	history     int
	retries     int
	backoff     time.Duration
	callTimeout time.Duration
	logger      *slog.Logger

	catalog catalog

	convMu        sync.Mutex
	conversations map[string][]gopenai.ChatCompletionMessage // partner id → history
}

// New returns an LLM agent with the given id, not yet in a space. It fails
// when the id is not a valid agent id, when an option is invalid or
// repeated (agency.ErrInvalidOption), and when neither an API key nor a base
// URL is set (ErrNoEndpoint). Options win over the environment variables
// OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL.
func New(id string, opts ...Option) (*Agent, error) {
	var c config
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	key := optOrEnv(c.apiKey, "OPENAI_API_KEY")
	baseURL := optOrEnv(c.baseURL, "OPENAI_BASE_URL")
	if key == "" && baseURL == "" {
		return nil, ErrNoEndpoint
	}
	if c.baseURL == nil && baseURL != "" {
		if err := checkBaseURL(baseURL); err != nil {
			return nil, fmt.Errorf("OPENAI_BASE_URL: %w", err)
		}
	}
	model := optOrEnv(c.model, "OPENAI_MODEL")
	if model == "" {
		model = defaultModel
	}

	a := &Agent{
		model:         model,
		prompt:        fmt.Sprintf(defaultPrompt, id),
		maxSteps:      defaultMaxSteps,
		history:       defaultHistory,
		retries:       defaultRetries,
		backoff:       defaultBackoff,
		callTimeout:   defaultCallTimeout,
		logger:        slog.New(slog.DiscardHandler),
		conversations: make(map[string][]gopenai.ChatCompletionMessage),
	}
	if c.systemPrompt != nil {
		a.prompt = *c.systemPrompt
	}
	if c.maxSteps != 0 {
		a.maxSteps = c.maxSteps
	}
	if c.history != 0 {
		a.history = c.history
	}
	if c.retriesSet {
		a.retries, a.backoff = c.retries, c.backoff
	}
	if c.callTimeout != 0 {
		a.callTimeout = c.callTimeout
	}
	agentOpts := []agency.Option{agency.Hooks(a), agency.OwnBroadcasts(false)}
	if c.logger != nil {
		a.logger = c.logger
		agentOpts = append(agentOpts, agency.Logger(c.logger))
	}
	a.catalog.init()

	cfg := gopenai.DefaultConfig(key)
	if baseURL != "" {
		cfg.BaseURL = baseURL
	}
	if c.httpClient != nil {
		cfg.HTTPClient = c.httpClient
	}
	a.client = gopenai.NewClientWithConfig(cfg)

	ag, err := agency.NewAgent(id, agentOpts...)
	if err != nil {
		return nil, err
	}
	if err := agency.Register(ag, "say", a.say,
		agency.Describe("Talk to "+id+", an assistant backed by a language model that can use the actions of the other agents in the space. It answers with a say to the sender and returns the same text."),
		agency.Returns("the answer"),
		agency.Example(SayArgs{Content: "What can you do?"}),
	); err != nil {
		return nil, err
	}
	a.agent = ag
	return a, nil
}

// Agent returns the agent to add to a space.
func (a *Agent) Agent() *agency.Agent { return a.agent }

func optOrEnv(opt *string, env string) string {
	if opt != nil {
		return *opt
	}
	return os.Getenv(env)
}

// defaultPrompt is the system prompt unless SystemPrompt replaces it; %s is
// the agent's id.
const defaultPrompt = `You are %s, an agent in a space shared with other agents. Each tool you have is an action that another agent offers; its description names the agent and says what the action does. Call tools when they help to answer; you may call several at once. When a call fails, the result starts with "error:" and says what was wrong: correct the call and try again, or explain the problem. When you are done, answer in plain text.`
