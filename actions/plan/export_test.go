package plan

// Hooks for the tests of restarts in package plan_test.

// Halt makes c act as if its process had died now.
func Halt(c *Coordinator) { c.halt() }

// AfterCommit has f called after each committed change of c, before its
// messages are handed to the relay.
func AfterCommit(c *Coordinator, f func([]Event)) { c.afterCommit = f }
