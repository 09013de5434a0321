package group

import (
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
