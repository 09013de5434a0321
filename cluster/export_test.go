package cluster

// PauseForTest simulates a frozen process as far as the lease goes: the
// keepalives stop and the node's own clock seems to stand still (Serving
// keeps its answer, the deadline never passes, nothing is reconciled), while
// requests are still served. ResumeForTest lets time catch up at once.
func (c *Cluster) PauseForTest() {
	c.pausedAt.Store(c.now())
	c.paused.Store(true)
}

func (c *Cluster) ResumeForTest() {
	c.paused.Store(false)
	select {
	case c.kick <- struct{}{}:
	default:
	}
}
