package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/agency"
)

// Server is an agent that serves the actions of its space's agents as MCP
// tools: what an MCP client may call is exactly what the agent's help
// survey shows it, under the same access policies (an action denied to
// the agent is not listed). Make one with NewServer, add Agent() to a
// space, then serve it with Run (stdio, or any go-sdk transport), Handler
// or ListenAndServe (streamable HTTP).
//
// Its methods are safe for concurrent use.
type Server struct {
	agent *agency.Agent
	mcp   *sdk.Server
	cfg   serverConfig

	surveying sync.Mutex // one survey at a time, so that an older one never undoes a newer one

	mu      sync.Mutex
	tools   map[string]*tool              // tool name → tool
	refresh chan struct{}                 // capacity 1: "survey again soon"
	calls   map[string]*call              // request message id → the call awaiting it
	convs   map[*sdk.ServerSession]string // MCP session → its conversation
	stop    context.CancelFunc            // ends the discovery loop
	done    chan struct{}                 // closed when the discovery loop has ended
}

// tool is one action on offer.
type tool struct {
	agent, action string
	requested     bool            // its access is Requested: ask the client's person
	object        bool            // its output schema is the result's own (an object)
	output        json.RawMessage // nil: the action declares no result
	help          json.RawMessage // the help entry it was made from
}

// call is a tools/call under way whose client asked for progress.
type call struct {
	session *sdk.ServerSession
	token   any
	to      string
}

// Meta keys the server sets on the requests it sends.
const (
	// MetaProgress is set (true) on a request whose MCP client gave a
	// progress token: the action may report progress with [Progress].
	MetaProgress = "mcp_progress"
	// MetaConversation is set on every request to the conversation of the
	// MCP session it comes from ("mcp-" and an id the server makes): each
	// session is a conversation of its own, owned by the server's agent.
	MetaConversation = "conversation"
	// MetaApproved is set ("elicitation") on a request for an action of
	// requested access whose call the MCP client's person approved. Any
	// agent can set a meta key: trust it only on a message from the
	// server's own agent, as [Approved] does. The server never forwards
	// what a client puts in a call's _meta.
	MetaApproved = "mcp_approved"
)

// Approved reports whether the action ctx belongs to was requested by
// the agent of one of the MCP servers named (their ids) after the person
// using its MCP client approved the call through elicitation. The sender
// is the space's to vouch for (a message's from cannot be forged through
// agency's API); the meta key alone is not, as any agent may set it. An
// approver of an action of requested access calls it:
//
//	agency.Approve(func(ctx context.Context, _ ResetArgs) (bool, error) {
//		return mcp.Approved(ctx, "MCP"), nil
//	})
func Approved(ctx context.Context, bridges ...string) bool {
	m := agency.MessageFrom(ctx)
	return m != nil && m.Meta[MetaApproved] == "elicitation" && slices.Contains(bridges, m.From)
}

// ProgressAction is the action of the server's agent that [Progress]
// sends to. Only an agent with a call from the server under way may call
// it; help hides it from every other.
const ProgressAction = "progress"

// NewServer returns a server whose agent has the given id.
func NewServer(id string, opts ...ServerOption) (*Server, error) {
	cfg := serverConfig{every: DefaultRediscover, settle: DefaultSettle, logger: discard, name: "agency-go", maxArgs: DefaultMaxArgBytes}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg, tools: map[string]*tool{}, calls: map[string]*call{},
		convs: map[*sdk.ServerSession]string{}, refresh: make(chan struct{}, 1)}
	agentOpts := []agency.Option{agency.Hooks(serverHooks{s}), agency.Concurrency(64), agency.Logger(cfg.logger)}
	a, err := agency.NewAgent(id, agentOpts...)
	if err != nil {
		return nil, err
	}
	err = agency.Register(a, ProgressAction, s.progress,
		agency.Describe("Reports the progress of a call this MCP server made to the caller (see actions/mcp.Progress)."),
		agency.AccessFunc(s.progressAccess))
	if err != nil {
		return nil, err
	}
	s.agent = a
	s.mcp = sdk.NewServer(&sdk.Implementation{Name: cfg.name, Version: cfg.version}, &sdk.ServerOptions{
		Logger:       cfg.sdkLogger,
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
	})
	return s, nil
}

// Agent returns the server's agent, to add to a space. The tools appear
// once it has surveyed the space.
func (s *Server) Agent() *agency.Agent { return s.agent }

