// Package human makes people agents: a person reached through a [Front]
// (a [Terminal], a web page over [Web], a [Script] in a test) takes part
// in a space like any other agent.
//
//   - [Agent] is a person others talk to: its action say shows the person
//     what is said and answers with their reply. [Agent.Take] hands them a
//     whole conversation (a handoff from an LLM agent to a person).
//   - [User] speaks for a person in one conversation: it says each of their
//     lines to whichever agent holds the conversation now, and shows every
//     answer.
//
// A terminal program with a user and an operator on one terminal:
//
//	term := human.NewTerminal(os.Stdin, os.Stdout)
//	operator, err := human.New("Human", term)
//	…
//	user, err := human.NewUser("User", term, human.StartWith("Triage"))
//	… // add operator.Agent(), user.Agent() and the others to a space
//	err = user.Run(ctx) // until "exit", the end of input, or a final answer
//
// A Front that is a [PartShower] ([Terminal], [Web]) shows an answer as it
// comes: the User asks the holder for the parts of its answer
// (agency.Agent.Stream), which an LLM agent of actions/openai sends as the
// model writes them; the Terminal prints them on one line, the Web sends
// them to its /events readers (server-sent events).
//
// Says follow the conventions of the LLM agents of actions/openai:
// __meta__.conversation names the conversation, and a say that carries
// __meta__.in_reply_to or __meta__.tool_call_id is answered only by value.
// A conversation belongs to the agent that started it: two agents that
// name the same conversation id speak in two conversations (Line.Owner
// tells them apart), and a User takes a new holder only from its holder
// (__meta__.handed_to) or from an agent that answers one of the User's own
// says, so no other agent reads the person's next line.
package human
