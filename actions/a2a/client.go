package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/agency"
)

// ErrRemote is the error of a call that did not reach the remote agent or
// got no usable answer from it: it is unreachable, it timed out, it broke
// the protocol. An answer that says the call failed is an *agency.ActionError
// of its type instead.
var ErrRemote = errors.New("a2a: remote agent")

// Defaults of RemoteConfig.
const (
	DefaultRemoteTimeout = 2 * time.Minute
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultHTTPTimeout   = 30 * time.Second
)

// RemoteConfig configures a remote A2A agent joined to a space. URL is
// required.
type RemoteConfig struct {
	// URL is the agent's base URL (its card is at
	// URL/.well-known/agent-card.json), or the URL of its card.
	URL string
	// ID is the agent's id in the space; empty takes the card's name, with
	// the characters an id may not hold made "_".
	ID string
	// Token is sent as a bearer token, when set.
	Token string
	// HTTPClient makes the requests; nil makes one whose requests time out
	// after DefaultHTTPTimeout, so that a remote that stops answering cannot
	// hold a call.
	HTTPClient *http.Client
	// Timeout bounds one call, polling included (DefaultRemoteTimeout when
	// 0); the caller's deadline, when sooner, bounds it too.
	Timeout time.Duration
	// PollInterval is how often a task that has not ended is read again
	// (DefaultPollInterval when 0).
	PollInterval time.Duration
	// HandoffFrom names the agents that may hand conversations to this one
	// (the action "handoff" of actions/handoff): the conversation's last
	// message goes to the remote agent as text, and its answer is said to
	// the conversation's user.
	HandoffFrom []string
	// Logger receives diagnostics; silent when nil.
	Logger *slog.Logger
}

// Remote is a remote A2A agent as an agent of a space: each skill of its
// card is an action, and "say" sends it text. Its methods are safe for
// concurrent use; its agent handles up to 16 calls at once.
type Remote struct {
	cfg    RemoteConfig
	card   *a2a.AgentCard
	client *a2aclient.Client
	agent  *agency.Agent
	native bool // the remote is served by this package: skills take data parts
	logger *slog.Logger

	mu    sync.Mutex
	convs map[string]conversation // sender and conversation → the remote's context
}

// conversation is where a conversation stands with the remote agent.
type conversation struct {
	contextID string
	taskID    a2a.TaskID // a task that waits for the caller's input, to continue
}

// sayArgs is what "say" takes, as an LLM agent's say does.
type sayArgs = openai.SayArgs

