package member

import "time"

// ValidUntil returns the instant, on the member's clock, at which the member
// stops trusting its current work context: LostMargin before the coordinator
// could remove it (the session timeout after the send time of the last
// request the coordinator confirmed, or, if it comes first, the rebalance
// timeout: while rebalancing, and for a dynamic member also after its last
// confirmed heartbeat, since a rebalance may have begun right after it). The work context is cancelled at that instant; a caller that
// compares it with the clock before each unit of work also refuses when the
// process was frozen past it and no timer has run yet. It returns the zero
// time when no work context is live.
//
// With the real clock the value carries a monotonic reading, so the
// comparison is immune to wall-clock steps.
func (m *Member) ValidUntil() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mc.ValidUntil()
}

// ValidUntil is Member.ValidUntil for the machine's state.
func (m *Machine) ValidUntil() time.Time {
	if !m.holding {
		return time.Time{}
	}
	return m.lostAt()
}
