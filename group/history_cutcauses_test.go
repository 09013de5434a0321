package group

import (
	"testing"
	"time"
)

// TestHistoryToldEventCountsEveryTimeout: an event keeps at most 64 more
// causes, but what OnRebalance is told must still count every member the
// rebalance removed for a timeout (the node's
// cohort_group_member_timeouts_total adds them up): 100 members of a
// classic group stop heartbeating at once, and the leader rejoins.
func TestHistoryToldEventCountsEveryTimeout(t *testing.T) {
	h := newH(t)
	var told []RebalanceEvent
	h.s.cfg.OnRebalance = func(ev RebalanceEvent) { told = append(told, ev) }
	const silent = 100
	ids, gen := h.stableGroup("g", silent+1)
	told = nil
	for i := 0; i < 4; i++ { // the leader heartbeats, the others do not
		h.advance(3 * time.Second)
		h.heartbeat("g", ids[0], gen)
	}
	h.rejoinAndSync("g", ids[0])
	if len(told) != 1 {
		t.Fatalf("told %d events, want 1", len(told))
	}
	ev := told[0]
	n := ev.CutCauses[CauseSessionTimeout]
	if ev.Cause.Kind == CauseSessionTimeout {
		n++
	}
	for _, c := range ev.MoreCauses {
		if c.Kind == CauseSessionTimeout {
			n++
		}
	}
	if n != silent {
		t.Fatalf("the told event counts %d session timeouts (%d more causes kept), want %d", n, len(ev.MoreCauses), silent)
	}
	if len(ev.MoreCauses) > 64 {
		t.Fatalf("the event keeps %d more causes, want at most 64", len(ev.MoreCauses))
	}
}
