package group

// Conformance tests for JoinGroup admission and the join barrier (03–27)
// and KIP-394 pending members (28–32), numbered as in docs/group-semantics.md
// §tests; the rules are in its §join sections. Numbers 01 and 02 (loading,
// wrong coordinator) are coordinator concerns and live in package
// coordinator. The other numbered cases of this range are scenario files in
// testdata/ (see docs/group-semantics.md §scenarios); the ones here loop,
// sweep variants or reach into internal state.

import (
	"testing"
	"time"
)

func TestC13_MembersJoinGroupWithMaxSize(t *testing.T) {
	for _, static := range []bool{false, true} {
		h := newH(t, func(c *Config) { c.MaxSize = 3; c.InitialRebalanceDelay = time.Second })
		var ok, rejected int
		var ts []Ticket
		for i := 0; i < 5; i++ {
			o := jo{v: 3}
			if static {
				o = jo{instance: string(rune('a' + i))}
			}
			tk := h.join("g", o)
			if h.answered(tk) {
				h.wantCode(tk, ErrGroupMaxSizeReached)
				rejected++
			} else {
				ts = append(ts, tk)
				ok++
			}
		}
		if ok != 3 || rejected != 2 {
			t.Fatalf("static=%v accepted %d rejected %d", static, ok, rejected)
		}
		for i := 0; i < 100 && !h.answered(ts[0]); i++ {
			h.advance(time.Second)
		}
		var ids []string
		for _, tk := range ts {
			r := h.joinResp(tk)
			if r.ErrorCode != 0 {
				t.Fatalf("code %d", r.ErrorCode)
			}
			ids = append(ids, r.MemberID)
		}
		// Rejoin outcome identical: the same three are accepted.
		for _, id := range ids {
			o := jo{member: id, v: 3}
			if static {
				o.instance = h.s.Group("g").byID[id].instanceID
			}
			h.join("g", o)
		}
		if n := len(h.s.Group("g").MemberIDs()); n != 3 {
			t.Fatalf("members %d", n)
		}
	}
}

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
