package group

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

// Consumer-group behaviours checked against Kafka's group coordinator in an
// audit (2026-12-03). Each test states Kafka's rule; a test whose comment
// says what cohort did before shows a behaviour that was wrong, the others
// hold rules that were right but that no test held (a mutation of each
// passed every test).

func strp(s string) *string { return &s }

// classicJoin joins a classic member into consumer group "cg" (with the
// KIP-394 round trip when dynamic) and returns its id and generation.
func (h *h) classicJoin(instance string, owned tpset, topics ...string) (string, int32) {
	h.t.Helper()
	meta := string(subscription(owned, topics...))
	o := jo{client: "c", instance: instance, protos: protos("range", meta)}
	var jr *kmsg.JoinGroupResponse
	if instance == "" {
		jr = h.joinResp(h.newMember("cg", o))
	} else {
		jr = h.joinResp(h.join("cg", o))
	}
	expectCode(h.t, "classic join", jr.ErrorCode, ErrNone)
	return jr.MemberID, jr.Generation
}

// A consumer-protocol static member joining with an instance id held by an
// active classic member replaces it: the rolling upgrade of static members.
// Kafka refuses the id as unreleased only when both use the consumer
// protocol.
func TestConsumerStaticMemberReplacesClassicStaticMember(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	expectCode(t, "n1 join", h.cgJoin("n1", "a").ErrorCode, ErrNone)
	cid, _ := h.classicJoin("i1", tpset{}, "a")
	if m := h.cmember("cg", cid); m == nil || m.classic == nil {
		t.Fatal("setup: classic static member missing")
	}
	r := h.cg(hb{member: "n2", instance: strp("i1"), names: []string{"a"}, owned: tpset{}})
	expectCode(t, "consumer static join over classic owner", r.ErrorCode, ErrNone)
}

// A classic member of a consumer group is told to rejoin when its epoch is
// below the group epoch, as in Kafka. (cohort compared it with the assignment
// epoch: after a removal, which bumps only the group epoch, a group of only
// classic members never recomputed its target and stayed Assigning.)
func TestClassicMemberRejoinsWhenGroupEpochMoves(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.ConsumerMigrationPolicy = MigrationUpgrade })
	r := h.cgJoin("n1", "a")
	cid, _ := h.classicJoin("", tpset{}, "a")
	// n1 revokes half, c1 rejoins to collect.
	h.cg(hb{member: "n1", epoch: r.MemberEpoch, owned: set("a", 0, 1, 2, 3)})
	n1 := h.cmember("cg", "n1")
	h.cg(hb{member: "n1", epoch: n1.epoch, owned: n1.assigned.clone()})
	got, _ := h.classicRejoin(cid, "c", tpset{})
	if got.size() != 2 {
		t.Fatalf("setup: c1 got %v", got)
	}
	n1 = h.cmember("cg", "n1")
	h.cg(hb{member: "n1", epoch: n1.epoch, owned: n1.assigned.clone()})
	cg := h.cgroup("cg")
	if cg.state() != "Stable" {
		t.Fatalf("setup: state %s", cg.state())
	}
	h.cg(hb{member: "n1", epoch: -1})
	c1 := h.cmember("cg", cid)
	expectCode(t, "classic heartbeat with group epoch > member epoch", h.heartbeat("cg", cid, c1.epoch), ErrRebalanceInProgress)
	// The rejoin computes the target: c1 gets what n1 left.
	if got, _ := h.classicRejoin(cid, "c", c1.assigned.clone()); got.size() != 4 || h.cgroup("cg").state() != "Stable" {
		t.Fatalf("after the rejoin: c1 owns %v, group %s", got, h.cgroup("cg").state())
	}
}