// skillSchema is what the action of a foreign agent's skill takes.
var skillSchema = json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"what to ask of the skill, in words"}},"required":["message"],"additionalProperties":false}`)

// NewRemote resolves the card at cfg.URL and returns the agent that stands
// for the remote agent; add Agent() to a space. Its actions are the card's
// skills: with the JSON Schemas of this package's card extension for an
// agent served by a Server, or taking {"message": text} for any other.
func NewRemote(ctx context.Context, cfg RemoteConfig) (*Remote, error) {
	if cfg.URL == "" {
		return nil, errors.New("a2a: RemoteConfig.URL is required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRemoteTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	r := &Remote{cfg: cfg, logger: cfg.Logger, convs: make(map[string]conversation)}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	card, err := resolveCard(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.card = card
	opts := []a2aclient.FactoryOption{a2aclient.WithJSONRPCTransport(cfg.HTTPClient)}
	if cfg.Token != "" {
		opts = append(opts, a2aclient.WithCallInterceptors(bearerToken(cfg.Token)))
	}
	r.client, err = a2aclient.NewFromCard(ctx, card, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: no interface this client speaks (A2A 1.0 JSON-RPC): %v", ErrRemote, cfg.URL, err)
	}
	id := cfg.ID
	if id == "" {
		id = idFrom(card.Name)
	}
	r.agent, err = agency.NewAgent(id, agency.Concurrency(16))
	if err != nil {
		return nil, fmt.Errorf("a2a: the remote agent's id: %w", err)
	}
	if err := r.register(); err != nil {
		return nil, err
	}
	return r, nil
}

// resolveCard fetches the card at cfg.URL.
func resolveCard(ctx context.Context, cfg RemoteConfig) (*a2a.AgentCard, error) {
	res := &agentcard.Resolver{Client: cfg.HTTPClient, CardParser: agentcard.DefaultCardParser}
	base, opts := cfg.URL, []agentcard.ResolveOption(nil)
	if strings.HasSuffix(base, ".json") {
		i := strings.Index(base, "://")
		j := -1
		if i >= 0 {
			j = strings.Index(base[i+3:], "/")
		}
		if j < 0 {
			return nil, fmt.Errorf("a2a: %q is not a card's URL", base)
		}
		base, opts = base[:i+3+j], []agentcard.ResolveOption{agentcard.WithPath(base[i+3+j:])}
	}
	if cfg.Token != "" {
		opts = append(opts, agentcard.WithRequestHeader("Authorization", "Bearer "+cfg.Token))
	}
	card, err := res.Resolve(ctx, base, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: the card at %s: %v", ErrRemote, cfg.URL, err)
	}
	return card, nil
}

// idFrom makes an agent id of a card's name.
func idFrom(name string) string {
	id := strings.Map(func(r rune) rune {
		switch {
		case r == '*' || r == '#' || r == ' ' || r == '\t' || r == '\n' || r == '\r':
			return '_'
		}
		return r
	}, strings.TrimSpace(name))
	id = strings.TrimPrefix(id, "amq.")
	if id == "" || id == "_" {
		id = "remote"
	}
	return id
}

// register registers the actions of the card's skills, say, and handoff.
func (r *Remote) register() error {
	schemas := r.schemas()
	r.native = schemas != nil
	for _, sk := range r.card.Skills {
		if sk.ID == "" || sk.ID == "say" && !r.native {
			continue
		}
		desc := sk.Description
		if desc == "" {
			desc = sk.Name
		}
		skill := sk.ID
		var opts []agency.ActionOption
		opts = append(opts, agency.Describe(desc))
		var err error
		if r.native {
			schema := schemas[skill]
			if schema == nil {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			if skill == "say" {
				continue // registered below, typed
			}
			check := r.validator(skill, schema)
			err = agency.RegisterJSON(r.agent, skill, schema, func(ctx context.Context, args json.RawMessage) (any, error) {
				if check != nil {
					var v any
					if err := json.Unmarshal(args, &v); err != nil {
						return nil, agency.InvalidArgsf("the arguments of %q are not JSON: %v", r.agent.ID()+"."+skill, err)
					}
					if err := check.Validate(v); err != nil {
						return nil, agency.InvalidArgsf("invalid arguments for %q: %v (send \"help\" for the argument schema)", r.agent.ID()+"."+skill, err)
					}
				}
				return r.callSkill(ctx, skill, args)
			}, opts...)
		} else {
			err = agency.RegisterJSON(r.agent, skill, skillSchema, func(ctx context.Context, args json.RawMessage) (any, error) {
				var a struct {
					Message string `json:"message"`
				}
				if err := json.Unmarshal(args, &a); err != nil || a.Message == "" {
					return nil, agency.InvalidArgsf(`%s.%s takes {"message": text}: the message is missing`, r.agent.ID(), skill)
				}
				return r.talk(ctx, conversationKey(agency.MessageFrom(ctx)), skill, a.Message)
			}, opts...)
		}
		if err != nil {
			r.logger.Warn("a2a: a remote skill is left out", "agent", r.agent.ID(), "skill", skill, "error", err)
		}
	}
	// An agent of a Server takes text where it has a say; any other
	// agent takes text.
	if !r.native || schemas["say"] != nil {
		desc := "Talk to " + r.card.Name + ", a remote A2A agent: " + r.card.Description
		if err := agency.Register(r.agent, "say", r.say, agency.Describe(desc), agency.Returns("its answer")); err != nil {
			return fmt.Errorf("a2a: %w", err)
		}
	}
	if len(r.cfg.HandoffFrom) > 0 {
		if err := handoff.Accept(r.agent, r.takeOver, r.cfg.HandoffFrom...); err != nil {
			return fmt.Errorf("a2a: %w", err)
		}
	}
	return nil
}

// validator compiles a skill's argument schema, with which its arguments
// are checked before the call, as actions/mcp checks a tool's. One that
// does not compile is left to the remote, which checks them all the same.
func (r *Remote) validator(skill string, schema json.RawMessage) *jsonschema.Resolved {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		r.logger.Warn("a2a: a skill's schema is unreadable; its arguments go to the remote unchecked", "agent", r.agent.ID(), "skill", skill, "error", err)
		return nil
	}
	v, err := s.Resolve(nil)
	if err != nil {
		r.logger.Warn("a2a: a skill's schema cannot check arguments; they go to the remote unchecked", "agent", r.agent.ID(), "skill", skill, "error", err)
		return nil
	}
	return v
}

// schemas returns the argument schemas of this package's card extension,
// or nil when the card has none.
func (r *Remote) schemas() map[string]json.RawMessage {
	for _, x := range r.card.Capabilities.Extensions {
		if x.URI != ExtensionURI {
			continue
		}
		out := make(map[string]json.RawMessage)
		actions, _ := x.Params["actions"].(map[string]any)
		for name, v := range actions {
			e, _ := v.(map[string]any)
			if b, err := json.Marshal(e["args"]); err == nil && len(b) > 0 && b[0] == '{' {
				out[name] = b
			}
		}
		return out
	}
	return nil
}

// Agent returns the agent that stands for the remote agent.
func (r *Remote) Agent() *agency.Agent { return r.agent }

// Card returns the remote agent's card, as resolved.
func (r *Remote) Card() *a2a.AgentCard { return r.card }

// Close releases the client.
func (r *Remote) Close() error { return r.client.Destroy() }

// callSkill calls the skill of a remote served by a Server with a data
// part, and returns the {"result": …} of its artifact.
func (r *Remote) callSkill(ctx context.Context, skill string, args json.RawMessage) (any, error) {
	var a any
	_ = json.Unmarshal(args, &a)
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"action": skill, "args": a}))
	res, err := r.send(ctx, msg)
	if err != nil {
		return nil, err
	}
	for _, p := range res.parts {
		if d, ok := p.Data().(map[string]any); ok {
			if v, ok := d["result"]; ok {
				return v, nil
			}
		}
	}
	return partsValue(res.parts), nil
}

// say sends text to the remote agent, in the remote context of the
// sender's conversation, and returns the answer's text. A say that is no
// answer itself is answered with a say back, as an LLM agent's is.
func (r *Remote) say(ctx context.Context, args sayArgs) (string, error) {
	m := agency.MessageFrom(ctx)
	text, err := r.talk(ctx, conversationKey(m), "", args.Content)
	if err != nil {
		return "", err
	}
	_, answered := m.Meta["in_reply_to"]
	_, asTool := m.Meta["tool_call_id"]
	if !answered && !asTool && m.From != "" {
		meta := map[string]any{"in_reply_to": m.ID}
		if c, ok := m.Meta["conversation"]; ok {
			meta["conversation"] = c
		}
		if _, err := r.agent.SendMessage(ctx, &agency.Message{To: m.From, Action: "say", Meta: meta, Args: sayArgs{Content: text}}); err != nil {
			r.logger.Warn("a2a: the answer was not said back", "to", m.From, "error", err)
		}
	}
	return text, nil
}

// talk sends text (for skill, when set) in the conversation key (see
// conversationKey) and returns the answer's text.
func (r *Remote) talk(ctx context.Context, key, skill, text string) (string, error) {
	r.mu.Lock()
	conv := r.convs[key]
	r.mu.Unlock()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	msg.ContextID, msg.TaskID = conv.contextID, conv.taskID
	if skill != "" {
		msg.Metadata = map[string]any{"skill": skill}
	}
	res, err := r.send(ctx, msg)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	if len(r.convs) > 10000 {
		clear(r.convs)
	}
	next := conversation{contextID: res.contextID}
	if res.inputRequired {
		next.taskID = res.taskID // the answer is a question: the next say answers it
	}
	r.convs[key] = next
	r.mu.Unlock()
	return partsText(res.parts), nil
}

// conversationKey keys the remote context by the sender and its
// conversation, so that no sender continues another's, and by the
// conversation's owner when the sender serves it for another
// (__meta__.conversation_owner), so that the remote never shows one owner
// what it was told for another who named the same conversation.
func conversationKey(m *agency.Message) string {
	if m == nil {
		return ""
	}
	c, _ := m.Meta["conversation"].(string)
	key := m.From + "\x00" + c
	if o, _ := m.Meta[openai.MetaConversationOwner].(string); o != "" && o != m.From {
		key += "\x00" + o
	}
	return key
}

// takeOver answers a conversation handed to the remote agent: its
// message goes to the remote, and the answer to the conversation's user.
func (r *Remote) takeOver(ctx context.Context, t handoff.Transfer) error {
	text := t.Message
	for i := len(t.History) - 1; i >= 0; i-- {
		if t.History[i].Role == openai.RoleUser {
			text = t.History[i].Content
			break
		}
	}
	if text == "" {
		text = "(a conversation was handed to you)"
	}
	key := conversationKey(&agency.Message{From: t.User, Meta: map[string]any{"conversation": t.Conversation}})
	answer, err := r.talk(ctx, key, "", text)
	if err != nil {
		return err
	}
	_, err = r.agent.SendMessage(ctx, &agency.Message{To: t.User, Action: "say", Meta: map[string]any{"conversation": t.Conversation}, Args: sayArgs{Content: answer}})
	return err
}

// answer is what the remote agent answered: the parts of its result, or of
// its question when it waits for input.
type answer struct {
	parts         []*a2a.Part
	contextID     string
	taskID        a2a.TaskID
	inputRequired bool
}

// send sends msg, follows its task until it ends or asks for input, and
// turns failures into errors. To a remote that streams, it streams, so
// that it learns the task's id at once and can cancel the task when the
// caller stops waiting; to any other it sends and polls.
func (r *Remote) send(ctx context.Context, msg *a2a.Message) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	req := &a2a.SendMessageRequest{Message: msg}
	if r.card.Capabilities.Streaming {
		return r.stream(ctx, req)
	}
	res, err := r.client.SendMessage(ctx, req)
	if err != nil {
		return answer{}, r.transportError(ctx, "SendMessage", err)
	}
	switch v := res.(type) {
	case *a2a.Message:
		return answer{parts: v.Parts, contextID: v.ContextID}, nil
	case *a2a.Task:
		return r.follow(ctx, v)
	}
	return answer{}, fmt.Errorf("%w %s answered %T, neither a message nor a task", ErrRemote, r.agent.ID(), res)
}

// stream sends req as a stream and builds the task from its events until
// it settles; a stream that ends before that is followed by polling.
func (r *Remote) stream(ctx context.Context, req *a2a.SendMessageRequest) (answer, error) {
	var task *a2a.Task
	continuing := req.Message.TaskID != "" // the first snapshot still asks the question being answered
	for ev, err := range r.client.SendStreamingMessage(ctx, req) {
		if err != nil {
			if task != nil && ctx.Err() != nil {
				r.cancelTask(task.ID)
			}
			return answer{}, r.transportError(ctx, "SendStreamingMessage", err)
		}
		switch v := ev.(type) {
		case *a2a.Message:
			return answer{parts: v.Parts, contextID: v.ContextID}, nil
		case *a2a.Task:
			task = v
			if continuing && v.Status.State == a2a.TaskStateInputRequired {
				continue
			}
		case *a2a.TaskStatusUpdateEvent:
			if task == nil {
				task = &a2a.Task{ID: v.TaskID, ContextID: v.ContextID}
			}
			task.Status = v.Status
		case *a2a.TaskArtifactUpdateEvent:
			if task == nil {
				task = &a2a.Task{ID: v.TaskID, ContextID: v.ContextID}
			}
			i := slices.IndexFunc(task.Artifacts, func(a *a2a.Artifact) bool { return v.Artifact != nil && a.ID == v.Artifact.ID })
			switch {
			case v.Artifact == nil:
			case i >= 0 && v.Append:
				task.Artifacts[i].Parts = append(task.Artifacts[i].Parts, v.Artifact.Parts...)
			case i >= 0:
				task.Artifacts[i] = v.Artifact
			default:
				task.Artifacts = append(task.Artifacts, v.Artifact)
			}
		}
		if _, artifact := ev.(*a2a.TaskArtifactUpdateEvent); task != nil && !artifact {
			if ans, done, err := r.settle(task); done {
				return ans, err
			}
		}
	}
	if task == nil {
		return answer{}, fmt.Errorf("%w %s ended its stream without a task", ErrRemote, r.agent.ID())
	}
	return r.follow(ctx, task)
}

// settle returns the answer of a task that has ended or waits for the
// caller's input, and done; a task that goes on is not done.
func (r *Remote) settle(task *a2a.Task) (ans answer, done bool, err error) {
	switch st := task.Status.State; {
	case st == a2a.TaskStateCompleted:
		var parts []*a2a.Part
		for _, art := range task.Artifacts {
			parts = append(parts, art.Parts...)
		}
		if len(parts) == 0 && task.Status.Message != nil {
			parts = task.Status.Message.Parts
		}
		return answer{parts: parts, contextID: task.ContextID, taskID: task.ID}, true, nil
	case st == a2a.TaskStateInputRequired && !r.native:
		// A question for the caller (an agent of a Server waits for its
		// approver instead, and is followed).
		var parts []*a2a.Part
		if task.Status.Message != nil {
			parts = task.Status.Message.Parts
		}
		return answer{parts: parts, contextID: task.ContextID, taskID: task.ID, inputRequired: true}, true, nil
	case st == a2a.TaskStateFailed || st == a2a.TaskStateRejected || st == a2a.TaskStateCanceled || st == a2a.TaskStateAuthRequired:
		return answer{}, true, r.taskError(task)
	}
	return answer{}, false, nil
}

// follow reads the task again until it settles; when the caller stops
// waiting first, it cancels the task.
func (r *Remote) follow(ctx context.Context, task *a2a.Task) (answer, error) {
	tick := time.NewTicker(r.cfg.PollInterval)
	defer tick.Stop()
	for {
		if ans, done, err := r.settle(task); done {
			return ans, err
		}
		select {
		case <-ctx.Done():
			r.cancelTask(task.ID)
			return answer{}, r.transportError(ctx, "waiting for task "+string(task.ID), ctx.Err())
		case <-tick.C:
		}
		next, err := r.client.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			if ctx.Err() != nil {
				r.cancelTask(task.ID)
			}
			return answer{}, r.transportError(ctx, "GetTask", err)
		}
		task = next
	}
}

// cancelTask cancels a task the caller no longer waits for, best effort.
func (r *Remote) cancelTask(id a2a.TaskID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id}); err != nil {
		r.logger.Debug("a2a: a task given up was not canceled", "agent", r.agent.ID(), "task", id, "error", err)
	}
}

// transportError is the error of a call that got no answer.
func (r *Remote) transportError(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return agency.ActionFailedf("%v %s at %s did not answer in time (%s): %v", ErrRemote, r.agent.ID(), r.cfg.URL, what, err)
	}
	return agency.ActionFailedf("%v %s at %s: %s failed: %v", ErrRemote, r.agent.ID(), r.cfg.URL, what, err)
}

// taskError turns a task that failed into the error of its type.
func (r *Remote) taskError(task *a2a.Task) error {
	typ, text := "", ""
	if m := task.Status.Message; m != nil {
		for _, p := range m.Parts {
			if d, ok := p.Data().(map[string]any); ok {
				typ, _ = d["type"].(string)
				text, _ = d["error"].(string)
			}
		}
		if text == "" {
			text = partsText(m.Parts)
		}
	}
	if text == "" {
		text = "the remote task ended " + string(task.Status.State)
	}
	switch agency.ErrorType(typ) {
	case agency.TypeInvalidArgs:
		return agency.InvalidArgsf("%s", text)
	case agency.TypePermissionDenied:
		return agency.PermissionDeniedf("%s", text)
	}
	if task.Status.State == a2a.TaskStateAuthRequired {
		return agency.PermissionDeniedf("%s (the remote agent asks for authentication)", text)
	}
	if typ != "" && typ != string(agency.TypeActionFailed) {
		text = typ + ": " + text
	}
	return agency.ActionFailedf("%s", text)
}

// partsText joins the text of parts; data parts are given as JSON.
func partsText(parts []*a2a.Part) string {
	var b strings.Builder
	for _, p := range parts {
		var s string
		switch v := p.Content.(type) {
		case a2a.Text:
			s = string(v)
		case a2a.Data:
			j, _ := json.Marshal(v.Value)
			s = string(j)
		case a2a.URL:
			s = string(v)
		}
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(s)
	}
	return b.String()
}

// partsValue is the value of parts: one data part's data, else the text.
func partsValue(parts []*a2a.Part) any {
	if len(parts) == 1 {
		if d := parts[0].Data(); d != nil {
			return d
		}
	}
	return partsText(parts)
}

// bearerToken sends a bearer token with every request.
type bearerToken string

func (t bearerToken) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams["Authorization"] = []string{"Bearer " + string(t)}
	return ctx, nil, nil
}

func (bearerToken) After(context.Context, *a2aclient.Response) error { return nil }
