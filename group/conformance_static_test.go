package group

// Conformance tests for static membership (51–65, docs/group-semantics.md
// §static), numbered as in its §tests. The other numbered cases of this range
// are scenario files in testdata/ (docs/group-semantics.md §scenarios).

import (
	"testing"
	"time"
)

// staticGroup forms a Stable group of static members "a" (leader), "b", ...
func (h *h) staticGroup(n int) (map[string]string, int32) {
	h.t.Helper()
	saved := h.s.cfg.InitialRebalanceDelay
	h.s.cfg.InitialRebalanceDelay = 100 * time.Millisecond
	var ts []Ticket
	insts := []string{}
	for i := 0; i < n; i++ {
		inst := string(rune('a' + i))
		insts = append(insts, inst)
		ts = append(ts, h.join("g", jo{instance: inst}))
	}
	for i := 0; i < 1000 && !h.answered(ts[0]); i++ {
		h.advance(100 * time.Millisecond)
	}
	h.s.cfg.InitialRebalanceDelay = saved
	ids := map[string]string{}
	var all []string
	var leader string
	var gen int32
	for i, tk := range ts {
		r := h.joinResp(tk)
		ids[insts[i]] = r.MemberID
		all = append(all, r.MemberID)
		leader, gen = r.LeaderID, r.Generation
	}
	if leader != ids["a"] {
		h.t.Fatalf("leader %s, want a's %s", leader, ids["a"])
	}
	h.syncAll("g", leader, all, gen)
	return ids, gen
}

func TestC51_StaticMemberJoinAsFirstMemberAndRejoinWithExplicitUnknownMemberID(t *testing.T) {
	h := newH(t)
	ids, _ := h.staticGroup(1)
	if ids["a"] == "" || ids["a"][:2] != "a-" {
		t.Fatalf("static member id %q should be prefixed by the instance id", ids["a"])
	}
	h.wantCode(h.join("g", jo{instance: "a", member: "a-stale"}), ErrFencedInstanceID)
}

func TestC54_FenceDuplicateRejoiningFollowerAfterMemberIDChanged(t *testing.T) {
	h := newH(t)
	ids, _ := h.staticGroup(2)
	h.wantCode(h.join("g", jo{instance: "b"}), ErrNone)
	h.wantCode(h.join("g", jo{instance: "b", member: ids["b"]}), ErrFencedInstanceID)
}

func TestC63_StaticMemberGetsDifferentMemberIDAfterEachRejoin(t *testing.T) {
	h := newH(t)
	ids, _ := h.staticGroup(1)
	seen := map[string]bool{ids["a"]: true}
	for i := 0; i < 5; i++ {
		r := h.joinResp(h.join("g", jo{instance: "a"}))
		if seen[r.MemberID] || r.MemberID[:2] != "a-" {
			t.Fatalf("id %q reused or badly formed", r.MemberID)
		}
		seen[r.MemberID] = true
	}
}

func TestC64_StaticMemberFollowerAndLeaderFailToRejoinBeforeRebalanceTimeout(t *testing.T) {
	for _, absent := range []string{"b", "a"} {
		h := newH(t)
		h.session = 60_000 // longer than the rebalance timeout
		ids, _ := h.staticGroup(2)
		present := map[string]string{"a": "b", "b": "a"}[absent]
		// A third static member triggers a rebalance; the absent one never rejoins.
		tc := h.join("g", jo{instance: "c"})
		tp := h.join("g", jo{instance: present, member: ids[present]})
		h.advance(30 * time.Second)
		rp, rc := h.joinResp(tp), h.joinResp(tc)
		leader := rp
		if rc.LeaderID == rc.MemberID {
			leader = rc
		}
		if len(leader.Members) != 3 {
			t.Fatalf("absent %s: leader sees %d members", absent, len(leader.Members))
		}
		if absent == "a" && (leader.LeaderID == ids["a"]) {
			t.Fatal("absent leader kept the lead")
		}
	}
}

func TestC65_GroupStuckInRebalanceDueToNonJoinedStaticMember(t *testing.T) {
	for _, rejoin := range []bool{true, false} {
		h := newH(t)
		h.session = 60_000 // longer than the rebalance timeout
		ids, _ := h.staticGroup(2)
		// b leaves by admin; a (leader) does not rejoin the resulting rebalance.
		h.leave("g", lm("", "b"))
		g := h.s.Group("g")
		if g.State() != PreparingRebalance {
			t.Fatal(g.State())
		}
		h.advance(30 * time.Second) // join timer: only absent static a → wait more
		if g.State() != PreparingRebalance || g.Generation() != 1 {
			t.Fatalf("state %v gen %d", g.State(), g.Generation())
		}
		if rejoin {
			r := h.joinResp(h.join("g", jo{instance: "a", member: ids["a"]}))
			if r.Generation != 2 {
				t.Fatalf("gen %d", r.Generation)
			}
			continue
		}
		h.advance(30 * time.Second) // a's session (60 s) expires
		if g.State() != Empty || g.Generation() != 2 {
			t.Fatalf("state %v gen %d", g.State(), g.Generation())
		}
	}
}

// TestStaticSessionRestartsWhenParkedSyncIsAnswered: a static follower's
// session runs out while its SyncGroup is parked (parked members count as
// alive); the leader then disappears, the rebalance answers the follower's
// SyncGroup REBALANCE_IN_PROGRESS, and the follower never returns. Its
// session must restart with that answer, as Kafka restarts every member's
// session when it answers them: otherwise nothing ever evicts it and the
// group stays in PreparingRebalance forever.
func TestStaticSessionRestartsWhenParkedSyncIsAnswered(t *testing.T) {
	h := newH(t)
	ids, _ := h.staticGroup(2)
	// Both rejoin: a new generation, b syncs first and parks.
	ta := h.join("g", jo{instance: "a", member: ids["a"], protos: protos("range", "changed")})
	tb := h.join("g", jo{instance: "b", member: ids["b"]})
	ra, rb := h.joinResp(ta), h.joinResp(tb)
	sb := h.sync("g", rb.MemberID, rb.Generation, nil, "b")
	h.notAnswered(sb)
	// a heartbeats for a while, b waits (its 10 s session expires while
	// parked), then a goes silent and is evicted at 15 s + 10 s.
	for i := 0; i < 3; i++ {
		h.advance(5 * time.Second)
		h.heartbeat("g", ra.MemberID, ra.Generation, "a")
	}
	h.advance(11 * time.Second)
	if h.resp(sb) == nil {
		t.Fatal("b's SyncGroup was not answered")
	}
	// b never comes back: within its session timeout of the answer, it is
	// evicted and the group ends Empty.
	h.advance(11 * time.Second)
	g := h.s.Group("g")
	if g.State() != Empty || len(g.MemberIDs()) != 0 {
		t.Fatalf("group %v with members %v, want Empty", g.State(), g.MemberIDs())
	}
}
