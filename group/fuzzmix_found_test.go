package group

import (
	"fmt"
	"testing"
	"time"
)

// Found by FuzzMixedGroups. A consumer group with rebalance history, emptied
// and turned classic by a JoinGroup (MEMBER_ID_REQUIRED), is a classic group
// never stored; offset expiry removes it with only its history tombstones.
// Those replayed while the group was still in the shard (Dead), so the
// emptied history stayed: DescribeGroups with the history tag still answered
// a document for the removed group, which a reloaded shard does not know,
// and the entry was never freed.
func TestMixExpiredConvertedGroupLeavesNoHistory(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	h.s.cfg.OffsetsRetention = time.Minute
	expectCode(t, "cg join", h.cg(hb{group: "g", member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	expectCode(t, "cg leave", h.cg(hb{group: "g", member: "m0", epoch: -1}).ErrorCode, ErrNone)
	h.wantCode(h.join("g", jo{}), ErrMemberIDRequired) // turns the empty group classic
	if g := h.s.Group("g"); g == nil || g.cg != nil {
		t.Fatal("setup: the group did not turn classic")
	}
	h.advance(2 * time.Minute)
	h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) })
	if g := h.s.Group("g"); g != nil {
		t.Fatalf("group still there: %v", g.state)
	}
	if doc, ok := h.s.HistoryDoc("g", -1, h.now); ok {
		t.Fatalf("removed group still has a history document: state %s, %d events", doc.State, len(doc.History))
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// Found by FuzzMixedGroups. An empty classic group replaced by a consumer
// group (its offsets keep the group in the shard) kept its classic
// generation, protocol and leader; when a classic JoinGroup later turned
// the emptied consumer group classic again, its first rebalance continued
// the old generation. Kafka deletes the classic group and creates a new one
// at generation 0 each way, and a shard loaded from the store (which holds
// the classic record's tombstone) starts at generation 0 too.
func TestMixReplacedClassicGroupStartsAtGenerationZero(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1})
	ids, gen := h.stableGroup("g", 1)
	if c := commitCodes(h.commitReq(commitReq("g", ids[0], gen))); c[0] != ErrNone {
		t.Fatalf("commit: %v", c)
	}
	h.leave("g", lm(ids[0]))
	if g := h.s.Group("g"); g.state != Empty || g.generation != 2 {
		t.Fatalf("setup: %v generation %d", g.state, g.generation)
	}
	expectCode(t, "cg join", h.cg(hb{group: "g", member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	expectCode(t, "cg leave", h.cg(hb{group: "g", member: "m0", epoch: -1}).ErrorCode, ErrNone)
	gens := map[string]int32{}
	for _, which := range []string{"live", "reloaded"} {
		if which == "reloaded" {
			h.s = h.reload()
		}
		jr := h.joinResp(h.newMember("g", jo{}))
		expectCode(t, which+" classic join", jr.ErrorCode, ErrNone)
		gens[which] = jr.Generation
		h.leave("g", lm(jr.MemberID))
		if which == "live" {
			// back to the state before the join, for the reloaded run
			expectCode(t, "cg join", h.cg(hb{group: "g", member: "m1", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
			expectCode(t, "cg leave", h.cg(hb{group: "g", member: "m1", epoch: -1}).ErrorCode, ErrNone)
		}
	}
	if gens["live"] != 1 || gens["reloaded"] != 1 {
		t.Fatalf("first generation of the new classic group: live %d, reloaded %d; want 1 (a new group)", gens["live"], gens["reloaded"])
	}
}

// Found by FuzzMixedGroups (its history check). A classic JoinGroup
// removes an empty consumer group that holds no offsets, as Kafka deletes
// it, but its rebalance history stayed, in memory and in the store. A join
// naming a member id is then refused UNKNOWN_MEMBER_ID and makes no group:
// DescribeGroups with the history tag answered a document (state Dead, with
// its events) for a group ListGroups does not list, live and after a
// reload, never freed. A join without one makes a new classic group, which
// is not stored before its first generation: a reload dropped the group
// and kept its history, the same orphan. The history now goes with the
// consumer group, as a deleted or expired group's does.
func TestMixConvertedGroupWithoutOffsetsDropsHistory(t *testing.T) {
	for _, member := range []string{"gone-member", ""} {
		t.Run(fmt.Sprintf("member %q", member), func(t *testing.T) {
			h, _ := newCH(t, map[string]int32{"a": 2})
			expectCode(t, "cg join", h.cg(hb{group: "g", member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
			expectCode(t, "cg leave", h.cg(hb{group: "g", member: "m0", epoch: -1}).ErrorCode, ErrNone)
			if n := len(h.s.History("g")); n == 0 {
				t.Fatal("setup: no history")
			}
			want := ErrUnknownMemberID
			if member == "" {
				want = ErrMemberIDRequired
			}
			h.wantCode(h.join("g", jo{member: member}), want)
			if g := h.s.Group("g"); member != "" && g != nil || member == "" && (g == nil || g.cg != nil) {
				t.Fatalf("setup: group %+v after the join", g)
			}
			for _, which := range []string{"live", "reloaded"} {
				if which == "reloaded" {
					h.s = h.reload()
				}
				if evs := h.s.History("g"); len(evs) > 0 {
					t.Fatalf("%s: the consumer group is gone but %d events of its history are kept (first: %s)", which, len(evs), evs[0].Cause.Kind)
				}
			}
		})
	}
}

// Found by FuzzMixedGroups (its history check). A classic group that is not
// stored (cohort writes a classic group at its first generation's end) but
// holds rebalance history, here an emptied consumer group with offsets
// turned classic by a JoinGroup and then losing its offsets to a topic
// deletion: a shard loaded from the store has no such group, but loaded its
// history, which stayed for good (a history record never makes a group
// exist, and nothing removes a history without a group): DescribeGroups
// with the history tag answered it, and a later group of that id took the
// old events as its own. The load now deletes the history of a group it
// did not find.
func TestLoadDropsHistoryOfMissingGroup(t *testing.T) {
	h, cat := newCH(t, map[string]int32{"a": 2, "b": 1})
	expectCode(t, "cg join", h.cg(hb{group: "g", member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	expectCode(t, "cg leave", h.cg(hb{group: "g", member: "m0", epoch: -1}).ErrorCode, ErrNone)
	req := commitReq("g", "", -1)
	req.Topics[0].Topic = "b"
	if c := commitCodes(h.commitReq(req)); c[0] != ErrNone {
		t.Fatalf("commit: %v", c)
	}
	h.wantCode(h.join("g", jo{}), ErrMemberIDRequired) // turns the group classic; its offsets keep it
	cat.Delete("b")
	h.do(func(_ Ticket, out *Output) { h.s.DeleteTopicOffsets([]string{"b"}, out) })
	if n := len(h.s.History("g")); n == 0 {
		t.Fatal("setup: no history")
	}
	h.adopt()
	if g := h.s.Group("g"); g != nil {
		t.Fatalf("setup: the loaded shard has the group (%v)", g.state)
	}
	if doc, ok := h.s.HistoryDoc("g", -1, h.now); ok {
		t.Fatalf("loaded shard: a group it does not have has a history document: state %s, %d events", doc.State, len(doc.History))
	}
	h.adopt()
	if evs := h.s.History("g"); len(evs) > 0 {
		t.Fatalf("loaded again: %d events of a group that does not exist", len(evs))
	}
}
