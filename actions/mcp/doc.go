// Package mcp bridges agency and the Model Context Protocol, both ways, on
// the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// A [Server] is an agent that serves the actions of its space's agents as
// MCP tools, to any MCP client (Claude Desktop, IDEs, agent frameworks):
//
//	srv, err := mcp.NewServer("MCP")
//	if err != nil { … }
//	if err := sp.Add(ctx, srv.Agent()); err != nil { … }
//	err = srv.Run(ctx, mcp.Stdio())                       // a command a client starts
//	err = srv.ListenAndServe(ctx, "127.0.0.1:8931", nil)  // or streamable HTTP at /mcp
//
// What a client may call is exactly what the server agent's help survey
// shows: an action denied to it is not listed. A tool is named
// "Agent.action" (see [ToolName] for ids and names outside MCP's
// alphabet); its input schema is the action's argument schema, its output
// schema the action's result schema when that is an object, else an
// object with the result under "result"; an action that declares no
// result has none. A call is a request in the space; its errors
// (invalid_args, permission_denied, action_failed, …) come back as isError
// results with the text the space gives, an unknown tool as a JSON-RPC
// error. The tools follow the agents that join and leave (see
// [Rediscover]); requested access asks the client's person through
// elicitation where the client supports it, and the action's approver
// tells that approval from a forged one with [Approved]; each MCP session
// is a conversation of its own ([MetaConversation]); an action reports
// progress with [Progress].
//
// A [Client] joins an MCP server (a [Command] on stdio, or an [Endpoint]
// over streamable HTTP) to a space as an agent whose actions are the
// server's tools, with their schemas as help shows them; arguments are
// validated against the tool's schema (github.com/google/jsonschema-go)
// before the call. LLM agents (actions/openai) see these actions like any
// other.
//
// The guide is docs/mcp.md in the repository.
package mcp
