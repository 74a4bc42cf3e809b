package plan

// Hooks for the tests of restarts in package plan_test.

// Halt makes c act as if its process had died now.
func Halt(c *Coordinator) { c.halt() }

// AfterCommit has f called after each committed change of c, before its
// messages are handed to the relay.
func AfterCommit(c *Coordinator, f func([]Event)) { c.afterCommit = f }

// Followed returns how many steps c follows as streams now.
func Followed(c *Coordinator) int {
	c.live.mu.Lock()
	defer c.live.mu.Unlock()
	return len(c.live.streams)
}
