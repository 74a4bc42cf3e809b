package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/internal/stack"
)

// Connector makes a new transport to an MCP server each time it is
// called: the first connection and every restart after the server died.
type Connector func() (sdk.Transport, error)

// Command is a Connector that starts the command name with args and speaks
// MCP over its stdin and stdout (its stderr goes to this process's).
//
// The command gets only a few of this process's environment variables,
// those [InheritedEnv] names (HOME, LOGNAME, PATH, SHELL, TERM, USER; on
// Windows its usual set), as the official TypeScript SDK gives a server it
// starts, and then env, given as "KEY=value" pairs, which wins over them.
// This process's secrets (OPENAI_API_KEY, AMQP_URL, DATABASE_URL, …)
// reach a third-party server only when given in env; pass os.Environ() to
// give it everything.
func Command(env []string, name string, args ...string) Connector {
	return func() (sdk.Transport, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = append(inheritedEnv(), env...)
		return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
	}
}

// InheritedEnv returns the names of the environment variables that a
// server started by [Command] gets from this process: those the official
// TypeScript SDK passes.
func InheritedEnv() []string {
	if runtime.GOOS == "windows" {
		return []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PROCESSOR_ARCHITECTURE",
			"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE", "PROGRAMFILES"}
	}
	return []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
}

