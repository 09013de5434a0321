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

func TestC17_NewMemberJoinExpiration(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	newT := h.newMember("g", jo{session: 600_000, rebalance: 600_000}) // parks; group rebalances
	g := h.s.Group("g")
	if g.State() != PreparingRebalance {
		t.Fatalf("state %v", g.State())
	}
	// The original member keeps heartbeating (27 tells it to rejoin, but it
	// does not): it is not evicted by the new member's timeout.
	for i := 0; i < 33; i++ {
		h.advance(9 * time.Second)
		if c := h.heartbeat("g", ids[0], gen); c != ErrRebalanceInProgress {
			t.Fatalf("heartbeat %d", c)
		}
	}
	// 297 s passed; the 5-minute new-member timer fires at 300 s.
	h.notAnswered(newT)
	h.advance(4 * time.Second)
	r := h.joinResp(newT)
	if r.ErrorCode != ErrUnknownMemberID || r.MemberID != "" {
		t.Fatalf("expired new member: %+v", r)
	}
	if len(g.MemberIDs()) != 1 || g.MemberIDs()[0] != ids[0] {
		t.Fatalf("members %v", g.MemberIDs())
	}
}

func TestC26_CompleteJoinPhaseNoMembersRejoinedExtendsJoinPhase(t *testing.T) {
	h := newH(t)
	tA := h.join("g", jo{instance: "a", session: 60_000})
	ra := h.joinResp(tA)
	h.syncAll("g", ra.LeaderID, []string{ra.MemberID}, ra.Generation)
	// The admin removes nothing; a new static member joins and leaves the
	// barrier waiting for "a", which never rejoins.
	tB := h.join("g", jo{instance: "b", session: 60_000})
	h.leave("g", lm("", "b")) // b leaves while parked: only absent "a" remains
	h.wantCode(tB, ErrUnknownMemberID)
	g := h.s.Group("g")
	h.advance(30 * time.Second) // join timer fires: nobody parked
	if g.State() != PreparingRebalance || g.Generation() != 1 {
		t.Fatalf("state %v gen %d", g.State(), g.Generation())
	}
}

// Pending members (KIP-394)

func TestC28_SecondMemberPartiallyJoinAndTimeout(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	h.wantCode(h.join("g", jo{}), ErrMemberIDRequired)
	g := h.s.Group("g")
	if g.NumPending() != 1 || g.State() != Stable {
		t.Fatal("pending id should not change the group")
	}
	h.advance(5 * time.Second)
	h.heartbeat("g", ids[0], gen)
	h.advance(5 * time.Second)
	if g.NumPending() != 0 || g.State() != Stable || len(g.MemberIDs()) != 1 {
		t.Fatalf("pending %d state %v", g.NumPending(), g.State())
	}
}