// A classic member waiting for partitions another member still holds is told
// to rejoin only when none of them is held any more (cohort told it as soon
// as one was free: a JoinGroup and SyncGroup per released partition).
func TestClassicMemberRejoinsWhenAllAwaitedPartitionsFree(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 6})
	r1 := h.cgJoin("n1", "a")
	h.cg(hb{member: "n1", epoch: r1.MemberEpoch, owned: set("a", 0, 1, 2, 3, 4, 5)})
	r2 := h.cgJoin("n2", "a")
	// settle n1/n2 at 3+3
	for i := 0; i < 4; i++ {
		for _, id := range []string{"n1", "n2"} {
			m := h.cmember("cg", id)
			h.cg(hb{member: id, epoch: m.epoch, owned: m.assigned.clone()})
		}
	}
	_ = r2
	if h.cgroup("cg").state() != "Stable" {
		t.Fatalf("setup: %s", h.cgroup("cg").state())
	}
	cid, gen := h.classicJoin("", tpset{}, "a")
	c1 := h.cmember("cg", cid)
	if c1.state != mUnreleased {
		t.Fatalf("setup: c1 state %v", c1.state)
	}
	// n1 and n2 learn what to revoke (still listing everything).
	for _, id := range []string{"n1", "n2"} {
		m := h.cmember("cg", id)
		h.cg(hb{member: id, epoch: m.epoch, owned: m.assigned.union(m.pending)})
	}
	// n1 revokes; n2 does not yet.
	m := h.cmember("cg", "n1")
	h.cg(hb{member: "n1", epoch: m.epoch, owned: m.assigned.clone()})
	expectCode(t, "classic heartbeat while one awaited partition is still held", h.heartbeat("cg", cid, gen), ErrNone)
	m = h.cmember("cg", "n2") // n2 releases the last one
	h.cg(hb{member: "n2", epoch: m.epoch, owned: m.assigned.clone()})
	expectCode(t, "classic heartbeat once every awaited partition is free", h.heartbeat("cg", cid, gen), ErrRebalanceInProgress)
}

// A SubscribedTopicRegex that is not a valid regular expression on its own
// is refused with INVALID_REGULAR_EXPRESSION. (cohort parsed it only wrapped
// in ^(?:…)$, where a fragment like "f)|(x" parses and matches "starts with f
// or ends with x".)
func TestRegexMustParseUnwrapped(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1, "xb": 1, "foo1": 1})
	r := h.cg(hb{member: "m1", regex: strp("f)|(x"), owned: tpset{}})
	if r.ErrorCode == ErrNone {
		t.Logf("accepted; member topics %v", h.cgroup("cg").memberTopics(h.cmember("cg", "m1"), h.s.cfg.Topics))
	}
	expectCode(t, "regex f)|(x", r.ErrorCode, ErrInvalidRegularExpression)
}

// OffsetFetch v9 from a classic member of a consumer group with the wrong
// generation is ILLEGAL_GENERATION (a consumer-protocol member's is
// STALE_MEMBER_EPOCH).
func TestClassicMemberFetchWrongGenerationIsIllegalGeneration(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	h.cgJoin("n1", "a")
	cid, gen := h.classicJoin("", tpset{}, "a")
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberID, g.MemberEpoch = "cg", &cid, gen+7
	req.Groups = append(req.Groups, g)
	expectCode(t, "classic member fetch, wrong generation", h.s.OffsetFetch(req).Groups[0].ErrorCode, ErrIllegalGeneration)
}

// FENCED_MEMBER_EPOCH for an epoch above the member's says "greater", with
// both epochs, in Kafka's words.
func TestFencedMemberEpochMessage(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	r := h.cgJoin("m1", "a")
	f := h.cg(hb{member: "m1", epoch: r.MemberEpoch + 5})
	expectCode(t, "higher epoch", f.ErrorCode, ErrFencedMemberEpoch)
	if f.ErrorMessage == nil || !strings.Contains(*f.ErrorMessage, "greater") {
		t.Fatalf("message %q", *f.ErrorMessage)
	}
}

