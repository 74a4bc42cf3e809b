// Package a2a serves agents of a space over the A2A protocol, and joins
// remote A2A agents to a space, on github.com/a2aproject/a2a-go/v2.
//
// A Server is an http.Handler that serves each agent named in its Config
// at /agents/{id}/ (A2A 1.0 JSON-RPC: SendMessage, SendStreamingMessage,
// GetTask, CancelTask, ListTasks), with its card at
// /agents/{id}/.well-known/agent-card.json, and the card of a root agent at
// /.well-known/agent-card.json:
//
//	srv, err := a2a.NewServer(ctx, a2a.Config{Space: sp, Agents: []string{"Calculator"}, Root: "Calculator", Store: st})
//	if err != nil { … }
//	defer srv.Close(ctx)
//	http.ListenAndServe("127.0.0.1:8080", srv)
//
// The card is made from the agent's help as the caller sees it: one skill
// per action, with the arguments' JSON Schema in a card extension
// (ExtensionURI). A message whose data part is {"action": NAME, "args":
// {...}} calls that action; text goes to the agent's "say", in a
// conversation of the caller's A2A context. The task completes with an
// artifact {"result": value} (text for a say), fails with the error's type
// and teachable text, or waits in TASK_STATE_INPUT_REQUIRED while the
// agent's approver decides a call whose access is Requested. Tasks live in
// an actions/store Store, so GetTask answers after a restart and a call
// that waits for approval is sent again by the next server.
//
// Each caller speaks through an agent of its own, whose id is the caller's
// (Config.Authenticate maps a bearer token to it): access policies apply
// per caller, and a caller reads only its own tasks.
//
// NewRemote goes the other way: a remote A2A agent becomes an agent of
// the space, whose actions are the remote skills (plus "say" for text),
// so that LLM agents call it and hand conversations to it.
//
// docs/a2a.md describes both sides, the limits and what interoperates.
package a2a
