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
// description of the actions the asking agent may call:
//
//	type AddArgs struct {
//		A float64 `json:"a" jsonschema:"description=first addend"`
//		B float64 `json:"b" jsonschema:"description=second addend"`
//	}
//
//	calc := agency.MustNewAgent("Calculator")
//	agency.Handle(calc, "add", func(ctx context.Context, args AddArgs) (float64, error) {
//		return args.A + args.B, nil
//	}, agency.Describe("Adds two numbers"))
//	// … add calc and user to a space, then:
//	sum, err := agency.Call[float64](ctx, user, "Calculator", "add", AddArgs{A: 1, B: 2})
//
// A handler fails a call with [InvalidArgsf], [PermissionDeniedf] or
// [ActionFailedf]; the caller reads the text as written and branches with
// errors.Is. Access is per action: [AccessForAll], [AccessBySender] (with
// "Prefix*" patterns), [AccessFunc], and [Approve] for calls a person or a
// policy must approve. [Survey] lists the agents in a space and what they
// offer; [WithTraceparent] and [Traceparent] carry a W3C trace context from
// agent to agent, and a [TracePropagator] (package otelagency has one for
// OpenTelemetry) lets a tracing library see it with no code in handlers.
//
// Agents live in a space (package space and its implementations), which
// routes [Message] values between them. This package holds no transport code;
// what a space implementation needs to attach agents (a router for each
// agent's outgoing messages, a connection to feed incoming ones to) is in
// package [github.com/seed72275b23/agency-go/agency/driver], which users of
// agents never import.
package agency