// A heartbeat whose assigned partitions do not change gets no Assignment,
// even if the member's epoch advances.
func TestAssignmentOnlyWhenPartitionsChange(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2, "b": 2})
	r := h.cgJoin("m1", "a")
	h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: set("a", 0, 1)})
	h.cgJoin("m2", "b") // bumps the group epoch; m1's target is unchanged
	before := h.cmember("cg", "m1").assigned.clone()
	k := h.cg(hb{member: "m1", epoch: r.MemberEpoch})
	if k.MemberEpoch == r.MemberEpoch {
		t.Fatal("setup: epoch did not advance")
	}
	if !h.cmember("cg", "m1").assigned.equal(before) {
		t.Fatal("setup: partitions changed")
	}
	if k.Assignment != nil {
		t.Fatalf("epoch %d -> %d with unchanged partitions: answer carries Assignment %+v", r.MemberEpoch, k.MemberEpoch, k.Assignment)
	}
}

// A blank (whitespace-only) InstanceId or RackId is INVALID_REQUEST, as an
// empty one.
func TestBlankInstanceAndRackRefused(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	expectCode(t, "InstanceId \" \"", h.cg(hb{member: "m1", instance: strp(" "), names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrInvalidRequest)
	expectCode(t, "RackId \" \"", h.cg(hb{member: "m2", rack: strp(" "), names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrInvalidRequest)
}

// The heartbeat's checks run in Kafka's order (the member id before the
// group id) with its messages.
func TestHeartbeatValidationOrderAndMessages(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	r := h.cg(hb{group: " ", member: "", names: []string{"a"}, owned: tpset{}})
	if r.ErrorCode != ErrInvalidRequest || *r.ErrorMessage != "MemberId can't be empty." {
		t.Errorf("blank group and member: %d %q", r.ErrorCode, *r.ErrorMessage)
	}
	r = h.cg(hb{member: "m", owned: tpset{}})
	want := "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
	if r.ErrorCode != ErrInvalidRequest || *r.ErrorMessage != want {
		t.Errorf("join without subscription: %d %q, want %q", r.ErrorCode, *r.ErrorMessage, want)
	}
}

// A classic member of a consumer group committing with the wrong generation
// is ILLEGAL_GENERATION, at OffsetCommit v9 as at older versions.
func TestClassicMemberCommitWrongGenerationIsIllegalGeneration(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	h.cgJoin("n1", "a")
	cid, gen := h.classicJoin("", tpset{}, "a")
	for _, v := range []int16{7, 9} {
		if codes := commitCodes(h.commit("cg", cid, gen+7, v, map[string]int64{"a": 1})); len(codes) != 1 || codes[0] != ErrIllegalGeneration {
			t.Errorf("OffsetCommit v%d with a wrong generation: %v", v, codes)
		}
		if codes := commitCodes(h.commit("cg", cid, gen, v, map[string]int64{"a": 1})); len(codes) != 1 || codes[0] != ErrNone {
			t.Errorf("OffsetCommit v%d with its generation: %v", v, codes)
		}
	}
}

// Rules the audit found no test for (a mutation of each passed every test).

// A retry at the member's previous epoch is accepted only if every partition
// it says it owns is still assigned to it (C14/C15): otherwise it is fenced.
func TestPreviousEpochRetryNeedsOwnedWithinAssigned(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2, "b": 2})
	r := h.cgJoin("m1", "a")
	h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: set("a", 0, 1)})
	h.cgJoin("m2", "b") // a new group epoch; m1's partitions stay
	k := h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: set("a", 0, 1)})
	if k.MemberEpoch <= r.MemberEpoch {
		t.Fatal("setup: m1's epoch did not advance")
	}
	prev := r.MemberEpoch
	expectCode(t, "retry at the previous epoch, owned within assigned",
		h.cg(hb{member: "m1", epoch: prev, owned: set("a", 0)}).ErrorCode, ErrNone)
	owned := set("a", 0, 1)
	owned.add("b", 0)
	expectCode(t, "retry at the previous epoch, owning a partition not assigned",
		h.cg(hb{member: "m1", epoch: prev, owned: owned}).ErrorCode, ErrFencedMemberEpoch)
	// A topic id no topic has (a deleted topic, say) is not assigned
	// either: Kafka fences that retry too.
	ghost := set("a", 0)
	ghost.add("ghost", 0)
	expectCode(t, "retry at the previous epoch, owning a partition of an unknown topic",
		h.cg(hb{member: "m1", epoch: prev, owned: ghost}).ErrorCode, ErrFencedMemberEpoch)
	expectCode(t, "retry at the previous epoch, owned within assigned, after fenced retries",
		h.cg(hb{member: "m1", epoch: prev, owned: set("a", 1)}).ErrorCode, ErrNone)
}

