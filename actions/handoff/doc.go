// Package handoff lets agents hand conversations to each other: static
// transfer tools, handoffs created by the model at run time to an
// authorized list of agents, and context variables with conditions that
// route a conversation without asking the model.
//
// A handoff is a message: the action "handoff" of the agent that takes the
// conversation over, whose argument (Transfer) carries the conversation's
// id, the user agent's id, the handoff's name and message, the context
// variables with their version, the hops and path since the user's last
// message, and the history. It crosses processes on a broker unchanged.
// Who may hand over to an agent is that agent's access policy, so help
// hides the action from everyone else, and a model never even sees a
// target it may not use.
//
// An LLM agent of actions/openai takes part through a Policy, an
// openai.Extension built from Rules:
//
//   - OnLLM: a transfer tool the model may call (transfer_to_<agent>);
//   - OnContext: a condition on the variables, checked before every model
//     call, that hands the conversation on without calling the model;
//   - AfterWork: what happens when the model answers in text (RevertToUser,
//     To an agent, Back, Stay, Terminate);
//   - SystemTemplate: a system prompt that follows the variables;
//   - Dispatch: the handoffs of a Dispatcher, which the model may create,
//     enable, disable and delete itself (Manage), to authorized agents
//     only.
//
// Conditions are expressions of github.com/expr-lang/expr (AG2's ${name}
// is accepted), compiled when the Policy is made: a syntax error, or with
// a typed environment (Env) a misspelt name or a type error,
// fails then, with its position. Values are data, never spliced into an
// expression. Tools read the variables with VarsFrom and VarsAs, and
// return a Reply to set them or to name where the conversation goes next.
//
// The conversation is the unit of state: its holder, variables, version
// and hops are a document in an actions/store Store, and a handoff is one
// Apply of that document, a log entry and the handoff message in the
// outbox, which a relay sends. One agent holds a conversation at a time; a
// model reply makes at most one handoff (parallel tool calls are off
// whenever a transfer tool is offered); a hop budget per user message and
// ping-pong detection stop loops with an error the model can act on. Every
// transition is an Event for an Observer and a log line.
//
// Team wires it all: LLM agents with their rules (Team.Agent), people who
// take conversations over (Team.Human), and a user agent that runs a
// conversation from a human.Front until it terminates (Team.Run).
//
//	team := &handoff.Team{Options: []handoff.Option{handoff.WithStore(st)}, LLM: []openai.Option{openai.Model("gpt-4o-mini")}}
//	triage, err := team.Agent("Triage", "You route customers.",
//		handoff.OnLLM(handoff.To("Refunds"), "Use for refunds.", handoff.Name("transfer_to_refunds")))
//	refunds, err := team.Agent("Refunds", "You handle refunds.",
//		handoff.OnLLM(handoff.To("Triage"), "Use for anything else.", handoff.Name("transfer_back_to_triage")))
//	… // add triage.Agent(), refunds.Agent(), team.UserAgent() to a space
//	res, err := team.Run(ctx, handoff.Start{Agent: "Triage", Message: "I want a refund", User: front})
//
// docs/handoffs.md describes the patterns, the conditions language, loop
// limits and events, and compares this package with other frameworks.
package handoff
