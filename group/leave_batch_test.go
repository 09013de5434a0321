package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A LeaveGroup (v3+) naming several members of a consumer-protocol group
// removes them all and then bumps the group epoch once, in one write, as
// Kafka's GroupMetadataManager does for a classic LeaveGroup reaching a
// consumer group: one record batch with every removed member's tombstones
// and a single epoch record. cohort used to remove each member with its own
// write and its own bump.

// leaveBatch sends a LeaveGroup of version v for group "cg" and returns its
// ticket with the writes its call issued (before any completes).
func (h *h) leaveBatch(v int16, members ...kmsg.LeaveGroupRequestMember) (Ticket, []Write) {
	h.t.Helper()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = v, "cg"
	if v < 3 {
		req.MemberID = members[0].MemberID
	} else {
		req.Members = members
	}
	var writes []Write
	tk := h.do(func(t Ticket, out *Output) {
		h.s.LeaveGroup(h.now, t, req, out)
		writes = append(writes, out.Writes...)
	})
	return tk, writes
}

// countKeys counts the records of w of each kind (the key's first byte),
// tombstones apart.
func countKeys(w Write) (set, del map[byte]int) {
	set, del = map[byte]int{}, map[byte]int{}
	for _, r := range w.Records {
		if r.Value == nil {
			del[r.Key[0]]++
		} else {
			set[r.Key[0]]++
		}
	}
	return set, del
}

func checkLeaveCodes(t *testing.T, r *kmsg.LeaveGroupResponse, top int16, want ...int16) {
	t.Helper()
	expectCode(t, "top-level", r.ErrorCode, top)
	if len(r.Members) != len(want) {
		t.Fatalf("%d member answers, want %d: %+v", len(r.Members), len(want), r.Members)
	}
	for i, w := range want {
		expectCode(t, "leave of "+r.Members[i].MemberID, r.Members[i].ErrorCode, w)
	}
}

// Three members leave in one batch (two by member id, a static one by its
// instance id alone, as the admin client names it): the epoch moves by one,
// the shard issues one write holding the three removals and one epoch
// record, the answer waits for it, and the rebalance history has one event
// for the one bump, naming the three members.
func TestConsumerLeaveBatchOneWriteOneBump(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 8})
	h.cgJoin("m1", "a")
	h.cgJoin("m2", "a")
	h.cg(hb{member: "m3", names: []string{"a"}, owned: tpset{}, instance: strp("i3")})
	h.cgJoin("m4", "a")
	h.cgSettle("m1", "m2", "m3", "m4")
	epoch := h.cgroup("cg").epoch
	n := len(h.s.History("cg"))

	h.hold = true
	tk, writes := h.leaveBatch(5, lm("m1"), lm("", "i3"), lm("m2"))
	h.notAnswered(tk)
	if len(writes) != 1 {
		t.Fatalf("the batch issued %d writes, want 1", len(writes))
	}
	set, del := countKeys(writes[0])
	if set[keyCGroup] != 1 || del[keyCMember] != 3 || del[keyCTarget] != 3 || del[keyCCurrent] != 3 {
		t.Fatalf("the write holds %v records and %v tombstones, want one epoch record and three members' tombstones", set, del)
	}
	h.release()
	r := h.resp(tk).(*kmsg.LeaveGroupResponse)
	checkLeaveCodes(t, r, ErrNone, ErrNone, ErrNone, ErrNone)
	if r.Members[1].MemberID != "" || r.Members[1].InstanceID == nil || *r.Members[1].InstanceID != "i3" {
		t.Fatalf("the answer for the removal by instance id names %q/%v", r.Members[1].MemberID, r.Members[1].InstanceID)
	}

	cg := h.cgroup("cg")
	if cg.epoch != epoch+1 {
		t.Fatalf("group epoch %d after the batch, want %d (one bump)", cg.epoch, epoch+1)
	}
	if len(cg.members) != 1 || cg.members["m4"] == nil {
		t.Fatalf("members after the batch: %v", cg.ids)
	}
	re := h.reload().Group("cg")
	if re == nil || re.cg == nil || re.cg.epoch != epoch+1 || len(re.cg.members) != 1 || re.cg.members["m4"] == nil {
		t.Fatal("the stored group differs from the answered removal")
	}

	h.cgSettle("m4")
	ev := h.events("cg", n+1)[n]
	checkCEvent(t, ev, CauseAdmin, "m1", epoch, epoch+1, "stable")
	if len(ev.MoreCauses) != 2 || ev.MoreCauses[0].MemberID != "m3" || ev.MoreCauses[1].MemberID != "m2" {
		t.Fatalf("more causes %+v, want m3 and m2", ev.MoreCauses)
	}
}

