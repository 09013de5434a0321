package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCostlyRegexAfterLoadKeepsPartitions: a group whose members subscribe
// through a regex matched in the background keeps its partitions when its
// coordinator partition is loaded again (a restart, another cluster node
// taking it over) and the members' heartbeats come before the matching.
// The matches are not stored, so the regex gives nothing until the matching
// is in; the first heartbeat after the load computed a target from that and
// asked the member to revoke all 200 of its partitions, to give them back
// after the matching. A member joining meanwhile waits for the matching too,
// and then only the partitions it gets move.
func TestCostlyRegexAfterLoadKeepsPartitions(t *testing.T) {
	h, cat := newCH(t, serviceTopics())
	regex := costlyRegex(t, h, cat)
	toSet := func(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) tpset {
		s := tpset{}
		for _, tp := range a.Topics {
			ct, _ := cat.LookupID(tp.TopicID)
			s.addAll(ct.Name, tp.Partitions)
		}
		return s
	}
	r := h.cg(hb{member: "m1", regex: &regex, owned: tpset{}}) // matched at once: not held
	r = h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: tpset{}})
	owned := toSet(r.Assignment)
	if owned.size() != 200 {
		t.Fatalf("m1 owns %d partitions, want the 200 of service-00x", owned.size())
	}
	epoch := r.MemberEpoch
	groupEpoch := h.cgroup("cg").epoch

	h.s = h.reload()
	h.holdRegex = true
	for i := range 3 {
		r = h.cg(hb{member: "m1", epoch: epoch, owned: owned})
		if r.ErrorCode != 0 || r.MemberEpoch != epoch {
			t.Fatalf("heartbeat %d after the load: code %d, epoch %d, want 0 and %d", i, r.ErrorCode, r.MemberEpoch, epoch)
		}
		if r.Assignment != nil && toSet(r.Assignment).size() != 200 {
			t.Fatalf("heartbeat %d after the load, before the regex's matching: assigned %d partitions, want the 200 m1 owns",
				i, toSet(r.Assignment).size())
		}
	}
	if m := h.cmember("cg", "m1"); m.pending.size() != 0 || m.assigned.size() != 200 {
		t.Fatalf("m1 after the load: %d assigned, %d pending revocation, want 200 and 0", m.assigned.size(), m.pending.size())
	}
	if len(h.regexJobs) != 1 {
		t.Fatalf("%d regex jobs out, want 1", len(h.regexJobs))
	}
	if e := h.cgroup("cg").epoch; e != groupEpoch {
		t.Fatalf("group epoch %d after the load, want %d: nothing changed", e, groupEpoch)
	}

	// m2 joins with the same regex while the matching is out.
	r2 := h.cg(hb{member: "m2", regex: &regex, owned: tpset{}})
	if r2.ErrorCode != 0 || r2.Assignment == nil || len(r2.Assignment.Topics) != 0 {
		t.Fatalf("m2's join during the matching: code %d, assignment %+v", r2.ErrorCode, r2.Assignment)
	}
	r = h.cg(hb{member: "m1", epoch: epoch, owned: owned})
	if r.ErrorCode != 0 || r.Assignment != nil {
		t.Fatalf("m1 during the matching, after m2's join: code %d, assignment %v", r.ErrorCode, r.Assignment != nil)
	}

	h.resolveRegexes()
	h.holdRegex = false
	r = h.cg(hb{member: "m1", epoch: epoch, owned: owned})
	if r.ErrorCode != 0 || r.Assignment == nil {
		t.Fatalf("m1 after the matching: code %d, no new assignment", r.ErrorCode)
	}
	kept := toSet(r.Assignment)
	if kept.size() != 100 {
		t.Fatalf("m1 keeps %d partitions once m2 is in, want 100", kept.size())
	}
	r2 = h.cg(hb{member: "m2", epoch: r2.MemberEpoch, owned: tpset{}})
	h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: kept})
	r2 = h.cg(hb{member: "m2", epoch: r2.MemberEpoch, owned: tpset{}})
	if r2.Assignment == nil || toSet(r2.Assignment).size() != 100 {
		t.Fatalf("m2 after m1's revocation: %v", r2.Assignment)
	}
	h.checkNoDoubleOwner("cg")
}
