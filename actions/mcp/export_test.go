package mcp

// ChangedForTest returns a channel closed at the next change of the
// client's actions.
func (c *Client) ChangedForTest() <-chan struct{} { return c.changedChan() }

// DownForTest reports whether the client takes its server to be down.
func (c *Client) DownForTest() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session == nil
}
