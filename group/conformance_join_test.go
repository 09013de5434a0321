package group

// Conformance tests for JoinGroup admission and the join barrier (03–27)
// and KIP-394 pending members (28–32), numbered as in docs/group-semantics.md
// §tests; the rules are in its §join sections. Numbers 01 and 02 (loading,
// wrong coordinator) are coordinator concerns and live in package
// coordinator.

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestC03_JoinGroupSessionTimeoutTooSmallOrTooLarge(t *testing.T) {
	h := newH(t)
	h.wantCode(h.join("g", jo{session: 5999}), ErrInvalidSessionTimeout)
	h.wantCode(h.join("g", jo{session: 1_800_001}), ErrInvalidSessionTimeout)
	if h.s.Group("g") != nil {
		t.Fatal("a rejected join created the group")
	}
	h.wantCode(h.join("g", jo{session: 6000}), ErrMemberIDRequired)
}

func TestC04_InvalidGroupID(t *testing.T) {
	h := newH(t)
	h.wantCode(h.join("", jo{}), ErrInvalidGroupID)
	h.wantCode(h.sync("", "m", 1, nil), ErrInvalidGroupID)
	if c := h.heartbeat("", "m", 1); c != ErrInvalidGroupID {
		t.Fatalf("heartbeat: %d", c)
	}
	if r := h.leave("", lm("m")); r.ErrorCode != ErrInvalidGroupID {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
}

func TestC05_JoinGroupUnknownConsumerNewGroup(t *testing.T) {
	h := newH(t)
	h.wantCode(h.join("g", jo{member: "x"}), ErrUnknownMemberID)
	h.wantCode(h.join("g", jo{member: "x", instance: "i"}), ErrUnknownMemberID)
}

func TestC06_JoinGroupUnknownConsumerExistingGroup(t *testing.T) {
	h := newH(t)
	h.stableGroup("g", 1)
	h.wantCode(h.join("g", jo{member: "nobody"}), ErrUnknownMemberID)
}

func TestC07_JoinGroupDeadGroup(t *testing.T) {
	h := newH(t)
	h.commit("g", "", -1, 9, map[string]int64{"t": 1})
	h.hold = true // keep the delete in flight: the group is Dead meanwhile
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
	if st := h.s.Group("g").State(); st != Dead {
		t.Fatalf("state %v", st)
	}
	h.wantCode(h.join("g", jo{}), ErrCoordinatorNotAvailable)
	h.wantCode(h.join("g", jo{member: "m"}), ErrCoordinatorNotAvailable)
	h.release()
	if h.s.Group("g") != nil {
		t.Fatal("deleted group still present")
	}
}

func TestC08_JoinGroupInconsistentProtocolType(t *testing.T) {
	h := newH(t)
	first := h.newMember("g", jo{})
	h.wantCode(first, ErrNone)
	h.wantCode(h.join("g", jo{ptype: "connect"}), ErrInconsistentProtocol)
}

func TestC09_JoinGroupWithEmptyProtocolTypeOrProtocols(t *testing.T) {
	h := newH(t)
	req := func(o jo) Ticket { return h.join("g", o) }
	// ptype "" is replaced by the harness default, so build it directly.
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "g", 10000, 10000
	r.Protocols = protos("range", "m")
	tk := h.do(func(t Ticket, out *Output) { h.s.JoinGroup(h.now, t, Client{}, r, out) })
	h.wantCode(tk, ErrInconsistentProtocol)
	h.wantCode(req(jo{noProtos: true}), ErrInconsistentProtocol)
}

func TestC10_JoinGroupInconsistentGroupProtocol(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	h.wantCode(h.join("g", jo{protos: protos("roundrobin", "x")}), ErrInconsistentProtocol)
	g := h.s.Group("g")
	if g.State() != Stable || g.Generation() != gen || len(g.MemberIDs()) != 1 || g.MemberIDs()[0] != ids[0] {
		t.Fatal("first member affected by rejected join")
	}
}

func TestC11_JoinGroupSecondJoinInconsistentProtocol(t *testing.T) {
	h := newH(t)
	r := h.joinResp(h.join("g", jo{}))
	h.wantCode(h.join("g", jo{member: r.MemberID, noProtos: true}), ErrInconsistentProtocol)
	tk := h.join("g", jo{member: r.MemberID})
	h.wantCode(tk, ErrNone)
	if h.joinResp(tk).MemberID != r.MemberID {
		t.Fatal("member id changed")
	}
}

func TestC12_JoinGroupShouldReceiveErrorIfGroupOverMaxSize(t *testing.T) {
	h := newH(t, func(c *Config) { c.MaxSize = 2; c.InitialRebalanceDelay = time.Second })
	var ts []Ticket
	for i := 0; i < 2; i++ {
		ts = append(ts, h.join("g", jo{v: 3})) // v3: no pending step
	}
	over := h.join("g", jo{v: 3})
	h.wantCode(over, ErrGroupMaxSizeReached)
	if h.joinResp(over).MemberID != "" {
		t.Fatal("rejected member got an id")
	}
	h.advance(30 * time.Second)
	for _, tk := range ts {
		h.wantCode(tk, ErrNone)
	}
}

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

func TestC14_DynamicMembersCanRejoinGroupWithMaxSizeWhileRebalancing(t *testing.T) {
	h := newH(t, func(c *Config) { c.MaxSize = 2; c.InitialRebalanceDelay = time.Second })
	t1 := h.join("g", jo{v: 3})
	h.join("g", jo{v: 3})
	id := h.s.Group("g").MemberIDs()[0]
	// The parked member joins again (a retry) while the barrier is open.
	t3 := h.join("g", jo{v: 3, member: id})
	h.wantCode(t1, ErrRebalanceInProgress) // superseded request
	h.notAnswered(t3)
	h.advance(30 * time.Second)
	h.wantCode(t3, ErrNone)
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

func TestC16_NewMemberTimeoutCompletion(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	// After completion only the session timeout (10 s) applies, not 5 min.
	h.advance(9 * time.Second)
	if c := h.heartbeat("g", ids[0], gen); c != 0 {
		t.Fatalf("heartbeat %d", c)
	}
	h.advance(11 * time.Second)
	if len(h.s.Group("g").MemberIDs()) != 0 {
		t.Fatal("member not evicted by session timeout")
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

func TestC18_NewMemberFailureAfterJoinGroupAndSyncGroupCompletion(t *testing.T) {
	for _, synced := range []bool{false, true} {
		h := newH(t)
		tk := h.newMember("g", jo{})
		r := h.joinResp(tk)
		if synced {
			h.syncAll("g", r.LeaderID, []string{r.MemberID}, r.Generation)
		}
		h.advance(10 * time.Second)
		if g := h.s.Group("g"); len(g.MemberIDs()) != 0 {
			t.Fatalf("synced=%v: member not expired", synced)
		}
	}
}

func TestC19_ValidJoinGroupAndGenerationIncrements(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	if gen != 1 {
		t.Fatalf("first generation %d", gen)
	}
	r := h.joinResp(h.join("g", jo{member: ids[0]}))
	if r.Generation != 2 || r.LeaderID != ids[0] || len(r.Members) != 1 {
		t.Fatalf("rejoin %+v", r)
	}
}

func TestC20_JoinGroupFromUnchangedFollowerDoesNotRebalance(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	r := h.joinResp(h.join("g", jo{member: ids[1]}))
	if r.ErrorCode != 0 || r.Generation != gen || r.LeaderID != ids[0] || len(r.Members) != 0 {
		t.Fatalf("%+v", r)
	}
	if h.s.Group("g").State() != Stable {
		t.Fatal("rebalanced")
	}
}

func TestC21_JoinGroupFromUnchangedLeaderShouldRebalance(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	tk := h.join("g", jo{member: ids[0]})
	h.notAnswered(tk)
	if h.s.Group("g").State() != PreparingRebalance {
		t.Fatal("no rebalance")
	}
	h.join("g", jo{member: ids[1]})
	if r := h.joinResp(tk); r.Generation != gen+1 {
		t.Fatalf("gen %d", r.Generation)
	}
}

func TestC22_JoinGroupProtocolTypeOnErrorAndSuccess(t *testing.T) {
	h := newH(t)
	e := h.joinResp(h.join("g", jo{member: "x"}))
	if e.ProtocolType != nil || e.Protocol != nil || e.Generation != -1 {
		t.Fatalf("error response %+v", e)
	}
	old := h.joinResp(h.join("g", jo{member: "x", v: 6}))
	if old.Protocol == nil || *old.Protocol != "" {
		t.Fatal("v<7 error must carry an empty (non-null) protocol name")
	}
	ok := h.joinResp(h.newMember("g", jo{}))
	if ok.ProtocolType == nil || *ok.ProtocolType != "consumer" || *ok.Protocol != "range" {
		t.Fatalf("success response %+v", ok)
	}
}

func TestC23_DelayInitialRebalanceOnEmptyGroup(t *testing.T) {
	h := newH(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	tk := h.newMember("g", jo{})
	h.advance(2999 * time.Millisecond)
	h.notAnswered(tk)
	h.advance(time.Millisecond)
	h.wantCode(tk, ErrNone)
}

func TestC24_ResetRebalanceDelayWhenNewMemberJoinsGroupDuringInitialRebalance(t *testing.T) {
	h := newH(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	t1 := h.newMember("g", jo{})
	h.advance(2 * time.Second)
	t2 := h.newMember("g", jo{})
	h.advance(1 * time.Second) // first window ends; a member arrived: extend by 3 s
	h.notAnswered(t1)
	h.advance(2999 * time.Millisecond)
	h.notAnswered(t2)
	h.advance(time.Millisecond)
	h.wantCode(t1, ErrNone)
	h.wantCode(t2, ErrNone)
	if h.joinResp(t1).Generation != 1 {
		t.Fatal("gen")
	}
}

func TestC25_DelayRebalanceUptoRebalanceTimeout(t *testing.T) {
	h := newH(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	// Rebalance timeout 7 s: windows 3 s, then min(3, 4)=3 s, then the
	// budget (1 s) caps the last one... never beyond 7 s in total.
	t1 := h.newMember("g", jo{rebalance: 7000})
	start := h.now
	for i := 0; i < 20 && !h.answered(t1); i++ {
		h.advance(time.Second)
		h.newMember("g", jo{rebalance: 7000})
	}
	h.wantCode(t1, ErrNone)
	if waited := h.now.Sub(start); waited > 7*time.Second {
		t.Fatalf("waited %v, more than the rebalance timeout", waited)
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

func TestC27_CompleteJoinRemoveNotYetRejoinedDynamicMembers(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	tk := h.join("g", jo{member: ids[0]}) // leader rejoins; follower never does
	h.advance(30 * time.Second)
	r := h.joinResp(tk)
	if r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("%+v", r)
	}
	if h.s.Group("g").byID[ids[1]] != nil {
		t.Fatal("absent dynamic member kept")
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

func TestC29_JoinGroupCompletionWhenPendingMemberJoins(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	p := h.joinResp(h.join("g", jo{}))
	t1 := h.join("g", jo{member: ids[0]})
	t2 := h.join("g", jo{member: ids[1]})
	h.notAnswered(t1) // the pending id blocks the barrier
	t3 := h.join("g", jo{member: p.MemberID})
	for _, tk := range []Ticket{t1, t2, t3} {
		h.wantCode(tk, ErrNone)
	}
	if len(h.joinResp(t1).Members) != 3 {
		t.Fatal("3 members expected")
	}
}

func TestC30_JoinGroupCompletionWhenPendingMemberTimesOut(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	h.join("g", jo{})
	t1 := h.join("g", jo{member: ids[0]})
	t2 := h.join("g", jo{member: ids[1]})
	h.notAnswered(t1)
	h.advance(10 * time.Second)
	h.wantCode(t1, ErrNone)
	h.wantCode(t2, ErrNone)
	if len(h.joinResp(t1).Members) != 2 {
		t.Fatal("2 members expected")
	}
}

func TestC31_PendingMembersLeaveGroup(t *testing.T) {
	for _, batch := range []bool{false, true} {
		h := newH(t)
		ids, _ := h.stableGroup("g", 1)
		p := h.joinResp(h.join("g", jo{}))
		t1 := h.join("g", jo{member: ids[0]})
		h.notAnswered(t1)
		if batch {
			if r := h.leave("g", lm(p.MemberID)); r.Members[0].ErrorCode != 0 {
				t.Fatal(r.Members[0].ErrorCode)
			}
		} else {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version, req.Group, req.MemberID = 1, "g", p.MemberID
			tk := h.do(func(t Ticket, out *Output) { h.s.LeaveGroup(h.now, t, req, out) })
			h.wantCode(tk, ErrNone)
		}
		h.wantCode(t1, ErrNone)
	}
}

func TestC32_JoinGroupExistingPendingMemberWithGroupInstanceID(t *testing.T) {
	h := newH(t)
	p := h.joinResp(h.join("g", jo{}))
	h.wantCode(h.join("g", jo{member: p.MemberID, instance: "i"}), ErrUnknownServer)
}
