package group

// Conformance tests for SyncGroup (33–43, docs/group-semantics.md §sync) and
// for Heartbeat and sessions (44–50, §heartbeat and §timers), numbered as in
// its §tests.

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// twoJoined returns a 2-member group right after join completion
// (CompletingRebalance): leader, follower, generation.
func (h *h) twoJoined() (string, string, int32) {
	h.t.Helper()
	ids, gen := h.stableGroup("g", 2)
	t1 := h.join("g", jo{member: ids[0]})
	t2 := h.join("g", jo{member: ids[1]})
	r := h.joinResp(t1)
	h.joinResp(t2)
	if h.s.Group("g").State() != CompletingRebalance || r.Generation != gen+1 {
		h.t.Fatalf("setup: state %v", h.s.Group("g").State())
	}
	return ids[0], ids[1], r.Generation
}

func TestC33_SyncGroupFromUnknownGroupMemberOrGeneration(t *testing.T) {
	h := newH(t)
	h.wantCode(h.sync("nope", "m", 1, nil), ErrUnknownMemberID)
	ids, gen := h.stableGroup("g", 1)
	h.wantCode(h.sync("g", "other", gen, nil), ErrUnknownMemberID)
	h.wantCode(h.sync("g", ids[0], gen+1, nil), ErrIllegalGeneration)
}

func TestC34_SyncDeadGroup(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	h.s.Group("g").state = Dead // as while the partition unloads
	h.wantCode(h.sync("g", ids[0], gen, nil), ErrCoordinatorNotAvailable)
}

func TestC35_SyncGroupEmptyAssignment(t *testing.T) {
	h := newH(t)
	l, f, gen := h.twoJoined()
	tf := h.sync("g", f, gen, nil)
	tl := h.sync("g", l, gen, map[string]string{l: "mine"})
	if string(h.syncResp(tl).MemberAssignment) != "mine" {
		t.Fatal("leader assignment")
	}
	// Consumer protocol: an omitted member gets an encoded empty assignment.
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(h.syncResp(tf).MemberAssignment); err != nil || len(a.Topics) != 0 {
		t.Fatalf("follower got %x (%v)", h.syncResp(tf).MemberAssignment, err)
	}
	// Other protocol types get zero bytes.
	h2 := newH(t)
	r := h2.joinResp(h2.newMember("c", jo{ptype: "connect"}))
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 3, "c", r.MemberID, r.Generation
	tk := h2.do(func(t Ticket, out *Output) { h2.s.SyncGroup(h2.now, t, req, out) })
	if got := h2.syncResp(tk); got.ErrorCode != 0 || len(got.MemberAssignment) != 0 {
		t.Fatalf("%+v", got)
	}
}

func TestC36_SyncGroupFollowerAfterLeaderAndLeaderAfterFollower(t *testing.T) {
	for _, leaderFirst := range []bool{true, false} {
		h := newH(t)
		l, f, gen := h.twoJoined()
		assign := map[string]string{l: "L", f: "F"}
		var tl, tf Ticket
		if leaderFirst {
			tl = h.sync("g", l, gen, assign)
			tf = h.sync("g", f, gen, nil)
		} else {
			tf = h.sync("g", f, gen, nil)
			h.notAnswered(tf)
			tl = h.sync("g", l, gen, assign)
		}
		if string(h.syncResp(tl).MemberAssignment) != "L" || string(h.syncResp(tf).MemberAssignment) != "F" {
			t.Fatalf("leaderFirst=%v: wrong assignments", leaderFirst)
		}
		if r := h.syncResp(tf); *r.ProtocolType != "consumer" || *r.Protocol != "range" {
			t.Fatal("v5 must echo protocol type and name")
		}
	}
}

