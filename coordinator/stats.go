package coordinator

// PartitionState is where a coordinator partition is on this node.
type PartitionState int8

// Partition states.
const (
	PartitionUnowned PartitionState = iota // not served here (another node's, or a load failed)
	PartitionLoading                       // reading its state: COORDINATOR_LOAD_IN_PROGRESS
	PartitionActive                        // serving
)

// PartitionStates appends the state of every partition, in partition order,
// to dst and returns it. Safe to call from any goroutine.
func (c *Coordinator) PartitionStates(dst []PartitionState) []PartitionState {
	for _, p := range c.parts {
		p.mu.Lock()
		st := PartitionUnowned
		switch {
		case p.closed:
		case p.state == stLoading:
			st = PartitionLoading
		case p.state == stActive:
			st = PartitionActive
		}
		p.mu.Unlock()
		dst = append(dst, st)
	}
	return dst
}

// GroupStats calls fn once per group of every active partition with its
// type, state and number of members (group.Shard.GroupStats). Each
// partition is visited under its mutex, one at a time: fn must not call
// back into the coordinator.
func (c *Coordinator) GroupStats(fn func(groupType, state string, members int)) {
	for _, p := range c.parts {
		p.mu.Lock()
		if p.state == stActive && !p.closed {
			p.shard.GroupStats(fn)
		}
		p.mu.Unlock()
	}
}
