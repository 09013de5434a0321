package group

import (
	"fmt"
	"testing"
	"time"
)

// An unloaded shard tells a classic group's events held for an assignment
// write's outcome as the loaded shard would have (docs/history.md, the late
// write): each scenario below runs twice, the second time with the shard
// unloaded before the first held write's outcome, and both must tell the
// same events.

// toldSummary lists what identifies each told event: seq, outcome,
// generations and causes.
func toldSummary(seen []RebalanceEvent) string {
	s := ""
	for _, e := range seen {
		s += fmt.Sprintf("[%d %s %d->%d %s+%d] ", e.Seq, e.Outcome, e.FromGeneration, e.Generation, e.Cause.Kind, len(e.MoreCauses))
	}
	return s
}

// lateParity runs setup (which leaves the writes held) on a loaded shard
// and on one unloaded after setup, fails the oldest held write, stores the
// others in order and compares what each told.
func lateParity(t *testing.T, setup func(h *h) bool) {
	t.Helper()
	var told [2]string
	for i, unload := range []bool{false, true} {
		var seen []RebalanceEvent
		h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) {
			c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) }
		})
		if !setup(h) {
			t.Fatal("setup failed")
		}
		if unload {
			h.unload(newStormTally())
		}
		h.completeHeld(0, ErrCoordinatorNotAvailable)
		h.held = h.held[1:]
		h.release()
		if unload {
			if n := h.s.LateWrites(); n != 0 {
				t.Fatalf("unloaded shard still awaits %d late writes", n)
			}
		}
		told[i] = toldSummary(seen)
	}
	if told[0] != told[1] {
		t.Fatalf("told on the loaded shard:\n  %s\nunloaded before the first outcome:\n  %s", told[0], told[1])
	}
}

// The group empties during the assignment write (seq 2; the Empty event,
// 3, held for its outcome), then a member joins and gives the next
// assignment (seq 4), all in flight at the unload; the first write fails:
// event 3 is the one event from the generation last stored.
func TestHistoryClassicUnloadedEmptiedThenReassigned(t *testing.T) {
	lateParity(t, func(h *h) bool {
		h.emptiedDuringHeldAssignment("g")
		h.advance(time.Second)
		tk := h.newMember("g", jo{})
		for i := 0; i < 100 && !h.answered(tk); i++ {
			h.advance(100 * time.Millisecond)
		}
		r := h.joinResp(tk)
		if r.ErrorCode != 0 {
			h.t.Fatalf("join: %d", r.ErrorCode)
		}
		h.sync("g", r.MemberID, r.Generation, map[string]string{r.MemberID: "a0"})
		return len(h.held) == 4 // both assignments, the Empty event's write and the empty group's
	})
}

// A consumer-protocol member upgrades the group while the classic
// assignment write (seq 2) is in flight, and that write fails: the
// rebalance ended superseded by the upgrade, at seq 2.
func TestHistoryClassicUnloadedUpgradeDuringAssignmentWrite(t *testing.T) {
	lateParity(t, func(h *h) bool {
		h.cgAssignmentHeld()
		h.cgSend(hb{member: "n1", names: []string{"a"}, owned: tpset{}})
		return len(h.held) == 2 // the assignment's and the upgrade's
	})
}

// A consumer group's last member leaves with the store held (event 2,
// told once its write is durable), and a classic member then turns the
// empty group classic and joins, its session expiring before it syncs: the
// classic rebalance ends Empty (event 3) while event 2's write is still in
// flight. Event 3 waits for it, so the observer hears 1, 2, 3. Found by
// FuzzMixedOutcomes.
func TestHistoryClassicEmptyDuringConsumerWriteToldInOrder(t *testing.T) {
	var seen []RebalanceEvent
	h, _ := newCH(t, map[string]int32{"a": 2}, func(c *Config) {
		c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) }
	})
	expectCode(t, "cg join", h.cg(hb{group: "g", member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	h.hold = true
	h.cgSend(hb{group: "g", member: "m0", epoch: -1})
	if len(h.held) != 1 {
		t.Fatalf("%d writes held, want the leave's", len(h.held))
	}
	h.join("g", jo{v: 3, session: 6000, rebalance: 10000, protos: protos("range", string(subscription(nil, "a")))})
	h.advance(time.Minute)
	if g := h.s.Group("g"); g == nil || g.cg != nil || g.state != Empty {
		t.Fatal("setup: the group did not turn classic and empty again")
	}
	h.release()
	checkTold(t, seen, "[1 2 3]")
	if seen[1].Type != "consumer" || seen[2].Type != "classic" || seen[2].Outcome != "empty" {
		t.Fatalf("told %s, want event 2 the consumer group's leave, 3 the classic Empty", toldSummary(seen))
	}
}