func TestC37_LeaderFailureInSyncGroup(t *testing.T) {
	h := newH(t)
	l, f, gen := h.twoJoined()
	tf := h.sync("g", f, gen, nil)
	// The follower keeps heartbeating; the leader is silent.
	for i := 0; i < 2; i++ {
		h.advance(5 * time.Second)
		h.heartbeat("g", f, gen)
	}
	h.wantCode(tf, ErrRebalanceInProgress)
	if h.s.Group("g").byID[l] != nil {
		t.Fatal("leader not expired")
	}
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

func TestC39_RebalanceTimesOutWhenSyncRequestIsNotReceived(t *testing.T) {
	h := newH(t)
	l, f, gen := h.twoJoined()
	for i := 0; i < 3; i++ { // heartbeats keep them alive; nobody syncs
		h.advance(9 * time.Second)
		h.heartbeat("g", l, gen)
		h.heartbeat("g", f, gen)
	}
	h.advance(3 * time.Second) // 30 s rebalance timeout
	if n := len(h.s.Group("g").MemberIDs()); n != 0 {
		t.Fatalf("%d members left", n)
	}
	if c := h.heartbeat("g", l, gen); c != ErrUnknownMemberID {
		t.Fatalf("heartbeat %d", c)
	}
}

func TestC40_RebalanceTimesOutWhenSyncRequestIsNotReceivedFromFollowers(t *testing.T) {
	h := newH(t)
	l, f, gen := h.twoJoined()
	h.sync("g", l, gen, map[string]string{l: "L", f: "F"})
	if h.s.Group("g").State() != Stable {
		t.Fatal("not stable")
	}
	for i := 0; i < 3; i++ {
		h.advance(9 * time.Second)
		h.heartbeat("g", l, gen)
		h.heartbeat("g", f, gen) // heartbeats do not count as syncing
	}
	h.advance(3 * time.Second)
	g := h.s.Group("g")
	if g.byID[f] != nil || g.byID[l] == nil {
		t.Fatalf("members %v", g.MemberIDs())
	}
	if c := h.heartbeat("g", l, gen); c != ErrRebalanceInProgress {
		t.Fatalf("leader heartbeat %d", c)
	}
}

func TestC41_RebalanceTimesOutWhenSyncRequestIsNotReceivedFromLeader(t *testing.T) {
	h := newH(t)
	l, f, gen := h.twoJoined()
	tf := h.sync("g", f, gen, nil)
	for i := 0; i < 3; i++ {
		h.advance(9 * time.Second)
		h.heartbeat("g", l, gen)
		h.heartbeat("g", f, gen)
	}
	h.advance(3 * time.Second)
	h.wantCode(tf, ErrRebalanceInProgress)
	if g := h.s.Group("g"); g.byID[l] != nil || g.byID[f] == nil {
		t.Fatalf("members %v", g.MemberIDs())
	}
}

func TestC42_RebalanceDoesNotTimeOutWhenAllSyncAreReceived(t *testing.T) {
	h := newH(t)
	l, f, gen := h.twoJoined()
	h.sync("g", f, gen, nil)
	h.sync("g", l, gen, map[string]string{l: "L", f: "F"})
	for i := 0; i < 10; i++ {
		h.advance(9 * time.Second)
		h.heartbeat("g", l, gen)
		h.heartbeat("g", f, gen)
	}
	if g := h.s.Group("g"); g.State() != Stable || len(g.MemberIDs()) != 2 || g.Generation() != gen {
		t.Fatal("group changed")
	}
}

func TestC43_SyncGroupAsLeaderAppendFailure(t *testing.T) {
	h := newH(t)
	l, f, gen := h.twoJoined()
	tf := h.sync("g", f, gen, nil)
	before := string(h.store[string(groupKey("g"))])
	h.fail = ErrNotCoordinator // the store reports the partition lost
	tl := h.sync("g", l, gen, map[string]string{l: "L", f: "F"})
	h.wantCode(tl, ErrNotCoordinator)
	h.wantCode(tf, ErrNotCoordinator)
	g := h.s.Group("g")
	if g.State() != PreparingRebalance {
		t.Fatalf("state %v", g.State())
	}
	if a, _ := g.Assignment(f); len(a) != 0 {
		t.Fatal("assignment kept after failed write")
	}
	if string(h.store[string(groupKey("g"))]) != before {
		t.Fatal("failed write reached the store")
	}
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

func TestC45_HeartbeatDuringRebalanceCausesRebalanceInProgress(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	h.join("g", jo{member: ids[0]})
	if c := h.heartbeat("g", ids[1], gen); c != ErrRebalanceInProgress {
		t.Fatal(c)
	}
}

func TestC46_HeartbeatDuringCompletingRebalance(t *testing.T) {
	h := newH(t)
	l, f, gen := h.twoJoined()
	if c := h.heartbeat("g", f, gen); c != ErrNone {
		t.Fatal(c)
	}
	if c := h.heartbeat("g", l, gen); c != ErrNone {
		t.Fatal(c)
	}
}

func TestC47_HeartbeatIllegalGeneration(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	if c := h.heartbeat("g", ids[0], gen+1); c != ErrIllegalGeneration {
		t.Fatal(c)
	}
}

func TestC48_SessionTimeoutHeartbeatAndCommitMaintainSession(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	for i := 0; i < 5; i++ {
		h.advance(9 * time.Second)
		if i%2 == 0 {
			h.heartbeat("g", ids[0], gen)
		} else if c := commitCodes(h.commit("g", ids[0], gen, 9, map[string]int64{"t": int64(i)})); c[0] != 0 {
			t.Fatal(c)
		}
	}
	if len(h.s.Group("g").MemberIDs()) != 1 {
		t.Fatal("member expired despite heartbeats and commits")
	}
	h.advance(10 * time.Second)
	if g := h.s.Group("g"); len(g.MemberIDs()) != 0 || g.State() != Empty {
		t.Fatalf("silent member kept: %v %v", g.MemberIDs(), g.State())
	}
}

func TestC49_SessionTimeoutDuringRebalance(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	tk := h.join("g", jo{member: ids[0]}) // follower never rejoins nor heartbeats
	h.advance(10 * time.Second)
	r := h.joinResp(tk)
	if r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("%+v", r)
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
