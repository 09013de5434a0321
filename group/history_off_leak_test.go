package group

import (
	"fmt"
	"testing"
	"time"
)

// A node without history but with an observer numbers its groups'
// rebalances in a per-group entry (Shard.hist); a group deleted, by
// DeleteGroups or by retention, must not leave that entry behind: with
// short-lived group ids (a console consumer's random group each run) the
// entries would pile up for as long as the partition is served. With
// history on, the history's tombstones drop the entry; without history
// there are none, so nothing did.
func TestHistoryOffDeletedGroupsLeaveNoEntry(t *testing.T) {
	for _, size := range []int{100, -1} {
		t.Run(fmt.Sprintf("history=%d", size), func(t *testing.T) {
			told := 0
			h, _ := newCH(t, map[string]int32{"t": 4}, func(c *Config) {
				c.HistorySize = size
				c.OffsetsRetention = time.Hour
				c.OnRebalance = func(RebalanceEvent) { told++ }
			})
			for i := range 6 {
				g := fmt.Sprintf("g%d", i)
				ids, gen := h.stableGroup(g, 1)
				if c := commitCodes(h.commit(g, ids[0], gen, 9, map[string]int64{"t": 5})); c[0] != ErrNone {
					t.Fatalf("commit: %v", c)
				}
				if r := h.leave(g, lm(ids[0])); r.ErrorCode != 0 {
					t.Fatalf("leave: %d", r.ErrorCode)
				}
				if i%2 == 0 { // deleted; the others go by retention
					if r := h.deleteGroups(g); r.Groups[0].ErrorCode != ErrNone {
						t.Fatalf("delete %s: %d", g, r.Groups[0].ErrorCode)
					}
				}
			}
			for i := range 4 { // consumer groups: joined, left, deleted or expired
				g := fmt.Sprintf("cg%d", i)
				r := h.cg(hb{group: g, member: "m", names: []string{"t"}, owned: tpset{}})
				if r.ErrorCode != 0 {
					t.Fatalf("%s join: %d", g, r.ErrorCode)
				}
				if c := commitCodes(h.commit(g, "m", r.MemberEpoch, 9, map[string]int64{"t": 5})); c[0] != ErrNone {
					t.Fatalf("%s commit: %v", g, c)
				}
				if r := h.cg(hb{group: g, member: "m", epoch: epochLeave}); r.ErrorCode != 0 {
					t.Fatalf("%s leave: %d", g, r.ErrorCode)
				}
				if i%2 == 0 {
					if r := h.deleteGroups(g); r.Groups[0].ErrorCode != ErrNone {
						t.Fatalf("delete %s: %d", g, r.Groups[0].ErrorCode)
					}
				}
			}
			h.advance(2 * time.Hour)
			h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) }) // retention removes the rest
			if told < 20 {
				t.Fatalf("only %d rebalances told", told)
			}
			if h.s.Len() != 0 {
				t.Fatalf("%d groups left: %v", h.s.Len(), h.s.GroupIDs())
			}
			if n := len(h.s.hist); n != 0 {
				t.Fatalf("10 groups deleted leave %d history entries behind", n)
			}
		})
	}
}
