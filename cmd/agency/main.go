// Command agency looks at a space of agents from a shell and a browser:
// it lists the agents and their actions, calls them, talks to LLM agents,
// tails the messages on the exchange and serves Studio, a web page of all
// of it.
//
//	agency ls
//	agency call Calculator add '{"a":1,"b":2}'
//	agency tail --json
//	agency studio
//	agency --demo studio   # an in-process demo space: no broker, no key
//
// The broker is the one the environment names, as for
// amqpspace.ConfigFromEnv (AMQP_URL, or AMQP_HOST, AMQP_PORT,
// AMQP_USERNAME, AMQP_PASSWORD and AMQP_VHOST); --amqp-url and --exchange
// override it. docs/cli.md in the repository lists the commands, their
// exit codes and Studio.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