// MCP returns the go-sdk server, for a transport this package does not
// offer. Its tools are the server's to change.
func (s *Server) MCP() *sdk.Server { return s.mcp }

// Run serves one MCP session over t until it ends or ctx is done: for a
// command an MCP client starts, Run(ctx, mcp.Stdio()), which answers a
// malformed frame with an error and goes on serving (its frame limit is
// 16 MiB, above the arguments limit, so that too large arguments get an
// isError result that says so).
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.mcp.Run(ctx, t)
}

// Tools returns the names of the tools on offer, sorted.
func (s *Server) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.tools))
}

// Refresh surveys the space now and updates the tools; it returns once
// they are up to date.
func (s *Server) Refresh(ctx context.Context) error {
	return s.survey(ctx)
}

// serverHooks holds the agent's hooks, so that they are no part of the
// Server's API.
type serverHooks struct{ s *Server }

// AfterAdd starts discovery: a survey at once, then one every
// Rediscover interval, and one soon after a call finds its agent gone.
func (h serverHooks) AfterAdd(ctx context.Context) {
	s := h.s
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	s.mu.Lock()
	s.stop, s.done = stop, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		s.discover(lctx)
	}()
}

// BeforeRemove ends discovery.
func (h serverHooks) BeforeRemove(ctx context.Context) {
	s := h.s
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// discover surveys the space until ctx ends: at once, then every cfg.every,
// and when asked to (a call found its agent gone), but never twice within
// cfg.settle, so that a burst of failing calls costs one survey.
func (s *Server) discover(ctx context.Context) {
	var tick <-chan time.Time
	if s.cfg.every > 0 {
		t := time.NewTicker(s.cfg.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		if err := s.survey(ctx); err != nil && ctx.Err() == nil {
			s.cfg.logger.Warn("mcp: survey failed", "agent", s.agent.ID(), "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.settle):
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-s.refresh:
		}
	}
}

// askRefresh asks the discovery loop for a survey soon.
func (s *Server) askRefresh() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// survey asks the space for help and makes the tools what it offers.
func (s *Server) survey(ctx context.Context) error {
	s.surveying.Lock()
	defer s.surveying.Unlock()
	sctx, cancel := context.WithTimeout(ctx, 2*s.cfg.settle+time.Second)
	found, err := agency.Survey(sctx, s.agent, agency.SurveyQuiet(s.cfg.settle))
	cancel()
	if err != nil && len(found) == 0 && ctx.Err() != nil {
		return err
	}
	next := map[string]*tool{}
	for _, id := range slices.Sorted(maps.Keys(found)) {
		if !s.cfg.offers(id) {
			continue
		}
		for _, action := range slices.Sorted(maps.Keys(found[id])) {
			h := found[id][action]
			name := ToolName(id, action)
			if old, dup := next[name]; dup {
				s.cfg.logger.Error("mcp: two actions map to one tool name; the second is not listed",
					"tool", name, "first", old.agent+"."+old.action, "second", id+"."+action)
				continue
			}
			next[name] = newTool(id, action, h)
		}
	}
	s.apply(next)
	if err != nil && !errors.Is(err, agency.ErrTimeout) {
		return err
	}
	return nil
}

// apply makes next the tools on offer, telling go-sdk only what changed
// (it sends notifications/tools/list_changed, debounced).
func (s *Server) apply(next map[string]*tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for name := range s.tools {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	for name, t := range next {
		if old, ok := s.tools[name]; ok && bytes.Equal(old.help, t.help) {
			next[name] = old
			continue
		}
		s.mcp.AddTool(t.mcpTool(name), s.handler(name))
	}
	s.tools = next
}

// newTool makes the tool of one help entry.
func newTool(agent, action string, h agency.ActionHelp) *tool {
	t := &tool{agent: agent, action: action, requested: h.Access == agency.Requested.String()}
	t.help, _ = json.Marshal(h)
	t.output, t.object = outputSchema(h.Returns)
	return t
}

func (t *tool) mcpTool(name string) *sdk.Tool {
	var h agency.ActionHelp
	_ = json.Unmarshal(t.help, &h)
	mt := &sdk.Tool{Name: name, Description: h.Description, InputSchema: inputSchema(h.Args)}
	if name != t.agent+"."+t.action {
		mt.Title = t.agent + "." + t.action
	}
	if t.output != nil {
		mt.OutputSchema = t.output
	}
	if t.requested {
		mt.Description = joinText(mt.Description, "(Each call needs approval; it may be refused.)")
	}
	return mt
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

// inputSchema returns a tool's input schema from an action's args. That
// is the schema itself for an agent of this library; an operand/agency
// (Python) agent lists its arguments instead, which become the properties
// of an object schema. Anything else takes any object.
func inputSchema(args json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(args, &top); err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	if t, ok := top["type"]; ok {
		if string(bytes.TrimSpace(t)) == `"object"` {
			return args
		}
		return json.RawMessage(`{"type":"object"}`)
	}
	for _, v := range top {
		if v = bytes.TrimSpace(v); len(v) == 0 || v[0] != '{' {
			return json.RawMessage(`{"type":"object"}`)
		}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": top})
	return b
}

// outputSchema returns a tool's output schema from an action's returns:
// none when the action declares nothing it returns (no returns, or a
// schema with nothing but a description); the returns schema itself when
// it is an object schema (object reports that); else an object whose
// "result" is the value.
func outputSchema(returns json.RawMessage) (schema json.RawMessage, object bool) {
	var top map[string]json.RawMessage
	if len(returns) == 0 || json.Unmarshal(returns, &top) != nil {
		return nil, false
	}
	declared := false
	for k := range top {
		switch k {
		case "description", "title", "$comment", "examples", "$schema", "$id":
		default:
			declared = true
		}
	}
	if !declared {
		return nil, false
	}
	if string(bytes.TrimSpace(top["type"])) == `"object"` {
		return returns, true
	}
	b, _ := json.Marshal(map[string]any{
		"type":       "object",
		"properties": map[string]json.RawMessage{"result": orNull(returns)},
		"required":   []string{"result"},
	})
	return b, false
}

// orNull returns schema with null allowed too: a result may be null (a
// nil slice, map or pointer in Go) whatever its schema says, and help
// cannot tell. A plain "type" gains "null"; any other schema is wrapped
// in anyOf.
func orNull(schema json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(schema, &top) != nil {
		return schema
	}
	_, enum := top["enum"]
	_, konst := top["const"]
	var typ string
	if !enum && !konst && json.Unmarshal(top["type"], &typ) == nil && typ != "" {
		if typ == "null" {
			return schema
		}
		top["type"], _ = json.Marshal([]string{typ, "null"})
		b, _ := json.Marshal(top)
		return b
	}
	var types []string
	if !enum && !konst && json.Unmarshal(top["type"], &types) == nil && len(types) > 0 {
		if !slices.Contains(types, "null") {
			top["type"], _ = json.Marshal(append(types, "null"))
		}
		b, _ := json.Marshal(top)
		return b
	}
	b, _ := json.Marshal(map[string]any{"anyOf": []json.RawMessage{schema, json.RawMessage(`{"type":"null"}`)}})
	return b
}

// zeroObject returns the value that stands for null as the structured
// content of a tool whose output schema is the object schema given: the
// object with each required property at its zero value ("", 0, false,
// [], {}, or null where allowed, its const or first enum value or its
// default where it has one), as go-sdk gives for a nil pointer. It
// reports false when it cannot make one the schema accepts.
func zeroObject(schema json.RawMessage) (json.RawMessage, bool) {
	var m map[string]any
	if json.Unmarshal(schema, &m) != nil {
		return nil, false
	}
	z, ok := zeroOf(m, 0)
	if !ok {
		return nil, false
	}
	b, err := json.Marshal(z)
	if err != nil || len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var s jsonschema.Schema
	if json.Unmarshal(schema, &s) != nil {
		return nil, false
	}
	rs, err := s.Resolve(nil)
	if err != nil || rs.Validate(z) != nil {
		return nil, false
	}
	return b, true
}

func zeroOf(s map[string]any, depth int) (any, bool) {
	if depth > 16 {
		return nil, false
	}
	if c, ok := s["const"]; ok {
		return c, true
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0], true
	}
	if d, ok := s["default"]; ok {
		return d, true
	}
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if x, ok := x.(string); ok {
				types = append(types, x)
			}
		}
	}
	if slices.Contains(types, "null") {
		return nil, true
	}
	if len(types) == 0 {
		return nil, false
	}
	switch types[0] {
	case "object":
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, name := range req {
			name, _ := name.(string)
			p, ok := props[name].(map[string]any)
			if !ok {
				return nil, false
			}
			if obj[name], ok = zeroOf(p, depth+1); !ok {
				return nil, false
			}
		}
		return obj, true
	case "array":
		return []any{}, true
	case "string":
		return "", true
	case "number", "integer":
		return 0, true
	case "boolean":
		return false, true
	}
	return nil, false
}

// handler returns the tools/call handler of the tool name.
func (s *Server) handler(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.mu.Lock()
		t := s.tools[name]
		s.mu.Unlock()
		if t == nil {
			return nil, fmt.Errorf("mcp: unknown tool %q", name)
		}
		return s.callTool(ctx, req, t), nil
	}
}

// callTool makes the request of one tools/call and turns its answer into
// the result.
func (s *Server) callTool(ctx context.Context, req *sdk.CallToolRequest, t *tool) *sdk.CallToolResult {
	args := bytes.TrimSpace(req.Params.Arguments)
	if n := len(args); n > s.cfg.maxArgs {
		return errorResult(fmt.Sprintf("invalid_args: the arguments of %s.%s are %d bytes, over the limit of %d; send them in smaller pieces or by reference", t.agent, t.action, n, s.cfg.maxArgs))
	}
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return errorResult(fmt.Sprintf("invalid_args: the arguments of %s.%s must be a JSON object", t.agent, t.action))
	}
	m := &agency.Message{To: t.agent, Action: t.action, Args: json.RawMessage(args), ID: agency.NewID()}
	if conv := s.conversation(req.Session); conv != "" {
		m.Meta = map[string]any{MetaConversation: conv}
	}
	if t.requested && supportsElicitation(req.Session) {
		// The person's answer comes with the call again (go-sdk asks a
		// client of an older protocol itself and calls again).
		resp, asked := req.Params.InputResponses[approvalInput]
		if !asked {
			return approvalRequest(t, args)
		}
		// The approval travels as MetaApproved on a message from this
		// agent, the only sender an approver may believe it from
		// (Approved); the client's own _meta is never forwarded.
		if er, ok := resp.(*sdk.ElicitResult); !ok || er.Action != "accept" {
			return errorResult(fmt.Sprintf("permission_denied: the person using this MCP client did not approve the call of %s.%s", t.agent, t.action))
		}
		if m.Meta == nil {
			m.Meta = map[string]any{}
		}
		m.Meta[MetaApproved] = "elicitation"
	}
	if token := req.Params.GetProgressToken(); token != nil {
		if m.Meta == nil {
			m.Meta = map[string]any{}
		}
		m.Meta[MetaProgress] = true
		s.mu.Lock()
		s.calls[m.ID] = &call{session: req.Session, token: token, to: t.agent}
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.calls, m.ID)
			s.mu.Unlock()
		}()
	}
	// A stream, though the bridge forwards no part: the responder then
	// holds the call as one it serves, which the caller may stop, so that
	// the client's notifications/cancelled (which ends ctx) cancels the
	// action's context, or keeps a queued request from running.
	var r *agency.Message
	for msg, err := range s.agent.StreamMessage(ctx, m) {
		if err != nil {
			return s.failed(ctx, t, err)
		}
		if msg.Action != agency.PartAction {
			r = msg
		}
	}
	if r == nil { // not reached: a stream ends with its answer or an error
		return errorResult(fmt.Sprintf("action_failed: %s.%s gave no answer", t.agent, t.action))
	}
	return result(t, r)
}

