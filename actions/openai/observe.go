package openai

import (
	"context"
	"log/slog"
	"net/http"

	gopenai "github.com/sashabaranov/go-openai"

	"github.com/seed72275b23/agency-go/agency"
)

// AgentOptions are options of the agent's *agency.Agent, applied after the
// LLM agent's own: agency.Hooks with a tracing instrumentation (package
// agency/otelagency), a logger of its own, …. With an
// agency.OperationObserver among the hooks, each model call is an
// operation ("chat <model>") and each tool call another ("execute_tool
// <name>"), with the attributes of OpenTelemetry's GenAI conventions
// (gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model,
// gen_ai.agent.name, gen_ai.conversation.id, gen_ai.tool.name,
// gen_ai.usage.input_tokens and output_tokens). Whatever the hooks, the
// HTTP requests to the model carry the W3C traceparent (and tracestate) of
// the turn's context (see agency.Traceparent).
func AgentOptions(opts ...agency.Option) Option {
	return func(c *config) error {
		for _, o := range opts {
			if o == nil {
				return invalidf("AgentOptions: a nil option")
			}
		}
		c.agentOpts = append(c.agentOpts, opts...)
		return nil
	}
}

// providerName is the gen_ai.provider.name of a server that speaks
// OpenAI's API.
const providerName = "openai"

// complete calls the model (completeRetrying) as one operation, for the
// agent's OperationObserver.
func (a *Agent) complete(ctx context.Context, t *Turn, req gopenai.ChatCompletionRequest) (Message, Usage, error) {
	attrs := []slog.Attr{
		slog.String("gen_ai.operation.name", "chat"),
		slog.String("gen_ai.provider.name", providerName),
		slog.String("gen_ai.system", providerName),
		slog.String("gen_ai.request.model", req.Model),
		slog.String("gen_ai.agent.name", a.agent.ID()),
		slog.String("gen_ai.conversation.id", t.Conversation),
	}
	if req.MaxCompletionTokens > 0 {
		attrs = append(attrs, slog.Int("gen_ai.request.max_tokens", req.MaxCompletionTokens))
	}
	if req.Temperature != 0 {
		attrs = append(attrs, slog.Float64("gen_ai.request.temperature", float64(req.Temperature)))
	}
	ctx, end := agency.StartOperation(ctx, "chat "+req.Model, attrs...)
	reply, used, err := a.completeRetrying(ctx, t, req)
	done := []slog.Attr{
		slog.Int("gen_ai.usage.input_tokens", used.PromptTokens),
		slog.Int("gen_ai.usage.output_tokens", used.CompletionTokens),
		slog.Int("agency.model.calls", used.Calls),
	}
	if n := len(reply.ToolCalls); n > 0 {
		names := make([]string, n)
		for i, tc := range reply.ToolCalls {
			names[i] = tc.Name
		}
		done = append(done, slog.Any("agency.model.tool_calls", names))
	}
	end(err, done...)
	return reply, used, err
}

// call runs one tool call (callTool) as one operation, for the agent's
// OperationObserver: the Request it sends is a child of it.
func (a *Agent) call(ctx context.Context, owner, conv string, k toolKey, tc ToolCall, key, thoughts string, extra map[string]any) callResult {
	ctx, end := agency.StartOperation(ctx, "execute_tool "+tc.Name,
		slog.String("gen_ai.operation.name", "execute_tool"),
		slog.String("gen_ai.tool.name", tc.Name),
		slog.String("gen_ai.tool.call.id", tc.ID),
		slog.String("gen_ai.tool.type", "function"),
		slog.String("gen_ai.agent.name", a.agent.ID()),
		slog.String("gen_ai.conversation.id", conv),
		slog.String("agency.destination", k.Agent+"."+k.Action),
	)
	r := a.callTool(ctx, owner, conv, k, tc, key, thoughts, extra)
	end(r.err)
	return r
}

// traceTransport gives each request to the model the W3C trace context
// of its context, so that the model server's spans join the turn's trace.
type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tp := agency.Traceparent(ctx)
	if tp == "" || req.Header.Get("traceparent") != "" {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(ctx) // a RoundTripper must not change the request it is given
	req.Header.Set("traceparent", tp)
	if ts := agency.Tracestate(ctx); ts != "" {
		req.Header.Set("tracestate", ts)
	}
	return t.base.RoundTrip(req)
}
