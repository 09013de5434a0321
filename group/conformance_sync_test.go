package group

// Conformance tests for SyncGroup (33–43, docs/group-semantics.md §sync) and
// for Heartbeat and sessions (44–50, §heartbeat and §timers), numbered as in
// its §tests. The other numbered cases of this range are scenario files in
// testdata/ (docs/group-semantics.md §scenarios).

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestC34_SyncDeadGroup(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	h.s.Group("g").state = Dead // as while the partition unloads
	h.wantCode(h.sync("g", ids[0], gen, nil), ErrCoordinatorNotAvailable)
}

func TestC38_SyncGroupProtocolTypeOrNameInconsistent(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	bad := "other"
	for _, mod := range []func(*kmsg.SyncGroupRequest){
		func(r *kmsg.SyncGroupRequest) { r.ProtocolType = &bad },
		func(r *kmsg.SyncGroupRequest) { r.Protocol = &bad },
		func(r *kmsg.SyncGroupRequest) { r.ProtocolType = nil }, // v5 requires both
	} {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 5, "g", ids[0], gen
		pt, p := "consumer", "range"
		req.ProtocolType, req.Protocol = &pt, &p
		mod(req)
		tk := h.do(func(t Ticket, out *Output) { h.s.SyncGroup(h.now, t, req, out) })
		h.wantCode(tk, ErrInconsistentProtocol)
	}
	// Absent fields (v4) or matching ones (v5) succeed.
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 4, "g", ids[0], gen
	tk := h.do(func(t Ticket, out *Output) { h.s.SyncGroup(h.now, t, req, out) })
	h.wantCode(tk, ErrNone)
	h.wantCode(h.sync("g", ids[0], gen, nil), ErrNone)
}

// Heartbeat / session

func TestC44_HeartbeatUnknownGroupDeadGroupEmptyGroupUnknownMember(t *testing.T) {
	h := newH(t)
	if c := h.heartbeat("nope", "m", 1); c != ErrUnknownMemberID {
		t.Fatal(c)
	}
	ids, gen := h.stableGroup("g", 1)
	if c := h.heartbeat("g", "other", gen); c != ErrUnknownMemberID {
		t.Fatal(c)
	}
	h.leave("g", lm(ids[0])) // now Empty
	if c := h.heartbeat("g", ids[0], gen); c != ErrUnknownMemberID {
		t.Fatal(c)
	}
	h.s.Group("g").state = Dead
	if c := h.heartbeat("g", ids[0], gen); c != ErrCoordinatorNotAvailable {
		t.Fatal(c)
	}
}

func TestC50_RebalanceCompletesBeforeMemberJoins(t *testing.T) {
	h := newH(t)
	ta := h.join("g", jo{instance: "a", session: 60_000, rebalance: 10_000})
	h.advance(0)
	ra := h.joinResp(ta)
	tb := h.join("g", jo{instance: "b", session: 60_000, rebalance: 10_000})
	h.joinResp(ta) // a is leader; b's join rebalances; a must rejoin
	// b joined into PreparingRebalance; a (static) does not rejoin in time.
	h.advance(10 * time.Second)
	rb := h.joinResp(tb)
	if rb.LeaderID != rb.MemberID || len(rb.Members) != 2 {
		t.Fatalf("b should lead (a absent) and see both members: %+v", rb)
	}
	g := h.s.Group("g")
	if g.byID[ra.MemberID] == nil {
		t.Fatal("absent static member dropped at join completion")
	}
	if c := h.heartbeat("g", ra.MemberID, ra.Generation, "a"); c != ErrIllegalGeneration {
		t.Fatalf("old-generation heartbeat %d", c)
	}
	genAfter := g.Generation()
	h.sync("g", rb.MemberID, rb.Generation, map[string]string{rb.MemberID: "B"})
	// a's session (60 s) expires: another rebalance without it.
	for i := 0; i < 7; i++ {
		h.advance(9 * time.Second)
		h.heartbeat("g", rb.MemberID, g.Generation(), "b")
	}
	if g.byID[ra.MemberID] != nil {
		t.Fatal("absent static member never evicted")
	}
	if g.State() != PreparingRebalance && g.Generation() == genAfter {
		t.Fatalf("eviction did not rebalance: %v gen %d", g.State(), g.Generation())
	}
}