// A member changing its preferred server assignor bumps the group epoch.
func TestAssignorChangeBumpsGroupEpoch(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	r := h.cgJoin("m1", "a")
	before := h.cgroup("cg").epoch
	rng := "range"
	h.cg(hb{member: "m1", epoch: r.MemberEpoch, assignor: &rng, owned: assigned(r)})
	if cg := h.cgroup("cg"); cg.epoch != before+1 || cg.preferredAssignor(h.s.cfg.ConsumerAssignors) != "range" {
		t.Fatalf("after asking for range: epoch %d (was %d), preferred %s", cg.epoch, before, cg.preferredAssignor(h.s.cfg.ConsumerAssignors))
	}
}

// A new member whose ServerAssignor vote changes the group's assignor bumps
// the group epoch even when it subscribes to nothing: Kafka compares the
// group's preferred assignor before and after any member's update, new
// members included (KAFKA-20434), so the target is recomputed with the
// assignor ConsumerGroupDescribe names. cohort bumped for a new member only
// when it brought a subscription, and the target stayed the old assignor's.
func TestNewMemberAssignorVoteBumpsGroupEpoch(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	before := h.cgroup("cg").epoch
	rng := "range"
	expectCode(t, "m2 joins without a subscription, voting range",
		h.cg(hb{member: "m2", names: []string{}, owned: tpset{}, assignor: &rng}).ErrorCode, ErrNone)
	cg := h.cgroup("cg")
	if a := cg.preferredAssignor(h.s.cfg.ConsumerAssignors); a != "range" {
		t.Fatalf("preferred assignor %s, want range", a)
	}
	if cg.epoch != before+1 || cg.assignEpoch != cg.epoch {
		t.Fatalf("group epoch %d (was %d), target epoch %d: want one bump and a target computed with range", cg.epoch, before, cg.assignEpoch)
	}

	// A new member whose vote leaves the group's assignor as it is, and
	// that subscribes to nothing, does not bump.
	before = cg.epoch
	h.cg(hb{member: "m3", names: []string{}, owned: tpset{}, assignor: &rng})
	if cg := h.cgroup("cg"); cg.epoch != before {
		t.Fatalf("group epoch %d after a join that changes nothing, was %d", cg.epoch, before)
	}
}

