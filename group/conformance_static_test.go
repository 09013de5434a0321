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
