// Package openai provides an agent backed by a language model behind any
// OpenAI-compatible chat-completions API (OpenAI, Ollama, vLLM, LM Studio,
// …), through github.com/sashabaranov/go-openai.
//
// The agent discovers what the space offers: when it joins a space it sends
// help to every agent, and it keeps a catalog of the answers, which it
// brings up to date as agents come and go. Each action in the catalog
// becomes one function tool for the model, whose parameters are the
// action's args schema from help, unchanged. Others talk to the agent
// through its action "say":
//
//	llm, err := openai.New("Assistant") // OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL
//	if err != nil { … }
//	err = sp.Add(ctx, llm.Agent())
//	answer, err := agency.Call[string](ctx, user, "Assistant", "say", openai.SayArgs{Content: "What is 2+3?"})
//
// A turn sends the conversation and the tools to the model, runs the tool
// calls of each reply as requests to the agents they name (concurrently,
// with the reply's text as __meta__.thoughts), gives the results and errors
// back to the model, and repeats until the model answers in text. The
// answer is said back to the sender and returned.
//
// Each say belongs to a conversation, its __meta__.conversation (or its
// sender's id): the agent keeps a history per conversation in a [Memory],
// runs one turn at a time per conversation and turns of different
// conversations at once, and every message it sends while serving one
// carries its id (and its tool requests the conversation's owner, see
// [MetaConversationOwner], so that owners stay apart on the next hop). An [Extension] steers turns from outside (extra tools,
// a step before each model call, the answer), and [Agent.Continue] runs a
// turn on a conversation another agent handed over: handoffs and plans are
// built on these.
//
// With a [Journal] for memory (handoff.Memory is one), turns are written
// ahead, and an agent built again on the same journal takes up the turns
// a crash cut short when it joins its space: the question is answered,
// and a tool call whose result was recorded is not sent again.
//
// docs/llm.md describes conversations, extensions, discovery, tool names,
// model parameters, errors and configuration.
package openai