// A leave (−1) or temporary leave (−2) naming an instance id another member
// holds is FENCED_INSTANCE_ID, and changes nothing.
func TestLeaveWithAnotherMembersInstanceIsFenced(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	i1 := "i1"
	expectCode(t, "static join", h.cg(hb{member: "m1", instance: &i1, names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	for _, epoch := range []int32{-1, -2} {
		expectCode(t, fmt.Sprintf("leave at %d with m1's instance", epoch),
			h.cg(hb{member: "intruder", epoch: epoch, instance: &i1}).ErrorCode, ErrFencedInstanceID)
	}
	if m := h.cmember("cg", "m1"); m == nil || m.epoch <= 0 {
		t.Fatal("m1 was removed or left by another member's request")
	}
}

// ConsumerGroupDescribe leaves out of a member's assignment the topics that
// no longer exist.
func TestDescribeOmitsDeletedTopics(t *testing.T) {
	h, cat := newCH(t, map[string]int32{"a": 2, "b": 2})
	r := h.cgJoin("m1", "a", "b")
	h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: assigned(r)})
	if err := cat.Delete("b"); err != nil {
		t.Fatal(err)
	}
	d := h.s.DescribeConsumerGroup("cg", 1, false)
	for _, tp := range d.Members[0].Assignment.TopicPartitions {
		if tp.Topic == "b" || tp.TopicID == catalog.TopicID("b") {
			t.Fatalf("deleted topic b described: %+v", d.Members[0].Assignment)
		}
	}
	if len(d.Members[0].Assignment.TopicPartitions) != 1 {
		t.Fatalf("assignment %+v, want topic a only", d.Members[0].Assignment)
	}
}

// C28 at the same epoch: with target computations batched (the default), a
// member that drops a topic from its subscription before the next target is
// computed revokes that topic's partitions at once, at its current epoch.
func TestUnsubscribeRevokesAtTheSameEpochWhileTheTargetWaits(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2, "b": 2}, func(c *Config) {
		c.ConsumerAssignmentInterval, c.ConsumerAssignmentDelayPerMember = time.Second, time.Second
	})
	r := h.cgJoin("m1", "a", "b")
	r = h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: assigned(r)})
	epoch := r.MemberEpoch
	k := h.cg(hb{member: "m1", epoch: epoch, names: []string{"a"}, owned: set("a", 0, 1).union(set("b", 0, 1))})
	cg, m := h.cgroup("cg"), h.cmember("cg", "m1")
	if cg.assignEpoch >= cg.epoch {
		t.Fatal("setup: the target was computed at once; the test needs it deferred")
	}
	if k.MemberEpoch != epoch || !m.pending.equal(set("b", 0, 1)) || !m.assigned.equal(set("a", 0, 1)) {
		t.Fatalf("after unsubscribing b: epoch %d (was %d), assigned %v, pending %v", k.MemberEpoch, epoch, m.assigned, m.pending)
	}
	if got := assigned(k); !got.equal(set("a", 0, 1)) {
		t.Fatalf("the answer gives %v, want a/0,1 (b to revoke)", got)
	}
}

