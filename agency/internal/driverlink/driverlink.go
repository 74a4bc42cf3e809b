// Package driverlink hands package driver the one piece of package agency
// it cannot reach otherwise: attaching an agent to a space, which makes
// agency's unexported connection type. Package agency sets Connect when it
// is initialised and package driver calls it; being internal, it is out of
// reach of every other module.
//
// The function is typed with any because this package cannot import
// agency (agency imports it).
package driverlink

// Connect attaches agent (an *agency.Agent) to a space whose outgoing side
// is router (an agency driver.Router) and returns the agent's connection,
// or nil and an error.
var Connect func(agent, router any) (conn any, err error)