// inheritedEnv returns the InheritedEnv variables that are set, as
// "KEY=value", leaving out values that start with "()" (exported shell
// functions), as the TypeScript SDK does.
func inheritedEnv() []string {
	var env []string
	for _, k := range InheritedEnv() {
		if v, ok := os.LookupEnv(k); ok && !strings.HasPrefix(v, "()") {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Endpoint is a Connector to an MCP server over streamable HTTP at url.
// client may be nil (http.DefaultClient); give one whose transport sets
// an Authorization header for a server that checks a bearer token.
func Endpoint(url string, client *http.Client) Connector {
	return func() (sdk.Transport, error) {
		return &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: client}, nil
	}
}

// Client is an agent whose actions are an MCP server's tools: help carries
// each tool's input schema and description as the server gave them (and
// its output schema as the action's returns), calls are validated against
// the input schema with github.com/google/jsonschema-go before they go to
// the server, and an isError result is an action_failed error with the
// server's text. notifications/tools/list_changed updates the actions and
// help.
//
// A call returns the tool's structured content when it has some, else its
// text when all its content is text, else {"content": [...]} as MCP gives
// it.
//
// When the server dies (its process exits, its HTTP endpoint stops
// answering), the calls under way fail at once with action_failed, and the
// next call starts it again (or reconnects): at once the first time, then
// after a pause that doubles with each failure to start, from
// RestartBackoff's least to its most; a call that comes during the pause
// fails at once, saying when the next attempt is. Nothing waits for a dead
// server.
//
// Its methods are safe for concurrent use.
type Client struct {
	agent   *agency.Agent
	connect Connector
	cfg     clientConfig

	mu       sync.Mutex
	session  *sdk.ClientSession // nil while the server is down
	gen      int                // counts sessions, so that an old one's end is told apart
	failures int                // failed starts since the last good one
	retryAt  time.Time          // no new start before
	lastErr  error              // why the server is down
	tools    map[string]*clientTool
	listing  chan struct{} // closed when the list under way ends; nil when none is
	again    bool          // list again when the one under way ends
	closed   bool
	changed  chan struct{} // closed and replaced when the actions change
}

// clientTool is one tool of the server, as an action.
type clientTool struct {
	name     string // the tool's name, which the action has too
	raw      []byte // the tool as the server listed it, to tell a change
	validate *jsonschema.Resolved
}

// NewClient connects to an MCP server through connect, lists its tools and
// returns a client whose agent, with the given id, has them as actions;
// add Agent() to a space. It fails if the server cannot be started or
// listed. Close stops the server.
func NewClient(ctx context.Context, id string, connect Connector, opts ...ClientOption) (*Client, error) {
	cfg := clientConfig{logger: discard, backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax, tools: map[string][]agency.ActionOption{}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	a, err := agency.NewAgent(id, agency.ChangingActions(), agency.Concurrency(cfg.concurrency()), agency.Logger(cfg.logger))
	if err != nil {
		return nil, err
	}
	c := &Client{agent: a, connect: connect, cfg: cfg, tools: map[string]*clientTool{}, changed: make(chan struct{})}
	cs, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.list(ctx, cs); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Agent returns the client's agent, to add to a space.
func (c *Client) Agent() *agency.Agent { return c.agent }

// Close ends the session and stops the server. The agent keeps its
// actions; a call after Close fails.
func (c *Client) Close() error {
	c.mu.Lock()
	cs := c.session
	c.session, c.closed = nil, true
	c.mu.Unlock()
	if cs != nil {
		return cs.Close()
	}
	return nil
}

// changedChan returns a channel closed at the next change of the actions.
func (c *Client) changedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// start connects to the server and keeps the session.
func (c *Client) start(ctx context.Context) (*sdk.ClientSession, error) {
	t, err := c.connect()
	if err == nil {
		client := sdk.NewClient(&sdk.Implementation{Name: "agency-go", Version: ""}, &sdk.ClientOptions{
			Logger:                 c.cfg.sdkLogger,
			ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { c.listChanged() },
			Capabilities:           &sdk.ClientCapabilities{},
		})
		var cs *sdk.ClientSession
		if cs, err = client.Connect(ctx, t, nil); err == nil {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				cs.Close()
				return nil, errors.New("mcp: the client is closed")
			}
			c.gen++
			c.session, c.failures, c.lastErr = cs, 0, nil
			gen := c.gen
			c.mu.Unlock()
			go c.watch(cs, gen)
			return cs, nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures++
	c.retryAt = time.Now().Add(c.backoff())
	c.lastErr = err
	return nil, fmt.Errorf("mcp: cannot start or reach the MCP server of %q: %w", c.agent.ID(), err)
}

// backoff is the pause before the next start, after c.failures failed
// ones; c.mu is held.
func (c *Client) backoff() time.Duration {
	d := c.cfg.backoffMin
	for i := 1; i < c.failures && d < c.cfg.backoffMax; i++ {
		d *= 2
	}
	return min(d, c.cfg.backoffMax)
}

// watch waits for the session to end, and marks the server down if it
// ended by itself.
func (c *Client) watch(cs *sdk.ClientSession, gen int) {
	err := cs.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.session != cs {
		return // closed by Close, or replaced
	}
	if err == nil {
		err = errors.New("the session ended")
	}
	c.session, c.lastErr = nil, err
	c.cfg.logger.Warn("mcp: the MCP server is gone", "agent", c.agent.ID(), "error", err)
}

// down marks the server of session cs as gone, and ends cs.
func (c *Client) down(cs *sdk.ClientSession, err error) {
	c.mu.Lock()
	mine := c.session == cs
	if mine {
		c.session, c.lastErr = nil, err
	}
	c.mu.Unlock()
	if mine {
		c.cfg.logger.Warn("mcp: the MCP server is gone", "agent", c.agent.ID(), "error", err)
		go cs.Close() // stops the process, if it still runs
	}
}

// current returns the live session, starting the server again if it is
// down and its pause is over.
func (c *Client) current(ctx context.Context) (*sdk.ClientSession, error) {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, agency.ActionFailedf("the MCP server of %q was closed", c.agent.ID())
	case c.session != nil:
		cs := c.session
		c.mu.Unlock()
		return cs, nil
	case time.Now().Before(c.retryAt):
		wait, last := time.Until(c.retryAt), c.lastErr
		c.mu.Unlock()
		return nil, agency.ActionFailedf("the MCP server of %q is down (%v); the next start is in %v", c.agent.ID(), last, wait.Round(time.Millisecond))
	}
	c.mu.Unlock()
	cs, err := c.start(ctx)
	if err != nil {
		return nil, agency.ActionFailedf("%v", err)
	}
	// Its tools may have changed while it was down.
	go func() {
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.list(lctx, cs); err != nil {
			c.cfg.logger.Warn("mcp: tools/list failed after a restart", "agent", c.agent.ID(), "error", err)
		}
	}()
	return cs, nil
}

// listChanged lists the tools again: at once, or, when a list is under
// way, once it ends (many notifications cost one more list at most).
func (c *Client) listChanged() {
	c.mu.Lock()
	if c.listing != nil {
		c.again = true
		c.mu.Unlock()
		return
	}
	cs := c.session
	c.mu.Unlock()
	if cs == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.list(ctx, cs); err != nil {
			c.cfg.logger.Warn("mcp: tools/list failed after list_changed", "agent", c.agent.ID(), "error", err)
		}
	}()
}

// list lists the server's tools and makes the agent's actions match them.
func (c *Client) list(ctx context.Context, cs *sdk.ClientSession) error {
	c.mu.Lock()
	for c.listing != nil {
		done := c.listing
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.listing = done
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		again := c.again
		c.listing, c.again = nil, false
		c.mu.Unlock()
		close(done)
		if again {
			c.listChanged()
		}
	}()
	var tools []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("mcp: tools/list of %q: %w", c.agent.ID(), err)
		}
		tools = append(tools, t)
	}
	return c.sync(tools)
}

// sync registers, replaces and unregisters actions so that they are the
// tools.
func (c *Client) sync(tools []*sdk.Tool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[string]*clientTool{}
	changed := false
	for _, t := range tools {
		if !c.cfg.offers(t.Name) {
			continue
		}
		if err := checkActionName(t.Name); err != nil {
			c.cfg.logger.Warn("mcp: a tool whose name cannot be an action is left out", "agent", c.agent.ID(), "tool", t.Name, "error", err)
			continue
		}
		raw, _ := json.Marshal(t)
		if old := c.tools[t.Name]; old != nil && bytes.Equal(old.raw, raw) {
			next[t.Name] = old
			continue
		}
		ct, err := c.register(t, raw)
		if err != nil {
			c.cfg.logger.Warn("mcp: a tool is left out", "agent", c.agent.ID(), "tool", t.Name, "error", err)
			continue
		}
		next[t.Name] = ct
		changed = true
	}
	for name := range c.tools {
		if _, ok := next[name]; !ok {
			_ = agency.Unregister(c.agent, name)
			changed = true
		}
	}
	c.tools = next
	if changed {
		close(c.changed)
		c.changed = make(chan struct{})
	}
	return nil
}

// register makes one tool an action; c.mu is held.
func (c *Client) register(t *sdk.Tool, raw []byte) (*clientTool, error) {
	in, err := json.Marshal(t.InputSchema)
	if err != nil || string(in) == "null" {
		in = []byte(`{"type":"object"}`)
	}
	ct := &clientTool{name: t.Name, raw: raw}
	var s jsonschema.Schema
	if err := json.Unmarshal(in, &s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if ct.validate, err = s.Resolve(nil); err != nil {
		// The server validates its arguments anyway: the call goes
		// through, unchecked here.
		c.cfg.logger.Warn("mcp: a tool's input schema cannot be used to validate its arguments; they go to the server unchecked",
			"agent", c.agent.ID(), "tool", t.Name, "error", err)
		ct.validate = nil
	}
	desc := t.Description
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	opts := []agency.ActionOption{}
	if desc != "" {
		opts = append(opts, agency.Describe(desc))
	}
	if t.OutputSchema != nil {
		if out, err := json.Marshal(t.OutputSchema); err == nil && string(out) != "null" {
			opts = append(opts, agency.ReturnsSchema(out))
		}
	} else {
		opts = append(opts, agency.Returns("the tool's text, or {\"content\": [...]} when its content is not all text"))
	}
	opts = append(opts, c.cfg.optionsFor(t.Name)...)
	if err := agency.RegisterJSON(c.agent, t.Name, in, c.handler(ct), opts...); err != nil {
		return nil, err
	}
	return ct, nil
}

// checkActionName reports a tool name that cannot be an action's.
func checkActionName(name string) error {
	switch {
	case name == "" || name == agency.HelpAction || strings.HasPrefix(name, "[") || strings.HasPrefix(name, "__") || len(name) > 255:
		return fmt.Errorf("%q is not an action name (empty, help, starting with [ or __, or over 255 bytes)", name)
	}
	return nil
}

// handler returns the action's handler of a tool.
func (c *Client) handler(ct *clientTool) agency.JSONHandler {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		// The validation and go-sdk's call go deep, on a goroutine of the
		// agent's that starts with a small stack: grown here at once
		// (package stack), BenchmarkJoinedServer's median call went from
		// 1.24x-1.30x of go-sdk's own client to 1.12x-1.18x (see
		// docs/performance.md, MCP).
		stack.Grow32K()
		if ct.validate != nil {
			var v any
			if err := json.Unmarshal(args, &v); err != nil {
				return nil, agency.InvalidArgsf("the arguments of %q are not JSON: %v", c.agent.ID()+"."+ct.name, err)
			}
			if err := ct.validate.Validate(v); err != nil {
				return nil, agency.InvalidArgsf("invalid arguments for %q: %v (send \"help\" for the argument schema)", c.agent.ID()+"."+ct.name, err)
			}
		}
		cs, err := c.current(ctx)
		if err != nil {
			return nil, err
		}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: ct.name, Arguments: args})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				// The server answered, with an error of the protocol.
				return nil, agency.ActionFailedf("the MCP server of %q refused the call of %q: %v", c.agent.ID(), ct.name, err)
			}
			// The connection is lost: the server is taken as dead, and
			// the next call starts it again.
			c.down(cs, err)
			return nil, agency.ActionFailedf("the MCP server of %q died during the call of %q (%v); the next call starts it again", c.agent.ID(), ct.name, err)
		}
		if res.IsError {
			return nil, agency.ActionFailedf("%s", contentText(res.Content, "the tool reported an error without text"))
		}
		return resultValue(res)
	}
}

