package mcp

// ChangedForTest returns a channel closed at the next change of the
// client's actions.
func (c *Client) ChangedForTest() <-chan struct{} { return c.changedChan() }
