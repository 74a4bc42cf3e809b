// Package agency defines agents, their typed actions and the messages they
// exchange.
//
// An [Agent] has an id and a set of actions. An action is a plain Go function
//
//	func(ctx context.Context, args A) (R, error)
//
// with A a struct whose tags describe and constrain its fields. [Handle]
// registers it with its metadata (description, access policy, examples), and
// every agent answers the built-in "help" action with a JSON Schema
// description of the actions the asking agent may call.
//
// Agents live in a space (package space and its implementations), which
// routes [Message] values between them. This package holds no transport code:
// a space gives each agent a [Router] for its outgoing messages and feeds
// incoming ones to the [Conn] returned by [Connect].
package agency
