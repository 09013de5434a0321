package group

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// storedGroups counts, by group id, the records the harness's store holds
// (every record kind's key starts with its kind and names its group).
func storedGroups(h *h) map[string]int {
	n := map[string]int{}
	for k := range h.store {
		b := []byte(k)
		var g string
		if b[0] == keyGroup {
			g = string(b[1:])
		} else {
			l, w := binary.Uvarint(b[1:])
			g = string(b[1+w : 1+w+int(l)])
		}
		n[g]++
	}
	return n
}

// Groups come and go by the thousand on a long-running node: a group id
// that is gone from the shard must leave nothing behind, in memory or in
// the store. An empty consumer group without offsets is removed when a
// classic JoinGroup reaches it (it turns classic, and a classic group of no
// members and no offsets is nothing); when that JoinGroup names a member id
// it is answered UNKNOWN_MEMBER_ID and no classic group is created, as in
// Kafka. The consumer group's rebalance history stayed behind, in memory
// and in the store, for every such group id.
func TestChurnConvertedGroupRefusedJoinLeavesNothing(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	const n = 20
	for i := range n {
		g := fmt.Sprintf("g%d", i)
		expectCode(t, "cg join", h.cg(hb{group: g, member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
		expectCode(t, "cg leave", h.cg(hb{group: g, member: "m0", epoch: -1}).ErrorCode, ErrNone)
		h.wantCode(h.join(g, jo{member: "stale-classic-id"}), ErrUnknownMemberID)
	}
	if l := h.s.Len(); l != 0 {
		t.Fatalf("%d groups left in the shard after %d were removed", l, n)
	}
	if l := len(h.s.hist); l != 0 {
		t.Errorf("rebalance history kept in memory for %d of %d removed groups", l, n)
	}
	if doc, ok := h.s.HistoryDoc("g0", -1, h.now); ok {
		t.Errorf("removed group still has a history document: state %s, %d events", doc.State, len(doc.History))
	}
	if st := storedGroups(h); len(st) != 0 {
		t.Errorf("records of %d of %d removed groups still stored: %v", len(st), n, st)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// A group that is gone after a load (here a classic group that replaced an
// empty consumer group and was never stored, its member still to send its
// second JoinGroup when the partition moved) leaves its stored rebalance
// history with no group to go with: nothing deleted it, at the next load or
// ever after, so every such group id kept its history records for good.
// The partition's load now tombstones such history (FinishLoad); the test
// checks after a load and an offsets expiry sweep that nothing is left.
func TestChurnHistoryOfGroupGoneAtLoadIsRemoved(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	h.s.cfg.OffsetsRetention = time.Minute
	const n = 20
	for i := range n {
		g := fmt.Sprintf("g%d", i)
		expectCode(t, "cg join", h.cg(hb{group: g, member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
		expectCode(t, "cg leave", h.cg(hb{group: g, member: "m0", epoch: -1}).ErrorCode, ErrNone)
		h.wantCode(h.join(g, jo{}), ErrMemberIDRequired) // turns the group classic, unstored
	}
	var out Output
	h.s.Unload(h.now, &out)
	h.settle(&out)
	h.s = h.reload()
	if l := h.s.Len(); l != 0 {
		t.Fatalf("setup: %d groups loaded, want none", l)
	}
	h.advance(2 * time.Minute)
	h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) })
	if l := len(h.s.hist); l != 0 {
		t.Errorf("rebalance history kept in memory for %d of %d gone groups", l, n)
	}
	if doc, ok := h.s.HistoryDoc("g0", -1, h.now); ok {
		t.Errorf("gone group still has a history document: state %s, %d events", doc.State, len(doc.History))
	}
	if st := storedGroups(h); len(st) != 0 {
		t.Errorf("records of %d of %d gone groups still stored: %v", len(st), n, st)
	}
}

// A consumer group outlives the topics it consumes: a regex subscription to
// per-job topics sees thousands created, assigned, deleted and revoked. The
// group's index of who holds each partition kept a slot array for every
// topic any member had ever held, for as long as the group lived.
func TestChurnOwnerIndexForgetsReleasedTopics(t *testing.T) {
	h, cat := newCH(t, map[string]int32{})
	re := "job-.*"
	reconcile := func(what string, want int) {
		t.Helper()
		for range 10 {
			m := h.cmember("g", "m0")
			r := h.cg(hb{group: "g", member: "m0", epoch: m.epoch, owned: m.assigned.clone()})
			expectCode(t, what, r.ErrorCode, ErrNone)
			if m := h.cmember("g", "m0"); m.assigned.size() == want && m.pending.size() == 0 && m.state == mStable {
				return
			}
		}
		t.Fatalf("%s: the member did not reach %d partitions", what, want)
	}
	expectCode(t, "join", h.cg(hb{group: "g", member: "m0", regex: &re, owned: tpset{}}).ErrorCode, ErrNone)
	const n = 50
	for i := range n {
		topic := fmt.Sprintf("job-%d", i)
		if _, err := cat.Create(topic, 2, nil); err != nil {
			t.Fatal(err)
		}
		reconcile("assign "+topic, 2)
		cat.Delete(topic)
		h.do(func(_ Ticket, out *Output) { h.s.DeleteTopicOffsets([]string{topic}, out) })
		reconcile("revoke "+topic, 0)
	}
	if l := len(h.s.Group("g").cg.owner.dense); l != 0 {
		t.Errorf("the owner index holds %d topics after %d were held, deleted and released; want 0", l, n)
	}
}
