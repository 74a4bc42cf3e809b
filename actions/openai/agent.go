package openai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	gopenai "github.com/sashabaranov/go-openai"

	"github.com/seed72275b23/agency-go/agency"
)

// ErrNoEndpoint is returned by [New] when neither an API key nor a base URL
// is set, through the options or the environment.
var ErrNoEndpoint = errors.New("openai: no API key or base URL: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local model server), or pass APIKey or BaseURL")

// Agent is an agent backed by a language model behind an OpenAI-compatible
// chat-completions API. It learns what the space offers through help,
// offers the actions of the other agents to the model as tools, and runs
// the tool calls the model makes as requests to those agents.
//
// Add its [Agent.Agent] to a space. Others talk to it through its action
// "say" ([SayArgs]); it answers each say with a say of its own to the sender
// and returns the same text as the action's value.
//
// It keeps one history per conversation (__meta__.conversation, or the
// sender's id when a say has none) and runs one turn at a time per
// conversation, turns of different conversations at once. A conversation
// belongs to the agent that started it: a say from another agent that
// names the same conversation id is a turn of a conversation of that
// agent's own (see [ConversationKey]), which never sees or changes the
// first one's history or usage. Only an agent named with [Relays] may
// speak for others (__meta__.on_behalf_of). Its methods are safe for
// concurrent use.
type Agent struct {
	agent  *agency.Agent
	client *gopenai.Client
	model  string
	prompt string // "" sends no system message

	maxSteps       int
	retries        int
	backoff        time.Duration
	callTimeout    time.Duration
	requestTimeout time.Duration
	every, settle  time.Duration
	params         Params
	allow, deny    []selector
	exts           []Extension
	relays         []string
	stream         func(context.Context, Chunk)
	onUsage        func(ctx context.Context, owner, conversation string, turn, sum Usage)
	logger         *slog.Logger
	sleep          func(ctx context.Context, d time.Duration) error // waits between retries; tests record it

	memory  Memory
	convs   convLocks
	turns   chan struct{} // one token per turn under way
	catalog catalog

	maxResumes int           // see Resumes
	maxTurnAge time.Duration // see Resumes
	resume     resumer       // the pending turns taken up when the agent joined its space

	usageMu sync.Mutex
	usage   *simplelru.LRU[string, Usage] // ConversationKey → what its turns used
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
	if c.memory != nil && c.history != 0 {
		return nil, invalidf("History bounds the default memory; it cannot be given with WithMemory")
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
		model:          model,
		prompt:         fmt.Sprintf(defaultPrompt, id),
		maxSteps:       or(c.maxSteps, defaultMaxSteps),
		retries:        defaultRetries,
		backoff:        defaultBackoff,
		callTimeout:    or(c.callTimeout, defaultCallTimeout),
		requestTimeout: or(c.requestTimeout, defaultRequestTimeout),
		every:          defaultRediscover,
		settle:         defaultSettle,
		params:         c.params,
		allow:          c.allow,
		deny:           c.deny,
		exts:           c.exts,
		relays:         c.relays,
		stream:         c.stream,
		onUsage:        c.onUsage,
		logger:         slog.New(slog.DiscardHandler),
		sleep:          sleep,
		memory:         c.memory,
		turns:          make(chan struct{}, or(c.concurrency, defaultConcurrency)),
		usage:          newLRU[Usage](defaultConversations),
	}
	if c.systemPrompt != nil {
		a.prompt = *c.systemPrompt
	}
	if c.retriesSet {
		a.retries, a.backoff = c.retries, c.backoff
	}
	a.maxResumes, a.maxTurnAge = DefaultMaxResumes, DefaultMaxTurnAge
	if c.resumesSet {
		a.maxResumes, a.maxTurnAge = c.maxResumes, c.maxTurnAge
	}
	if c.rediscoverSet {
		a.every, a.settle = c.rediscover, c.settle
	}
	if a.memory == nil {
		a.memory = NewMemory(or(c.history, defaultHistory), defaultConversations)
	}
	// Says wait for their conversation in handlers of their own, so that
	// help answers and other responses are read meanwhile: the agent's
	// goroutines are many more than its turns. The says of one
	// conversation start in the order they came.
	agentOpts := []agency.Option{
		agency.Hooks(hooks{a}), agency.OwnBroadcasts(false), agency.Concurrency(maxHandlers),
		agency.Sequence(a.saySequence),
	}
	if c.logger != nil {
		a.logger = c.logger
		agentOpts = append(agentOpts, agency.Logger(c.logger))
	}
	agentOpts = append(agentOpts, c.agentOpts...)
	a.catalog.init()

	cfg := gopenai.DefaultConfig(key)
	if baseURL != "" {
		cfg.BaseURL = baseURL
	}
	cfg.HTTPClient = withRetryAfter(c.httpClient)
	a.client = gopenai.NewClientWithConfig(cfg)

	ag, err := agency.NewAgent(id, agentOpts...)
	if err != nil {
		return nil, err
	}
	if err := agency.Register(ag, "say", a.say,
		agency.Describe("Talk to "+id+", an assistant backed by a language model that can use the actions of the other agents in the space. It answers with a say to the sender and returns the same text."),
		agency.Returns("the answer; empty when the conversation was handed on and another agent answers"),
		agency.Example(SayArgs{Content: "What can you do?"}),
	); err != nil {
		return nil, err
	}
	a.agent = ag
	return a, nil
}