// A classic static member taking the place of the last consumer-protocol
// member (a rolling downgrade of static consumers) turns the group classic,
// as Kafka does; its JoinGroup joins the classic group's rebalance, which
// completes once the other classic members rejoin. (The group stayed a
// consumer group of only classic members.)
func TestClassicStaticReplacementOfLastConsumerMemberDowngrades(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	i1 := "i1"
	expectCode(t, "n1", h.cg(hb{member: "n1", instance: &i1, names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	cid, gen := h.classicJoin("", tpset{}, "a")
	meta := string(subscription(tpset{}, "a"))
	tk := h.join("cg", jo{client: "c2", instance: "i1", protos: protos("range", meta)})
	g := h.s.Group("cg")
	if g.cg != nil || g.State() != PreparingRebalance {
		t.Fatalf("after the replacement: consumer group %v, state %v; want a classic group rebalancing", g.cg != nil, g.State())
	}
	h.notAnswered(tk) // it waits for the rebalance
	expectCode(t, "the other classic member's heartbeat", h.heartbeat("cg", cid, gen), ErrRebalanceInProgress)
	tc := h.join("cg", jo{member: cid, client: "c", protos: protos("range", meta)})
	for i := 0; i < 100 && !(h.answered(tk) && h.answered(tc)); i++ {
		h.advance(100 * time.Millisecond)
	}
	r1, r2 := h.joinResp(tk), h.joinResp(tc)
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r1.Generation != r2.Generation || r1.LeaderID == "" {
		t.Fatalf("joins: %d gen %d, %d gen %d, leader %q", r1.ErrorCode, r1.Generation, r2.ErrorCode, r2.Generation, r1.LeaderID)
	}
	h.syncAll("cg", r1.LeaderID, []string{r1.MemberID, r2.MemberID}, r1.Generation)
	if re := h.reload(); re.Group("cg") == nil || re.Group("cg").cg != nil || re.Group("cg").State() != Stable {
		t.Fatal("the stored group is not the classic one")
	}
}

// A classic static member taking the place of a consumer-protocol static
// member (other consumer members remaining) gets a fresh member id, as a
// classic group's replacement does. (It got the empty id it joined with: a
// member "" in the group.)
func TestClassicStaticReplacementGetsAMemberID(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	i1 := "i1"
	h.cg(hb{member: "n1", instance: &i1, names: []string{"a"}, owned: tpset{}})
	h.cgJoin("n2", "a")
	meta := string(subscription(tpset{}, "a"))
	r := h.joinResp(h.join("cg", jo{client: "c2", instance: "i1", protos: protos("range", meta)}))
	cg := h.cgroup("cg")
	if r.ErrorCode != 0 || !strings.HasPrefix(r.MemberID, "i1-") || cg.static["i1"] != r.MemberID || cg.members[""] != nil {
		t.Fatalf("replacement: code %d, member id %q, instance held by %q", r.ErrorCode, r.MemberID, cg.static["i1"])
	}
	if r := h.syncResp(h.sync("cg", r.MemberID, r.Generation, nil, "i1")); r.ErrorCode != 0 {
		t.Fatalf("its SyncGroup: %d", r.ErrorCode)
	}
}

// A ConsumerGroupHeartbeat v0 join sends no member id and the coordinator
// names the member; Kafka does so before it looks the member up, so a v0
// join that takes over a static member's place (the old one left with −2)
// gets a fresh id too. cohort named only brand-new members: the replacement
// was answered the empty id, and every later heartbeat with it was
// INVALID_REQUEST.
func TestV0StaticReplacementGetsAMemberID(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	i1 := "i1"
	r := h.cg(hb{member: "", v0: true, instance: &i1, names: []string{"a"}, owned: tpset{}})
	old := *r.MemberID
	expectCode(t, "first incarnation's −2 leave", h.cg(hb{member: old, v0: true, instance: &i1, epoch: -2}).ErrorCode, ErrNone)

	r = h.cg(hb{member: "", v0: true, instance: &i1, names: []string{"a"}, owned: tpset{}})
	expectCode(t, "replacement", r.ErrorCode, ErrNone)
	cg := h.cgroup("cg")
	if id := *r.MemberID; id == "" || id == old || cg.static["i1"] != id || cg.members[""] != nil {
		t.Fatalf("replacement answered member id %q (old %q); instance held by %q", id, old, cg.static["i1"])
	}
	expectCode(t, "replacement's heartbeat", h.cg(hb{member: *r.MemberID, v0: true, epoch: r.MemberEpoch}).ErrorCode, ErrNone)
}

// The consumer group's size limit comes first, as in Kafka: an unknown member
// heartbeating at an epoch in a full group is GROUP_MAX_SIZE_REACHED, and a
// classic group of exactly the limit is upgradable but refuses the joiner
// with GROUP_MAX_SIZE_REACHED (one member more is GROUP_ID_NOT_FOUND: not
// upgradable).
func TestSizeLimitBeforeMemberLookupAndOnUpgrade(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2}, func(c *Config) { c.ConsumerMaxSize = 1 })
	h.cgJoin("m1", "a")
	expectCode(t, "unknown member at epoch 5 in a full group", h.cg(hb{member: "ghost", epoch: 5}).ErrorCode, ErrGroupMaxSizeReached)

	h2, _ := newCH(t, map[string]int32{"a": 2}, func(c *Config) { c.ConsumerMaxSize = 1 })
	h2.joinResp(h2.newMember("cg", jo{protos: protos("range", string(subscription(tpset{}, "a")))}))
	if g := h2.s.Group("cg"); g == nil || g.cg != nil || len(g.members) != 1 {
		t.Fatal("setup: a classic group of one member")
	}
	expectCode(t, "upgrade of a classic group at the limit", h2.cgJoin("n1", "a").ErrorCode, ErrGroupMaxSizeReached)
	if h2.s.Group("cg").cg != nil {
		t.Fatal("the refused join converted the group")
	}
}

// The size limit does not apply to a request whose instance id a static
// member of the group holds: it can only take that member's place or be
// refused for the instance, and the group does not grow either way (Kafka,
// KAFKA-20601). So in a full group the old incarnation of a replaced static
// member, heartbeating with its old member id, is told FENCED_INSTANCE_ID,
// as in a group with room; cohort answered GROUP_MAX_SIZE_REACHED, which
// librdkafka treats as fatal.
func TestFullGroupFencesZombieStaticMember(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2}, func(c *Config) { c.ConsumerMaxSize = 2 })
	i1 := "i1"
	r := h.cg(hb{member: "s1", instance: &i1, names: []string{"a"}, owned: tpset{}})
	h.cgJoin("d1", "a")
	expectCode(t, "s1's −2 leave", h.cg(hb{member: "s1", instance: &i1, epoch: -2}).ErrorCode, ErrNone)
	expectCode(t, "s2 takes i1 over", h.cg(hb{member: "s2", instance: &i1, names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)

	expectCode(t, "s1 heartbeating again in the full group", h.cg(hb{member: "s1", instance: &i1, epoch: r.MemberEpoch, owned: tpset{}}).ErrorCode,
		ErrFencedInstanceID)
	expectCode(t, "a dynamic stranger in the full group", h.cg(hb{member: "ghost", epoch: r.MemberEpoch}).ErrorCode, ErrGroupMaxSizeReached)
	i9 := "i9"
	expectCode(t, "a static stranger in the full group", h.cg(hb{member: "ghost", instance: &i9, epoch: r.MemberEpoch}).ErrorCode,
		ErrGroupMaxSizeReached)
}

// A consumer-protocol join into a live classic group is refused for a regex
// that does not parse (INVALID_REGULAR_EXPRESSION), and then nothing may have
// changed: in Kafka the conversion is only records of the heartbeat, and a
// refused heartbeat's records are dropped, so the group stays classic and its
// members' parked requests stay parked. cohort converted the group in memory
// before it checked the regex: the live group became a consumer group the
// store did not hold, a parked JoinGroup was answered REBALANCE_IN_PROGRESS,
// and the next accepted join wrote its records on top (the reloaded group was
// both classic and a consumer group).
func TestRefusedJoinDoesNotUpgradeClassicGroup(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	id1, _, gen := h.classicStable()
	parked := h.newMember("cg", jo{client: "c3", protos: protos("range", string(subscription(nil, "a")))})
	h.notAnswered(parked)

	bad := "("
	expectCode(t, "join with a regex that does not parse", h.cg(hb{member: "n1", regex: &bad, owned: tpset{}}).ErrorCode,
		ErrInvalidRegularExpression)
	if g := h.s.Group("cg"); g.cg != nil || len(g.members) != 3 {
		t.Fatalf("after the refused join: consumer group %v, %d classic members (want none, 3)", g.cg != nil, len(g.members))
	}
	h.notAnswered(parked)
	expectCode(t, "classic member's heartbeat", h.heartbeat("cg", id1, gen), ErrRebalanceInProgress)

	// A valid join converts the group, and the store holds what the shard
	// does.
	expectCode(t, "valid join", h.cgJoin("n2", "a").ErrorCode, ErrNone)
	h.wantCode(parked, ErrRebalanceInProgress)
	re := h.reload().Group("cg")
	if re == nil || re.cg == nil || len(re.members) != 0 || len(re.cg.members) != len(h.cgroup("cg").members) {
		t.Fatal("the reloaded group is not the live consumer group")
	}
}

// Migration checks no test held (the audit's mutations of each passed every
// test): an upgrade answers the classic members' parked JoinGroups
// REBALANCE_IN_PROGRESS; a classic join into a consumer group needs a
// session timeout within bounds and a protocol every classic member
// supports; a classic group whose assignment carries assignor user data is
// not upgraded.
func TestMigrationChecks(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	id1, _, _ := h.classicStable()
	meta := string(subscription(nil, "a"))
	parked := h.join("cg", jo{member: id1, client: "c1", protos: protos("range", meta)}) // a rebalance: parked
	h.notAnswered(parked)
	expectCode(t, "the upgrading join", h.cgJoin("n1", "a").ErrorCode, ErrNone)
	h.wantCode(parked, ErrRebalanceInProgress)

	// A classic join with a session timeout out of bounds, or with no
	// protocol the classic members support.
	r := h.joinResp(h.join("cg", jo{client: "c3", session: 1, protos: protos("range", meta)}))
	expectCode(t, "classic join, session timeout 1 ms", r.ErrorCode, ErrInvalidSessionTimeout)
	r = h.joinResp(h.join("cg", jo{client: "c3", protos: protos("roundrobin", meta)}))
	expectCode(t, "classic join, no protocol in common", r.ErrorCode, ErrInconsistentProtocol)

	// A classic group whose assignment carries user data (a custom
	// assignor's state, which a server-side assignor would lose).
	h2, _ := newCH(t, map[string]int32{"a": 4})
	rr := h2.joinResp(h2.newMember("cg", jo{protos: protos("range", meta)}))
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "a", Partitions: []int32{0, 1, 2, 3}}}
	a.UserData = []byte("state")
	h2.wantCode(h2.sync("cg", rr.MemberID, rr.Generation, map[string]string{rr.MemberID: string(a.AppendTo(nil))}), ErrNone)
	expectCode(t, "upgrade of a group with assignor user data", h2.cgJoin("n1", "a").ErrorCode, ErrGroupIDNotFound)
}

