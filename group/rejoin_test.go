package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// soloMember joins a new member (o) into an empty or Empty classic group,
// syncs it alone, and returns its id.
func (h *h) soloMember(group string, o jo) string {
	h.t.Helper()
	var tk Ticket
	if o.instance != "" {
		tk = h.join(group, o) // a static member gets its id at once
	} else {
		tk = h.newMember(group, o)
	}
	r := h.joinResp(tk)
	if r.ErrorCode != 0 {
		h.t.Fatalf("join: %d", r.ErrorCode)
	}
	h.wantCode(h.sync(group, r.MemberID, r.Generation, map[string]string{r.MemberID: "a"}, o.instance), 0)
	return r.MemberID
}

// lastJoinCause is the member_joined cause of group's latest event.
func (h *h) lastJoinCause(group string) Cause {
	h.t.Helper()
	evs := h.s.History(group)
	if len(evs) == 0 || evs[len(evs)-1].Cause.Kind != CauseMemberJoined {
		h.t.Fatalf("the latest event is no join: %+v", evs)
	}
	return evs[len(evs)-1].Cause
}

// TestRejoinLinkedToEviction: a classic member whose session times out
// and the same client (id and host) joining 41 s later with a new member
// id: the join names the member it replaces, why and when it was evicted.
// A join from another client id is not linked, nor one after RejoinWindow;
// a static member is linked by its instance id whatever its client id;
// each eviction links one join only.
func TestRejoinLinkedToEviction(t *testing.T) {
	h := newH(t)
	old := h.soloMember("g", jo{client: "app"})
	h.advance(10 * time.Second) // the 10 s session runs out
	evictedAt := h.now
	h.advance(41 * time.Second)
	h.soloMember("other", jo{client: "app"}) // another group: not linked
	if c := h.lastJoinCause("other"); c.Rejoin != nil {
		t.Fatalf("a join into another group linked: %+v", c.Rejoin)
	}
	h.soloMember("g", jo{client: "other-app"})
	if c := h.lastJoinCause("g"); c.Rejoin != nil {
		t.Fatalf("a join of another client id linked: %+v", c.Rejoin)
	}
	h.newMember("g", jo{client: "app"}) // the group rebalances: the join is the event's cause
	c := h.lastJoinCauseOrWaiting("g")
	want := Rejoin{MemberID: old, Kind: CauseSessionTimeout, At: evictedAt.UTC(), AfterMs: 41000, By: "client"} // served in UTC
	if c.Rejoin == nil || *c.Rejoin != want {
		t.Fatalf("the rejoin: %+v, want %+v", c.Rejoin, want)
	}

	// Static: evicted, then its instance id back from another client id.
	h2 := newH(t)
	sOld := h2.soloMember("s", jo{client: "app", instance: "i-1"})
	h2.advance(10 * time.Second)
	h2.advance(2 * time.Second)
	h2.soloMember("s", jo{client: "renamed", instance: "i-1"})
	if c := h2.lastJoinCause("s"); c.Rejoin == nil || c.Rejoin.MemberID != sOld || c.Rejoin.By != "instance_id" || c.Rejoin.AfterMs != 2000 {
		t.Fatalf("the static rejoin: %+v", c.Rejoin)
	}

	// After the window: not linked.
	h3 := newH(t)
	h3.soloMember("w", jo{client: "app"})
	h3.advance(10 * time.Second)
	h3.advance(RejoinWindow + time.Second)
	h3.soloMember("w", jo{client: "app"})
	if c := h3.lastJoinCause("w"); c.Rejoin != nil {
		t.Fatalf("a join %v after the eviction linked: %+v", RejoinWindow+time.Second, c.Rejoin)
	}
}

// lastJoinCauseOrWaiting is the cause of the rebalance in progress, or of
// the latest event when none is.
func (h *h) lastJoinCauseOrWaiting(group string) Cause {
	h.t.Helper()
	if doc, ok := h.s.HistoryDoc(group, 0, h.now); ok && doc.Waiting != nil && doc.Waiting.Cause != nil {
		return *doc.Waiting.Cause
	}
	return h.lastJoinCause(group)
}

