package group

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// expireLosing runs the retention check (ExpireOffsets) past the offsets
// retention while h's writes are held, checks that it removed group id,
// then completes the held writes in order, failing the first that lost says
// is the conversion's (all: every one it says), and checks that the store makes no group id at the
// next load: nobody was told anything, so a group that retention removed
// must stay removed, whatever became of the conversion.
func expireLosing(t *testing.T, h *h, id string, all bool, lost func(Write) bool) {
	t.Helper()
	later := h.now.Add(h.s.cfg.OffsetsRetention + time.Minute)
	h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(later, out) })
	if g := h.s.Group(id); g != nil && g.state != Dead {
		t.Fatalf("setup: retention did not remove %s (state %v)", id, g.state)
	}
	completeLosing(t, h, all, lost)
	if got := groupAfterLoad(t, h, id); len(got) > 0 {
		t.Errorf("retention removed %s, but the store still makes it: %v", id, got)
	}
}

// An empty consumer group turned classic by a JoinGroup that leaves it
// Empty (MEMBER_ID_REQUIRED); retention then removes the empty group, with
// the writes held. The conversion's write (the consumer group's
// tombstones) fails, retention's is stored: it must carry the consumer
// group's tombstones too, as DeleteGroups does
// (TestConversionLostDeletionStillDeletes), or the consumer group comes
// back at the reload the failed write asks for.
func TestConversionLostRetentionStillRemoves(t *testing.T) {
	expireLosing(t, turnedClassicHeld(t), "g", false, conversionWrite)
}

// The other way round: a classic group upgraded by a consumer-protocol
// member's join; every member leaves and retention removes the empty
// consumer group, with the writes held. Every write but retention's fails
// (the store refused writes for a while): the classic group must not come
// back at the reload from the record the upgrade's write did not delete.
func TestUpgradeLostRetentionStillRemoves(t *testing.T) {
	h := upgradedEmptiedHeld(t)
	// Every write but retention's fails: the upgrade's, and the leaves'
	// (whose consumer group record carried the classic record's tombstone
	// too). Retention's write alone must still remove both records.
	expireLosing(t, h, "cg", true, storesARecord)
}

// storesARecord tells a write that stores a group's record (the upgrade's,
// the leaves' epoch bumps), not only tombstones and offsets.
func storesARecord(w Write) bool {
	return slices.ContainsFunc(w.Records, func(r Record) bool { return r.Key[0] != keyOffset && r.Value != nil })
}

// The same with DeleteGroups instead of retention: every write but the
// deletion's fails. The deletion, answered, must remove the classic record
// too (TestUpgradeLostDeletionStillDeletes fails only the upgrade's write,
// whose classic tombstone the leaves' writes carry as well).
func TestUpgradeLostDeletionAloneStillDeletes(t *testing.T) {
	h := upgradedEmptiedHeld(t)
	tk := h.deleteHeld("cg")
	completeLosing(t, h, true, storesARecord)
	r := h.resp(tk).(*kmsg.DeleteGroupsResponse)
	if len(r.Groups) != 1 || r.Groups[0].ErrorCode != ErrNone {
		t.Fatalf("setup: DeleteGroups answered %+v, want cg deleted", r.Groups)
	}
	if got := groupAfterLoad(t, h, "cg"); len(got) > 0 {
		t.Errorf("DeleteGroups answered cg deleted, but the store still makes it: %v", got)
	}
}

// upgradedEmptiedHeld: the classic group cg, upgraded by a consumer-protocol
// member's join, then emptied (its classic members leave, the new member
// leaves), every write held.
func upgradedEmptiedHeld(t *testing.T) *h {
	t.Helper()
	h, _ := newCH(t, map[string]int32{"a": 6})
	h.classicStable()
	g := h.s.Group("cg")
	ids := make([]kmsg.LeaveGroupRequestMember, 0, len(g.members))
	for _, m := range g.members {
		ids = append(ids, lm(m.id))
	}
	h.hold = true
	h.cgSend(hb{member: "n1", names: []string{"a"}, owned: tpset{}}) // upgrades the group
	if g := h.s.Group("cg"); g == nil || g.cg == nil {
		t.Fatal("setup: the group was not upgraded")
	}
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Version, lreq.Group, lreq.Members = 5, "cg", ids
	h.do(func(t Ticket, out *Output) { h.s.LeaveGroup(h.now, t, lreq, out) }) // answered once durable
	h.cgSend(hb{member: "n1", epoch: -1})
	if g := h.s.Group("cg"); g == nil || !g.empty() {
		t.Fatal("setup: the group is not empty")
	}
	return h
}