// A classic JoinGroup into a full consumer group is refused
// GROUP_MAX_SIZE_REACHED at once, before any MEMBER_ID_REQUIRED round trip
// and before its protocols are checked: Kafka checks the size first for a
// joiner that is not a member (a new member id it would hand out is no
// member). cohort answered MEMBER_ID_REQUIRED first and refused the second
// join, one round trip later. A member of the group and a static member
// whose instance id the group holds are not refused for the size.
func TestClassicJoinIntoFullConsumerGroupRefusedFirst(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2}, func(c *Config) { c.ConsumerMaxSize = 2 })
	i1 := "i1"
	h.cg(hb{member: "s1", instance: &i1, names: []string{"a"}, owned: tpset{}})
	h.cgJoin("d1", "a")
	meta := string(subscription(nil, "a"))

	r := h.joinResp(h.join("cg", jo{protos: protos("range", meta)}))
	expectCode(t, "v9 join with no member id into the full group", r.ErrorCode, ErrGroupMaxSizeReached)
	if r.MemberID != "" {
		t.Fatalf("refused joiner was given member id %q", r.MemberID)
	}
	r = h.joinResp(h.join("cg", jo{ptype: "connect", protos: protos("range", meta)}))
	expectCode(t, "a joiner whose protocol type the group would refuse too", r.ErrorCode, ErrGroupMaxSizeReached)
	r = h.joinResp(h.join("cg", jo{member: "stranger", protos: protos("range", meta)}))
	expectCode(t, "a member id the group does not know", r.ErrorCode, ErrGroupMaxSizeReached)
	r = h.joinResp(h.join("cg", jo{instance: "i9", protos: protos("range", meta)}))
	expectCode(t, "a static stranger", r.ErrorCode, ErrGroupMaxSizeReached)
	if n := len(h.cgroup("cg").members); n != 2 {
		t.Fatalf("group has %d members after refused joins, want 2", n)
	}

	// Not refused for the size: the instance id a static member holds
	// (the classic incarnation takes its place), that member rejoining
	// with the id it was given, and a wrong member id with that instance
	// id (fenced, not GROUP_MAX_SIZE_REACHED).
	r = h.joinResp(h.join("cg", jo{instance: "i1", protos: protos("range", meta)}))
	expectCode(t, "the instance id of a static member, into the full group", r.ErrorCode, ErrNone)
	if n := len(h.cgroup("cg").members); n != 2 {
		t.Fatalf("group has %d members after the static replacement, want 2", n)
	}
	r = h.joinResp(h.join("cg", jo{member: r.MemberID, instance: "i1", protos: protos("range", meta)}))
	expectCode(t, "that member rejoining the full group", r.ErrorCode, ErrNone)
	r = h.joinResp(h.join("cg", jo{member: "bogus", instance: "i1", protos: protos("range", meta)}))
	expectCode(t, "a wrong member id with the held instance id", r.ErrorCode, ErrFencedInstanceID)
}