// appJoin joins consumer-protocol member id to "cg" (subscribed to "a")
// from client "app" on host 10.0.0.7.
func (h *h) appJoin(id string) {
	h.t.Helper()
	req := h.cgReq(hb{member: id, names: []string{"a"}, owned: tpset{}})
	tk := h.do(func(t Ticket, out *Output) {
		h.s.ConsumerGroupHeartbeat(h.now, t, Client{ID: "app", Host: "10.0.0.7"}, req, out)
	})
	expectCode(h.t, "join of "+id, h.resp(tk).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, 0)
}

// TestRejoinLinkedToEvictionConsumer: a consumer-protocol member fenced
// for its session and the same client (id and host) joining with a new
// member id 3 s later: the event of its join names the member fenced,
// also when the partition was reloaded in between (the evictions are
// rebuilt from the stored history).
func TestRejoinLinkedToEvictionConsumer(t *testing.T) { testRejoinConsumer(t, false) }

// TestRejoinLinkedAcrossReloadConsumer: as TestRejoinLinkedToEvictionConsumer,
// the partition reloaded between the fence and the join.
func TestRejoinLinkedAcrossReloadConsumer(t *testing.T) { testRejoinConsumer(t, true) }

func testRejoinConsumer(t *testing.T, reload bool) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	h.appJoin("old-member-000001")
	h.advance(h.s.cfg.ConsumerSessionTimeout)
	fencedAt := h.now
	if h.cmember("cg", "old-member-000001") != nil {
		t.Fatal("the member was not fenced")
	}
	if reload {
		h.adopt()
	}
	h.advance(3 * time.Second)
	h.appJoin("new-member-000001")
	evs := h.s.History("cg")
	c := evs[len(evs)-1].Cause
	want := Rejoin{MemberID: "old-member-000001", Kind: CauseSessionTimeout, At: fencedAt, AfterMs: 3000, By: "client"}
	if c.Kind != CauseMemberJoined || !sameRejoin(c.Rejoin, want) {
		t.Fatalf("the join's cause (reloaded: %v) %+v (rejoin %+v), want %+v", reload, c, c.Rejoin, want)
	}
}

// TestRejoinAfterRebalanceTimeout: a classic member that heartbeats but
// does not rejoin within the rebalance timeout (max.poll.interval.ms) is
// evicted; the same client joining afterwards is linked with kind
// rebalance_timeout.
func TestRejoinAfterRebalanceTimeout(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	leader, slow := ids[0], ids[1]
	tk := h.join("g", jo{member: leader}) // a rebalance slow never rejoins
	// slow keeps heartbeating (its poll loop is stuck, not its process)
	// until the rebalance timeout (30 s) evicts it.
	for i := 0; i < 6; i++ {
		h.advance(5 * time.Second)
		h.heartbeat("g", slow, gen)
	}
	if h.s.groups["g"].memberByID(slow) != nil {
		t.Fatal("the slow member was not evicted")
	}
	r := h.joinResp(tk)
	h.wantCode(h.sync("g", leader, r.Generation, map[string]string{leader: "a"}), 0)
	h.advance(time.Second)
	h.newMember("g", jo{})
	c := h.lastJoinCauseOrWaiting("g")
	if c.Rejoin == nil || c.Rejoin.MemberID != slow || c.Rejoin.Kind != CauseRebalanceTimeout || c.Rejoin.AfterMs != 1000 {
		t.Fatalf("the rejoin after a rebalance timeout: %+v", c.Rejoin)
	}
}

