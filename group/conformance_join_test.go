package group

// Conformance tests for JoinGroup admission and the join barrier (03–27)
// and KIP-394 pending members (28–32), numbered as in docs/group-semantics.md
// §tests; the rules are in its §join sections. Numbers 01 and 02 (loading,
// wrong coordinator) are coordinator concerns and live in package
// coordinator. The other numbered cases of this range are scenario files in
// testdata/ (see docs/group-semantics.md §scenarios); the ones here loop,
// sweep variants or reach into internal state.

import "testing"

func TestC15_LastJoiningMembersAreKickedOutWhenRejoiningGroupWithMaxSize(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 5)
	h.s.cfg.MaxSize = 3 // limit lowered (as after a config change and load)
	// The leader rejoins: rebalance. Then the others rejoin in order.
	var ts []Ticket
	for _, id := range ids {
		ts = append(ts, h.join("g", jo{member: id}))
	}
	for i, tk := range ts {
		r := h.joinResp(tk)
		if i < 3 && r.ErrorCode != 0 || i >= 3 && r.ErrorCode != ErrGroupMaxSizeReached {
			t.Fatalf("member %d: code %d", i, r.ErrorCode)
		}
	}
	g := h.s.Group("g")
	if len(g.MemberIDs()) != 3 || g.State() != CompletingRebalance {
		t.Fatalf("members %v state %v", g.MemberIDs(), g.State())
	}
}

// Pending members (KIP-394)
