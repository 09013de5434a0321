package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteHeld sends a DeleteGroups for ids whose write is held and returns
// its ticket.
func (h *h) deleteHeld(ids ...string) Ticket {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = ids
	return h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
}

// groupAfterLoad loads h's store (keys in order, then reversed) and
// describes what it makes of group id: "" when no group.
func groupAfterLoad(t *testing.T, h *h, id string) []string {
	t.Helper()
	var keys []string
	for k := range h.store {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var got []string
	for _, order := range []string{"by key", "reversed"} {
		if order == "reversed" {
			slices.Reverse(keys)
		}
		s, _ := loadInOrder(t, h.s.cfg, h.store, keys, h.now)
		switch g := s.Group(id); {
		case g == nil:
		case g.cg != nil:
			got = append(got, order+": a consumer group")
		default:
			got = append(got, order+": a classic group")
		}
	}
	return got
}

// deleteLosing completes h's held writes in order, failing the first that
// lost says is the conversion's, and checks that the DeleteGroups of
// ticket tk was answered with group id deleted and that the store makes
// no group id at the next load.
func deleteLosing(t *testing.T, h *h, tk Ticket, id string, lost func(Write) bool) {
	t.Helper()
	completeLosing(t, h, false, lost)
	r := h.resp(tk).(*kmsg.DeleteGroupsResponse)
	if len(r.Groups) != 1 || r.Groups[0].ErrorCode != ErrNone {
		t.Fatalf("setup: DeleteGroups answered %+v, want %s deleted", r.Groups, id)
	}
	if got := groupAfterLoad(t, h, id); len(got) > 0 {
		t.Errorf("DeleteGroups answered %s deleted, but the store still makes it: %v", id, got)
	}
}

// completeLosing completes h's held writes in order, failing the first
// that lost says is the conversion's (all: every one it says).
func completeLosing(t *testing.T, h *h, all bool, lost func(Write) bool) {
	t.Helper()
	held := h.held
	h.held, h.hold = nil, false
	failed := false
	for _, w := range held {
		code := ErrNone
		if (!failed || all) && lost(w) {
			failed, code = true, ErrCoordinatorNotAvailable
		}
		h.completeHeld0(w, code)
	}
	if !failed {
		t.Fatal("setup: no conversion write held")
	}
}

// turnedClassicHeld: an empty consumer group g turned classic by a
// JoinGroup that leaves it Empty (MEMBER_ID_REQUIRED), every write held.
func turnedClassicHeld(t *testing.T) *h {
	t.Helper()
	h := emptyConsumerGroupHeld(t)
	if r := h.joinResp(h.join("g", jo{ptype: "connect", protos: protos("range", "x")})); r.ErrorCode != ErrMemberIDRequired {
		t.Fatalf("setup: join %d, want MEMBER_ID_REQUIRED", r.ErrorCode)
	}
	if g := h.s.Group("g"); g == nil || g.cg != nil {
		t.Fatal("setup: the group did not turn classic")
	}
	return h
}

// conversionWrite tells the write that turned the group classic (the
// consumer group's tombstones).
func conversionWrite(w Write) bool {
	return len(w.Records) > 0 && w.Records[0].Key[0] == keyCTMeta && w.Records[0].Value == nil
}

// An empty consumer group turned classic by a JoinGroup (which the join
// leaves Empty: MEMBER_ID_REQUIRED), then deleted by DeleteGroups, with
// the writes held: the conversion's write (the consumer group's
// tombstones) fails, the deletion's is stored and answered. The deletion
// must carry the consumer group's tombstones while the conversion is in
// flight (cgending.go): else the store keeps the consumer group's record,
// and the group a client was told is deleted comes back at the reload the
// failed write asks for.
func TestConversionLostDeletionStillDeletes(t *testing.T) {
	h := turnedClassicHeld(t)
	tk := h.deleteHeld("g")
	deleteLosing(t, h, tk, "g", conversionWrite)
}

// The other way round: a classic group upgraded by a consumer-protocol
// member's join; every member leaves and the empty consumer group is
// deleted, with the writes held. The upgrade's write (the classic record's
// tombstone) fails, the leaves' and the deletion's are stored. The group
// must not come back from the classic record at the reload. (The consumer
// group cannot empty without an epoch bump, whose consumer group record
// carries the classic record's tombstone: this passed before the deletion
// learned to carry the conversion's tombstones too; it guards that path.)
func TestUpgradeLostDeletionStillDeletes(t *testing.T) {
	h := upgradedEmptiedHeld(t)
	tk := h.deleteHeld("cg")
	deleteLosing(t, h, tk, "cg", func(w Write) bool { // the upgrade's write
		return slices.ContainsFunc(w.Records, func(r Record) bool { return r.Key[0] == keyGroup && r.Value == nil })
	})
}