// resultValue is what a call of a tool returns.
func resultValue(res *sdk.CallToolResult) (any, error) {
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(b), nil
	}
	allText := len(res.Content) > 0
	for _, ct := range res.Content {
		if _, ok := ct.(*sdk.TextContent); !ok {
			allText = false
		}
	}
	if allText {
		return contentText(res.Content, ""), nil
	}
	b, err := json.Marshal(map[string]any{"content": res.Content})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

func contentText(content []sdk.Content, none string) string {
	var parts []string
	for _, ct := range content {
		if t, ok := ct.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, "\n")
}

// Tools returns the names of the server's tools the agent has as actions,
// sorted.
func (c *Client) Tools() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.tools))
}

// Defaults of the client's restart backoff.
const (
	DefaultBackoffMin = 250 * time.Millisecond
	DefaultBackoffMax = 30 * time.Second
)

// ClientOption configures a Client in NewClient.
type ClientOption func(*clientConfig) error

type clientConfig struct {
	logger, sdkLogger      *slog.Logger
	backoffMin, backoffMax time.Duration
	all                    []agency.ActionOption
	tools                  map[string][]agency.ActionOption
	only                   []string
	parallel               int
	set                    map[string]bool
}

func (c *clientConfig) once(name string) error {
	if c.set[name] {
		return fmt.Errorf("%w: %s given twice", ErrInvalidOption, name)
	}
	if c.set == nil {
		c.set = map[string]bool{}
	}
	c.set[name] = true
	return nil
}