// TestRejoinStaticConsumer: a static consumer-protocol member that left for
// a restart (epoch -2) and did not come back within its session is fenced;
// its instance id joining later with a new member id, from another client
// id, is linked by the instance id.
func TestRejoinStaticConsumer(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	inst := "i-1"
	expectCode(t, "join", h.cg(hb{member: "s1", instance: &inst, names: []string{"a"}, owned: tpset{}}).ErrorCode, 0)
	expectCode(t, "leave -2", h.cg(hb{member: "s1", epoch: -2, instance: &inst}).ErrorCode, 0)
	h.advance(h.s.cfg.ConsumerSessionTimeout + time.Second)
	if h.cmember("cg", "s1") != nil {
		t.Fatal("the static member away was not fenced")
	}
	expectCode(t, "rejoin", h.cg(hb{member: "s2", instance: &inst, names: []string{"a"}, owned: tpset{}}).ErrorCode, 0)
	evs := h.s.History("cg")
	c := evs[len(evs)-1].Cause
	if c.Kind != CauseMemberJoined || c.Rejoin == nil || c.Rejoin.MemberID != "s1" || c.Rejoin.By != "instance_id" ||
		c.Rejoin.Kind != CauseSessionTimeout {
		t.Fatalf("the static rejoin: %+v (rejoin %+v)", c, c.Rejoin)
	}
}

// TestRejoinLinkedAcrossReload: the evictions a join links to are rebuilt
// from the stored history when the partition loads (a restart, a failover),
// so a process evicted before the load that comes back after it is still
// linked; an eviction already linked before the load links nothing after
// it, and the window counts from the eviction, not from the load.
func TestRejoinLinkedAcrossReload(t *testing.T) {
	h := newH(t)
	old := h.soloMember("g", jo{client: "app"})
	h.advance(10 * time.Second) // the 10 s session runs out: the group is Empty
	evictedAt := h.now
	h.advance(20 * time.Second)
	h.adopt()
	h.advance(21 * time.Second)
	h.soloMember("g", jo{client: "app"})
	want := Rejoin{MemberID: old, Kind: CauseSessionTimeout, At: evictedAt.UTC(), AfterMs: 41000, By: "client"} // served in UTC
	if c := h.lastJoinCause("g"); !sameRejoin(c.Rejoin, want) {
		t.Fatalf("the rejoin after a reload: %+v, want %+v", c.Rejoin, want)
	}
	// That eviction is linked: after another load, a third process of
	// the same client is not linked to it again.
	h.adopt()
	h.advance(time.Second)
	h.newMember("g", jo{client: "app"})
	if c := h.lastJoinCauseOrWaiting("g"); c.Rejoin != nil {
		t.Fatalf("an eviction linked before the load linked again after it: %+v", c.Rejoin)
	}

	// The window still counts from the eviction.
	h2 := newH(t)
	h2.soloMember("w", jo{client: "app"})
	h2.advance(10 * time.Second)
	h2.adopt()
	h2.advance(RejoinWindow + time.Second)
	h2.soloMember("w", jo{client: "app"})
	if c := h2.lastJoinCause("w"); c.Rejoin != nil {
		t.Fatalf("a join %v after the eviction linked after a reload: %+v", RejoinWindow+time.Second, c.Rejoin)
	}
}

// sameRejoin compares r with want, its time as an instant (a loaded one
// has lost its monotonic reading).
func sameRejoin(r *Rejoin, want Rejoin) bool {
	if r == nil || !r.At.Equal(want.At) {
		return false
	}
	got := *r
	got.At = want.At
	return got == want
}

// TestRejoinAfterMsNeverNegative: an eviction stamped by one coordinator's
// clock and the join by another's that runs behind (a partition moved
// between cluster nodes whose clocks disagree, then reloaded from the
// stored history): the join is still linked, and after_ms is 0, not the
// clocks' difference below zero.
func TestRejoinAfterMsNeverNegative(t *testing.T) {
	h := newH(t)
	old := h.soloMember("g", jo{client: "app"})
	h.advance(10 * time.Second) // the 10 s session runs out
	evictedAt := h.now
	h.adopt()                           // the partition loads elsewhere...
	h.now = h.now.Add(-3 * time.Second) // ...on a node whose clock is 3 s behind
	h.soloMember("g", jo{client: "app"})
	want := Rejoin{MemberID: old, Kind: CauseSessionTimeout, At: evictedAt, AfterMs: 0, By: "client"}
	if c := h.lastJoinCause("g"); !sameRejoin(c.Rejoin, want) {
		t.Fatalf("the rejoin stamped before its eviction: %+v, want %+v", c.Rejoin, want)
	}
}