// saySequence keys a say by its conversation, so that the says of one
// conversation run in arrival order; other messages run as they come.
func (a *Agent) saySequence(m *agency.Message) string {
	if m.Action != "say" {
		return ""
	}
	owner, err := a.ownerOf(m)
	if err != nil {
		return "" // refused when it runs
	}
	return ConversationKey(owner, conversationOf(m))
}

// maxHandlers bounds the agent's handlers at once: says waiting for their
// conversation or a turn, and hooks.
const maxHandlers = 1024

// Agent returns the agent to add to a space.
func (a *Agent) Agent() *agency.Agent { return a.agent }

// Usage returns what the turns of owner's conversation have used since
// the agent was created (for the 1,000 conversations used last). The
// owner of a conversation is the agent that started it (see
// [ConversationKey]).
func (a *Agent) Usage(owner, conversation string) Usage {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	u, _ := a.usage.Get(ConversationKey(owner, conversation))
	return u
}

// Continue runs a turn of a conversation handed over by another agent:
// with c.History (when not nil) as the conversation's history, the model
// is called at once, and its answer is said to c.Partner (with the
// conversation's id in __meta__) and returned. The conversation is
// c.Owner's (c.Partner's when Owner is empty): the user's later says in it
// continue it, anyone else's are conversations of their own. It waits while another turn
// of the conversation runs. It is meant for the handler of an action
// through which the conversation is handed over (a handoff); the answer is
// empty when an extension ended the turn without one.
func (a *Agent) Continue(ctx context.Context, c Continuation) (string, error) {
	if c.Conversation == "" || c.Partner == "" {
		return "", errors.New("openai: Continue needs a conversation and a partner")
	}
	owner := c.Owner
	if owner == "" {
		owner = c.Partner
	}
	key := ConversationKey(owner, c.Conversation)
	unlock, err := a.convs.lock(ctx, key)
	if err != nil {
		return "", err
	}
	defer unlock()
	if c.History != nil {
		if err := a.memory.Replace(ctx, key, c.History); err != nil {
			return "", fmt.Errorf("openai: the history of %q: %w", c.Conversation, err)
		}
	}
	replyTo := c.ReplyTo
	if m := agency.MessageFrom(ctx); m != nil && replyTo == "" {
		replyTo = m.ID
	}
	var id string
	if m := agency.MessageFrom(ctx); m != nil {
		id = m.ID
	}
	return a.serve(ctx, owner, c.Conversation, c.Partner, nil, replyTo, true, c.Data, id, nil)
}

func optOrEnv(opt *string, env string) string {
	if opt != nil {
		return *opt
	}
	return os.Getenv(env)
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// defaultPrompt is the system prompt unless SystemPrompt replaces it; %s is
// the agent's id.
const defaultPrompt = `You are %s, an agent in a space shared with other agents. Each tool you have is an action that another agent offers; its description names the agent and says what the action does. Call tools when they help to answer; you may call several at once. When a call fails, the result starts with "error:" and says what was wrong: correct the call and try again, or explain the problem. When you are done, answer in plain text.`
