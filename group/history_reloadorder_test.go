package group

import (
	"testing"
	"time"
)

// A consumer group's completing write fails while later ones of the group
// are still in flight: the shard awaits a reload, but until the runtime
// drains those writes it keeps serving. A classic event recorded then (the
// group turned classic and emptied again) comes after the events those
// writes hold, which are told once they are durable: it is held for them,
// not told at once ahead of them.
func TestHistoryClassicEventAfterFailedConsumerWriteToldInOrder(t *testing.T) {
	var seen []RebalanceEvent
	h, _ := newCH(t, map[string]int32{"a": 2}, func(c *Config) {
		c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) }
	})
	expectCode(t, "cg join", h.cg(hb{group: "g", member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	h.hold = true
	h.cgSend(hb{group: "g", member: "m0", epoch: -1}) // event 2: the group is empty
	h.cgSend(hb{group: "g", member: "m1", names: []string{"a"}, owned: tpset{}})
	h.cgSend(hb{group: "g", member: "m1", epoch: -1})
	if len(h.held) != 3 {
		t.Fatalf("setup: %d writes held, want m0's leave, m1's join and m1's leave", len(h.held))
	}
	h.completeHeld(0, ErrCoordinatorNotAvailable) // m0's leave is not stored
	h.held = h.held[1:]
	if !h.s.NeedsReload() {
		t.Fatal("setup: the failed consumer write did not ask for a reload")
	}
	h.join("g", jo{v: 3, session: 6000, rebalance: 10000, protos: protos("range", string(subscription(nil, "a")))})
	h.advance(time.Minute)
	if g := h.s.Group("g"); g == nil || g.cg != nil || g.state != Empty {
		t.Fatal("setup: the group did not turn classic and empty again")
	}
	h.release()
	checkTold(t, seen, "[1 3 4 5]")
	if seen[3].Type != "classic" || seen[3].Outcome != "empty" {
		t.Fatalf("told %s, want event 5 the classic Empty", toldSummary(seen))
	}
}