// conversation returns the conversation of an MCP session: an id of its
// own, made at its first call, which every request of the session carries
// as __meta__.conversation, so that an agent that keys state by
// conversation (an LLM agent's history) keeps each session's apart. It is
// not the session's Mcp-Session-Id, which stays between the client and
// the server.
func (s *Server) conversation(ss *sdk.ServerSession) string {
	if ss == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.convs[ss]; ok {
		return c
	}
	c := "mcp-" + agency.NewID()
	s.convs[ss] = c
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		delete(s.convs, ss)
		s.mu.Unlock()
	}()
	return c
}

// failed is the result of a call that failed.
func (s *Server) failed(ctx context.Context, t *tool, err error) *sdk.CallToolResult {
	var ae *agency.ActionError
	switch {
	case errors.Is(err, agency.ErrNoRecipient):
		s.askRefresh()
		return errorResult(fmt.Sprintf("not_found: agent %q has left the space, so %s.%s cannot be called; the tool list is being refreshed", t.agent, t.agent, t.action))
	case errors.As(err, &ae):
		return errorResult(ae.Error())
	case ctx.Err() != nil:
		return errorResult(fmt.Sprintf("cancelled: the call of %s.%s was cancelled: %v", t.agent, t.action, ctx.Err()))
	}
	return errorResult(fmt.Sprintf("action_failed: %s.%s: %v", t.agent, t.action, err))
}