func (c *clientConfig) offers(tool string) bool {
	return len(c.only) == 0 || slices.Contains(c.only, tool)
}

func (c *clientConfig) optionsFor(tool string) []agency.ActionOption {
	if opts, ok := c.tools[tool]; ok {
		return opts
	}
	return c.all
}

func (c *clientConfig) concurrency() int {
	if c.parallel > 0 {
		return c.parallel
	}
	return 16
}

// ClientLogger sets where the client logs (a server gone, a tool left
// out) and, at debug level, where go-sdk logs. The default logs nothing.
func ClientLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) error {
		if err := c.once("ClientLogger"); err != nil {
			return err
		}
		if l == nil {
			return fmt.Errorf("%w: ClientLogger(nil)", ErrInvalidOption)
		}
		c.logger, c.sdkLogger = l, l
		return nil
	}
}

// RestartBackoff sets the least and the most pause before starting a dead
// server again (default DefaultBackoffMin and DefaultBackoffMax); the
// pause doubles with each failed start and is back to the least after a
// good one.
func RestartBackoff(least, most time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if err := c.once("RestartBackoff"); err != nil {
			return err
		}
		if least <= 0 || most < least {
			return fmt.Errorf("%w: RestartBackoff(%v, %v): want 0 < least <= most", ErrInvalidOption, least, most)
		}
		c.backoffMin, c.backoffMax = least, most
		return nil
	}
}

// ToolOptions gives the action of the tool named the options given
// (access policies, Approve with a func(context.Context,
// json.RawMessage) (bool, error), Errors, …), as Register takes them. The
// tool "*" stands for every tool ToolOptions does not name. Describe and
// ReturnsSchema are the server's to give.
func ToolOptions(tool string, opts ...agency.ActionOption) ClientOption {
	return func(c *clientConfig) error {
		if tool == "*" {
			if err := c.once("ToolOptions(*)"); err != nil {
				return err
			}
			c.all = opts
			return nil
		}
		if _, dup := c.tools[tool]; dup {
			return fmt.Errorf("%w: ToolOptions(%q) given twice", ErrInvalidOption, tool)
		}
		c.tools[tool] = opts
		return nil
	}
}

// OnlyTools makes actions of the tools named and of no other.
func OnlyTools(names ...string) ClientOption {
	return func(c *clientConfig) error {
		if err := c.once("OnlyTools"); err != nil {
			return err
		}
		c.only = slices.Clone(names)
		return nil
	}
}

// ClientConcurrency sets how many calls the agent sends the server at once
// (default 16).
func ClientConcurrency(n int) ClientOption {
	return func(c *clientConfig) error {
		if err := c.once("ClientConcurrency"); err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("%w: ClientConcurrency(%d): at least 1", ErrInvalidOption, n)
		}
		c.parallel = n
		return nil
	}
}