// A batch that removes every member is one event ending empty (cohort
// recorded a superseded event for all but the last removal, then an empty
// one).
func TestConsumerLeaveBatchEmptiesGroupOneEvent(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	h.cgJoin("m2", "a")
	h.cgSettle("m1", "m2")
	epoch := h.cgroup("cg").epoch
	n := len(h.s.History("cg"))
	tk, writes := h.leaveBatch(5, lm("m1"), lm("m2"))
	checkLeaveCodes(t, h.resp(tk).(*kmsg.LeaveGroupResponse), ErrNone, ErrNone, ErrNone)
	if len(writes) != 1 {
		t.Fatalf("the batch issued %d writes, want 1", len(writes))
	}
	cg := h.cgroup("cg")
	if cg.epoch != epoch+1 || len(cg.members) != 0 || cg.state() != "Empty" {
		t.Fatalf("after the batch: epoch %d (was %d), %d members, %s", cg.epoch, epoch, len(cg.members), cg.state())
	}
	ev := h.events("cg", n+1)[n]
	checkCEvent(t, ev, CauseAdmin, "m1", epoch, epoch+1, "empty")
	if len(ev.MoreCauses) != 1 || ev.MoreCauses[0].MemberID != "m2" {
		t.Fatalf("more causes %+v", ev.MoreCauses)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// Unknown and fenced identities in a batch get their own answers (as
// Kafka's: UNKNOWN_MEMBER_ID for an unknown member id or instance id,
// FENCED_INSTANCE_ID for a member id that does not own the instance named
// with it) and change nothing; the known members listed with them are
// removed with one bump. A batch that removes nobody writes nothing and is
// answered at once.
func TestConsumerLeaveBatchUnknownAndKnown(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	h.cg(hb{member: "m2", names: []string{"a"}, owned: tpset{}, instance: strp("i2")})
	h.cgJoin("m3", "a")
	epoch := h.cgroup("cg").epoch

	tk, writes := h.leaveBatch(5, lm("nobody"), lm("m1"), lm("m9", "i2"), lm("", "no-such-instance"), lm("m3"))
	checkLeaveCodes(t, h.resp(tk).(*kmsg.LeaveGroupResponse), ErrNone,
		ErrUnknownMemberID, ErrNone, ErrFencedInstanceID, ErrUnknownMemberID, ErrNone)
	if len(writes) != 1 {
		t.Fatalf("the batch issued %d writes, want 1", len(writes))
	}
	cg := h.cgroup("cg")
	if cg.epoch != epoch+1 {
		t.Fatalf("group epoch %d after the batch, want %d", cg.epoch, epoch+1)
	}
	if len(cg.members) != 1 || cg.members["m2"] == nil {
		t.Fatalf("members after the batch: %v", cg.ids)
	}

	// Nobody removed: no write, no bump, answered at once.
	h.hold = true
	tk, writes = h.leaveBatch(5, lm("nobody"), lm("m9", "i2"))
	checkLeaveCodes(t, h.resp(tk).(*kmsg.LeaveGroupResponse), ErrNone, ErrUnknownMemberID, ErrFencedInstanceID)
	h.release()
	if len(writes) != 0 || h.cgroup("cg").epoch != epoch+1 {
		t.Fatalf("a batch removing nobody: %d writes, epoch %d", len(writes), h.cgroup("cg").epoch)
	}
}

// The batch's one write failing fails every removal in it: the write's
// error at the top level and in each removed member's answer (a member
// refused on its own keeps its own answer), and the reloaded group still
// has every member at the old epoch.
func TestConsumerLeaveBatchFailedWrite(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	h.cgJoin("m2", "a")
	h.cgJoin("m3", "a")
	epoch := h.cgroup("cg").epoch
	done := h.completed

	h.fail = ErrNotCoordinator
	tk, writes := h.leaveBatch(5, lm("m1"), lm("nobody"), lm("m2"))
	h.fail = ErrNone
	checkLeaveCodes(t, h.resp(tk).(*kmsg.LeaveGroupResponse), ErrNotCoordinator,
		ErrNotCoordinator, ErrUnknownMemberID, ErrNotCoordinator)
	if len(writes) != 1 || h.completed-done != 1 {
		t.Fatalf("the batch issued %d writes (%d completed), want 1", len(writes), h.completed-done)
	}
	if !h.s.NeedsReload() {
		t.Fatal("a failed write of applied records did not ask for a reload")
	}
	re := h.reload().Group("cg")
	if re == nil || re.cg == nil || len(re.cg.members) != 3 || re.cg.epoch != epoch {
		t.Fatal("the stored group lost members or moved its epoch although the removal failed")
	}

	// LeaveGroup v0-2 names one member: the top-level error is its answer.
	h, _ = newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	h.fail = ErrNotCoordinator
	tk, _ = h.leaveBatch(2, lm("m1"))
	h.fail = ErrNone
	if r := h.resp(tk).(*kmsg.LeaveGroupResponse); r.ErrorCode != ErrNotCoordinator || len(r.Members) != 0 {
		t.Fatalf("v2 leave whose write failed: %+v", r)
	}
}

// Two consumer-protocol members of a mixed group leave in one batch, leaving
// classic members only: the group turns classic once, at the epoch from
// before the batch, which the classic members last learned (their heartbeat
// at it is told to rejoin). Removing them one by one took the epoch of the
// second removal, after a write and a bump for the first.
func TestConsumerLeaveBatchDowngradesOnce(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 6})
	id1, _, _ := h.mixedStable(t)
	epoch := h.cgroup("cg").epoch
	tk, writes := h.leaveBatch(5, lm("n1"), lm("n2"))
	// The consumer group's records are one write; the classic group's
	// metadata, as at every downgrade, is its own.
	var consumerWrites, epochRecs int
	for _, w := range writes {
		set, del := countKeys(w)
		if del[keyCMember] > 0 {
			consumerWrites++
			epochRecs += set[keyCGroup]
		}
	}
	if consumerWrites != 1 || epochRecs != 1 {
		t.Fatalf("the batch wrote the consumer group's records in %d writes with %d epoch records, want 1 and 1", consumerWrites, epochRecs)
	}
	checkLeaveCodes(t, h.resp(tk).(*kmsg.LeaveGroupResponse), ErrNone, ErrNone, ErrNone)
	g := h.s.Group("cg")
	if g.cg != nil || g.State() != PreparingRebalance || g.generation != epoch || len(g.members) != 2 {
		t.Fatalf("after the batch: consumer %v, state %v, generation %d (epoch before the batch %d), %d members",
			g.cg != nil, g.State(), g.generation, epoch, len(g.members))
	}
	expectCode(t, "classic heartbeat at the epoch it learned", h.heartbeat("cg", id1, epoch), ErrRebalanceInProgress)
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// A member named twice in one batch, or once by member id and once by its
// instance id alone, is answered NONE each time and removed once: Kafka
// looks every identity up in the group as it was before the request (cohort
// answered the second naming UNKNOWN_MEMBER_ID, the member being gone by
// then).
func TestConsumerLeaveBatchSameMemberTwice(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	h.cg(hb{member: "m2", names: []string{"a"}, owned: tpset{}, instance: strp("i2")})
	h.cgJoin("m3", "a")
	h.cgSettle("m1", "m2", "m3")
	epoch := h.cgroup("cg").epoch
	n := len(h.s.History("cg"))

	tk, writes := h.leaveBatch(5, lm("m1"), lm("m1"), lm("m2", "i2"), lm("", "i2"))
	checkLeaveCodes(t, h.resp(tk).(*kmsg.LeaveGroupResponse), ErrNone, ErrNone, ErrNone, ErrNone, ErrNone)
	if len(writes) != 1 {
		t.Fatalf("the batch issued %d writes, want 1", len(writes))
	}
	if _, del := countKeys(writes[0]); del[keyCMember] != 2 {
		t.Fatalf("%d members' tombstones, want 2 (m1 and m2 once each)", del[keyCMember])
	}
	cg := h.cgroup("cg")
	if cg.epoch != epoch+1 || len(cg.members) != 1 || cg.members["m3"] == nil {
		t.Fatalf("after the batch: epoch %d (was %d), members %v", cg.epoch, epoch, cg.ids)
	}
	h.cgSettle("m3")
	if ev := h.events("cg", n+1)[n]; len(ev.MoreCauses) != 1 || ev.MoreCauses[0].MemberID != "m2" {
		t.Fatalf("more causes %+v, want m2 once", ev.MoreCauses)
	}
}