// result turns a [response] into a tool result: the value's JSON as text,
// and, where the tool has an output schema, as structured content that
// matches it.
func result(t *tool, r *agency.Message) *sdk.CallToolResult {
	v, err := agency.Value[json.RawMessage](r)
	if err != nil {
		return errorResult(fmt.Sprintf("action_failed: the value %s.%s returned cannot be read: %v", t.agent, t.action, err))
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(v)}}}
	switch {
	case t.output == nil:
	case t.object && string(v) == "null":
		// A nil map or pointer: the text says null, the structured
		// content is the object's zero value, which its schema accepts.
		z, ok := zeroObject(t.output)
		if !ok {
			return errorResult(fmt.Sprintf("action_failed: %s.%s returned null, and its help promises an object for which no empty value fits the schema", t.agent, t.action))
		}
		res.StructuredContent = z
	case t.object:
		if v[0] != '{' {
			return errorResult(fmt.Sprintf("action_failed: %s.%s returned %.40s where its help promises an object", t.agent, t.action, v))
		}
		res.StructuredContent = v
	default:
		res.StructuredContent = map[string]json.RawMessage{"result": v}
	}
	return res
}

func errorResult(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

func supportsElicitation(ss *sdk.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// approvalInput names the input request that asks the MCP client's
// person to approve a call.
const approvalInput = "approve"

// approvalRequest is the result that asks the MCP client's person to
// approve a call (elicitation, SEP-2322's input requests).
func approvalRequest(t *tool, args []byte) *sdk.CallToolResult {
	shown := string(args)
	if len(shown) > 2000 {
		shown = shown[:2000] + "…"
	}
	return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{approvalInput: &sdk.ElicitParams{
		Mode:            "form",
		Message:         fmt.Sprintf("Allow a call of %s.%s with these arguments?\n%s", t.agent, t.action, shown),
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`),
	}}}
}

// ProgressArgs are the arguments of the server agent's progress action.
type ProgressArgs struct {
	RequestID string  `json:"request_id" jsonschema:"description=the id of the request whose progress this is"`
	Progress  float64 `json:"progress" jsonschema:"description=the progress so far; grows with each report"`
	Total     float64 `json:"total,omitempty" jsonschema:"description=the progress at the end, if known"`
	Message   string  `json:"message,omitempty" jsonschema:"description=what is being done"`
}

// progress passes a progress report to the MCP client whose call it is.
func (s *Server) progress(ctx context.Context, args ProgressArgs) (struct{}, error) {
	from := agency.MessageFrom(ctx).From
	s.mu.Lock()
	c := s.calls[args.RequestID]
	s.mu.Unlock()
	if c == nil || c.to != from {
		return struct{}{}, agency.InvalidArgsf("no call %q from this MCP server to %q is under way", args.RequestID, from)
	}
	err := c.session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
		ProgressToken: c.token, Progress: args.Progress, Total: args.Total, Message: args.Message,
	})
	return struct{}{}, err
}

// progressAccess permits progress to the agents with a call from the
// server under way, and hides it from every other.
func (s *Server) progressAccess(m *agency.Message) agency.Access {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		if c.to == m.From {
			return agency.Permitted
		}
	}
	return agency.Denied
}

// Progress reports the progress of the action ctx belongs to, when its
// caller is an MCP server whose client asked for progress (the request
// carries MetaProgress); otherwise it does nothing and returns nil. It
// sends one message, without waiting for an answer.
func Progress(ctx context.Context, progress, total float64, message string) error {
	m := agency.MessageFrom(ctx)
	a := agency.AgentFrom(ctx)
	if m == nil || a == nil || m.Meta[MetaProgress] != true {
		return nil
	}
	_, err := a.SendMessage(ctx, &agency.Message{To: m.From, Action: ProgressAction, NoReply: true,
		Args: ProgressArgs{RequestID: m.ID, Progress: progress, Total: total, Message: message}})
	return err
}

var discard = slog.New(slog.DiscardHandler)
