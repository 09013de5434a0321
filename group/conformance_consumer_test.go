package group

import (
	"fmt"
	"math"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

// Consumer-protocol (KIP-848) conformance tests. Each test names the item of
// docs/kip848.md's checklist it shows (C1...). Reconciliation, fencing,
// timeouts, static members and leaves are scenario files in testdata/
// (cg_*.txt; docs/group-semantics.md §scenarios).

func TestKIP848_C3C5C6C7C8C9Validation(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 3})
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		o    hb
		want int16
	}{
		{"C3 v1 empty member id", hb{member: "", names: []string{"a"}, owned: tpset{}}, ErrInvalidRequest},
		{"C3 v1 blank member id", hb{member: "  ", names: []string{"a"}, owned: tpset{}}, ErrInvalidRequest},
		{"C5 join without rebalance timeout", hb{member: "m", names: []string{"a"}, owned: tpset{}, rebalance: -1}, ErrInvalidRequest},
		{"C6 join with null owned", hb{member: "m", names: []string{"a"}}, ErrInvalidRequest},
		{"C6 join owning partitions", hb{member: "m", names: []string{"a"}, owned: set("a", 0)}, ErrInvalidRequest},
		{"C7 join without subscription", hb{member: "m", owned: tpset{}}, ErrInvalidRequest},
		{"C8 empty instance id", hb{member: "m", names: []string{"a"}, owned: tpset{}, instance: str("")}, ErrInvalidRequest},
		{"C8 empty rack id", hb{member: "m", names: []string{"a"}, owned: tpset{}, rack: str("")}, ErrInvalidRequest},
		{"C8 epoch -3", hb{member: "m", epoch: -3}, ErrInvalidRequest},
		{"C9 unknown assignor", hb{member: "m", names: []string{"a"}, owned: tpset{}, assignor: str("foo")}, ErrUnsupportedAssignor},
	}
	for _, c := range cases {
		r := h.cg(c.o)
		expectCode(t, c.name, r.ErrorCode, c.want)
		if r.ErrorMessage == nil || *r.ErrorMessage == "" {
			t.Errorf("%s: no error message", c.name)
		}
	}
	if h.s.Group("cg") != nil || len(h.store) != 0 {
		t.Fatal("refused heartbeats created state")
	}
	for _, a := range []string{"uniform", "range"} {
		expectCode(t, "C9 "+a, h.cg(hb{member: "m-" + a, names: []string{"a"}, owned: tpset{}, assignor: str(a)}).ErrorCode, ErrNone)
	}
	// C6/C7: an empty owned list and an empty subscription are fine.
	expectCode(t, "C7 names []", h.cg(hb{member: "m-empty", names: []string{}, owned: tpset{}}).ErrorCode, ErrNone)
}

// TestKIP848BlankIsJavaTrim: "blank" ids are those Kafka's String.trim()
// leaves empty: trim removes every character up to U+0020 (control
// characters included) at either end and nothing else, so an id of control
// characters is INVALID_REQUEST and one of a no-break space is an id like any
// other. Go's strings.TrimSpace had it the other way round for both.
func TestKIP848BlankIsJavaTrim(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1})
	str := func(s string) *string { return &s }
	expectCode(t, "member id of control characters",
		h.cg(hb{member: "\x01\x1f", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrInvalidRequest)
	expectCode(t, "instance id of control characters",
		h.cg(hb{member: "m1", names: []string{"a"}, owned: tpset{}, instance: str("\t\x00")}).ErrorCode, ErrInvalidRequest)
	expectCode(t, "rack id of a no-break space",
		h.cg(hb{member: "m2", names: []string{"a"}, owned: tpset{}, rack: str("\u00a0")}).ErrorCode, ErrNone)
	expectCode(t, "instance id of a no-break space",
		h.cg(hb{member: "m3", names: []string{"a"}, owned: tpset{}, instance: str("\u00a0")}).ErrorCode, ErrNone)
	// ListGroups trims its state filters the same way.
	state := h.cgroup("cg").state()
	req := kmsg.NewPtrListGroupsRequest()
	req.Version, req.StatesFilter = 5, []string{"\x01" + state + "\x01"}
	if gs := h.s.ListGroups(req); len(gs) != 1 {
		t.Fatalf("a state filter padded with control characters listed %d groups, want 1", len(gs))
	}
	req.StatesFilter = []string{"\u00a0" + state}
	if gs := h.s.ListGroups(req); len(gs) != 0 {
		t.Fatalf("a state filter after a no-break space listed %d groups, want 0", len(gs))
	}
}

// TestC44PreferredAssignor: the group runs the assignor most members ask
// for; uniform when none does.
func TestKIP848_C44PreferredAssignor(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	h.cgJoin("m1", "a")
	if a := h.cgroup("cg").preferredAssignor(h.s.cfg.ConsumerAssignors); a != "uniform" {
		t.Fatalf("no votes: %s", a)
	}
	rng := "range"
	h.cg(hb{member: "m2", names: []string{"a"}, owned: tpset{}, assignor: &rng})
	if a := h.cgroup("cg").preferredAssignor(h.s.cfg.ConsumerAssignors); a != "range" {
		t.Fatalf("one vote for range: %s", a)
	}
}

// TestC58C59C60Describe: ConsumerGroupDescribe shows state, epochs,
// assignor, members with assignment and target. The assignment is what the
// member is assigned, without the partitions it still has to revoke, as
// Kafka's ConsumerGroupMember describes it (the C58 summary we started from
// said pending included; Kafka's code and tests say otherwise).
func TestKIP848_C58C59C60Describe(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	r := h.cgJoin("m1", "a")
	h.cgJoin("m2", "a")
	h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: set("a", 0, 1, 2, 3)})
	d := h.s.DescribeConsumerGroup("cg", 1, false)
	expectCode(t, "C58", d.ErrorCode, ErrNone)
	if d.State != "Reconciling" || d.Epoch != h.cgroup("cg").epoch || d.AssignmentEpoch != h.cgroup("cg").assignEpoch || d.AssignorName != "uniform" || len(d.Members) != 2 {
		t.Fatalf("C58: %+v", d)
	}
	m1 := d.Members[0]
	n := 0
	for _, tp := range m1.Assignment.TopicPartitions {
		n += len(tp.Partitions)
		if tp.Topic != "a" {
			t.Fatalf("C58: topic name %q", tp.Topic)
		}
	}
	if cur := h.cgroup("cg").members["m1"]; cur.pending.size() != 2 {
		t.Fatalf("C58: m1 should be revoking 2 partitions: %+v", cur)
	}
	if n != 2 || len(m1.TargetAssignment.TopicPartitions) != 1 || len(m1.TargetAssignment.TopicPartitions[0].Partitions) != 2 {
		t.Fatalf("C58: m1 assignment (without pending) %d partitions, target %+v", n, m1.TargetAssignment)
	}
	if m1.MemberType != 1 {
		t.Fatalf("C59: member type %d", m1.MemberType)
	}
	expectCode(t, "C60 missing", h.s.DescribeConsumerGroup("nope", 1, false).ErrorCode, ErrGroupIDNotFound)
	expectCode(t, "C60 empty id", h.s.DescribeConsumerGroup("", 1, false).ErrorCode, ErrInvalidGroupID)
	h.join("classic", jo{member: "", protos: protos("range", "x"), v: 3})
	expectCode(t, "C60 classic", h.s.DescribeConsumerGroup("classic", 1, false).ErrorCode, ErrGroupIDNotFound)
}

// TestC61C62ListAndDescribeGroups: ListGroups v5 types and filters;
// DescribeGroups answers a consumer group as missing.
func TestKIP848_C61C62ListAndDescribeGroups(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1})
	h.cgJoin("m1", "a")
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	// States are trimmed as in Kafka (types are not).
	req.TypesFilter, req.StatesFilter = []string{"CONSUMER"}, []string{" stable "}
	gs := h.s.ListGroups(req)
	if len(gs) != 1 || gs[0].GroupType != "consumer" || gs[0].ProtocolType != "consumer" || gs[0].GroupState != "Stable" {
		t.Fatalf("C61: %+v", gs)
	}
	req.TypesFilter = []string{"classic"}
	if gs := h.s.ListGroups(req); len(gs) != 0 {
		t.Fatalf("C61: classic filter listed %+v", gs)
	}
	d6 := h.s.DescribeGroup("cg", 6, false)
	if d6.ErrorCode != ErrGroupIDNotFound || d6.State != "Dead" {
		t.Fatalf("C62 v6: %+v", d6)
	}
	if d5 := h.s.DescribeGroup("cg", 5, false); d5.ErrorCode != ErrNone || d5.State != "Dead" {
		t.Fatalf("C62 v5: %+v", d5)
	}
	req.TypesFilter = []string{" consumer "}
	if gs := h.s.ListGroups(req); len(gs) != 0 {
		t.Fatalf("C61: a padded type filter listed %+v", gs)
	}
}

// TestDescribeAuthorizedOperations: without an authorizer a described group
// carries every operation Kafka supports on a group (READ, DESCRIBE,
// DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS); a group answered with an error
// (DescribeGroups v6 of a missing group, ConsumerGroupDescribe of a missing
// or invalid one) keeps the field's default, INT32_MIN, as Kafka fills it
// only where the error is NONE.
func TestDescribeAuthorizedOperations(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1})
	h.cgJoin("m1", "a")
	h.join("classic", jo{member: "", protos: protos("range", "x"), v: 3})
	const all, unset = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11, -2147483648
	for _, c := range []struct {
		what string
		ops  int32
		want int32
	}{
		{"DescribeGroups v6, classic group", h.s.DescribeGroup("classic", 6, true).AuthorizedOperations, all},
		{"DescribeGroups v5, missing group (no error)", h.s.DescribeGroup("nope", 5, true).AuthorizedOperations, all},
		{"DescribeGroups v6, missing group", h.s.DescribeGroup("nope", 6, true).AuthorizedOperations, unset},
		{"DescribeGroups v6, not asked", h.s.DescribeGroup("classic", 6, false).AuthorizedOperations, unset},
		{"ConsumerGroupDescribe, consumer group", h.s.DescribeConsumerGroup("cg", 1, true).AuthorizedOperations, all},
		{"ConsumerGroupDescribe, missing group", h.s.DescribeConsumerGroup("nope", 1, true).AuthorizedOperations, unset},
		{"ConsumerGroupDescribe, empty id", h.s.DescribeConsumerGroup("", 1, true).AuthorizedOperations, unset},
	} {
		if c.ops != c.want {
			t.Errorf("%s: authorized operations %d, want %d", c.what, c.ops, c.want)
		}
	}
}

// consumerCommit commits offset 1 for the partitions of topic, as member at
// epoch, with OffsetCommit version v.
func (h *h) consumerCommit(v int16, member string, epoch int32, topic string, ps ...int32) int16 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = v, "cg", member, epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range ps {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	tk := h.do(func(t Ticket, out *Output) { h.s.OffsetCommit(h.now, t, req, out) })
	resp := h.resp(tk).(*kmsg.OffsetCommitResponse)
	code := resp.Topics[0].Partitions[0].ErrorCode
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != code {
			h.t.Fatalf("commit answered partitions differently: %+v", resp)
		}
	}
	return code
}

// TestC63C64C65C66C67C68C69Commits: OffsetCommit fencing by member epoch
// with KIP-1251's per-partition epochs.
func TestKIP848_C63C64C65C66C67C68C69Commits(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	expectCode(t, "C69", h.consumerCommit(9, "m1", 0, "a", 0), ErrGroupIDNotFound)
	r := h.cgJoin("m1", "a")
	e1 := r.MemberEpoch
	expectCode(t, "C63", h.consumerCommit(8, "m1", e1, "a", 0), ErrUnsupportedVersion)
	expectCode(t, "C64", h.consumerCommit(9, "m1", e1, "a", 0, 1, 2, 3), ErrNone)
	expectCode(t, "C65", h.consumerCommit(9, "m1", e1+1, "a", 0), ErrStaleMemberEpoch)
	expectCode(t, "C68 live group", h.consumerCommit(9, "", -1, "a", 0), ErrUnknownMemberID)
	// m2 joins: m1 keeps two partitions, revokes two, then advances.
	h.cgJoin("m2", "a")
	h.cg(hb{member: "m1", epoch: e1, owned: set("a", 0, 1, 2, 3)})
	kept := h.cmember("cg", "m1").assigned.clone()
	h.cg(hb{member: "m1", epoch: e1, owned: kept})
	e2 := h.cmember("cg", "m1").epoch
	if e2 <= e1 {
		t.Fatal("m1 did not advance")
	}
	var keptP int32 = -1
	for _, p := range kept["a"] {
		keptP = p
	}
	expectCode(t, "C66 kept at the older epoch", h.consumerCommit(9, "m1", e1, "a", keptP), ErrNone)
	var movedP int32 = -1
	for p := int32(0); p < 4; p++ {
		if !kept.has("a", p) {
			movedP = p
		}
	}
	expectCode(t, "C67 moved at the older epoch", h.consumerCommit(9, "m1", e1, "a", keptP, movedP), ErrStaleMemberEpoch)
	// m2 got partitions at e2: an older-epoch commit of them is stale.
	r2 := h.cg(hb{member: "m2", epoch: h.cmember("cg", "m2").epoch, owned: tpset{}})
	m2 := h.cmember("cg", "m2")
	if m2.assigned.size() == 0 {
		t.Fatalf("m2 got nothing: %+v", r2)
	}
	expectCode(t, "C66 new at an older epoch", h.consumerCommit(9, "m2", e1, "a", m2.assigned["a"][0]), ErrStaleMemberEpoch)
	// C68: an empty group takes admin commits.
	h.cg(hb{member: "m1", epoch: -1})
	h.cg(hb{member: "m2", epoch: -1})
	expectCode(t, "C68 empty group", h.consumerCommit(9, "", -1, "a", 0), ErrNone)
}

// TestC71C72C73Fetch: OffsetFetch v9 checks the member epoch exactly;
// commits do not extend a consumer member's session.
func TestKIP848_C71C72C73Fetch(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1})
	r := h.cgJoin("m1", "a")
	fetch := func(member *string, epoch int32, group string) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.MemberID, g.MemberEpoch = group, member, epoch
		req.Groups = append(req.Groups, g)
		return h.s.OffsetFetch(req).Groups[0].ErrorCode
	}
	id, ghost := "m1", "ghost"
	expectCode(t, "C71 exact", fetch(&id, r.MemberEpoch, "cg"), ErrNone)
	expectCode(t, "C71 other epoch", fetch(&id, r.MemberEpoch+1, "cg"), ErrStaleMemberEpoch)
	expectCode(t, "C71 unknown member", fetch(&ghost, r.MemberEpoch, "cg"), ErrUnknownMemberID)
	expectCode(t, "C71 admin", fetch(nil, -1, "cg"), ErrNone)
	expectCode(t, "C72 missing group", fetch(nil, -1, "none"), ErrNone)
	// C73: commits every 10 s for 50 s do not keep m1 alive.
	for i := 0; i < 5; i++ {
		h.advance(10 * time.Second)
		if h.cmember("cg", "m1") != nil {
			h.consumerCommit(9, "m1", r.MemberEpoch, "a", 0)
		}
	}
	if h.cmember("cg", "m1") != nil {
		t.Fatal("C73: commits kept the member's session alive")
	}
}

// A topic a member subscribes to by name counts as subscribed for the
// group's offsets even while it does not exist (Kafka tests the set of
// subscribed names): its offsets neither expire nor can be deleted. cohort
// looked only at subscribed topics in its catalog.
func TestKIP848SubscribedMissingTopicProtectsOffsets(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1}, func(c *Config) { c.OffsetsRetention = time.Hour })
	r := h.cgJoin("m1", "a", "ghost")
	h.consumerCommit(9, "m1", r.MemberEpoch, "ghost", 0)
	h.consumerCommit(9, "m1", r.MemberEpoch, "unsubscribed", 0)
	h.heartbeatPastRetention("m1", r.MemberEpoch)
	g := h.s.Group("cg")
	if !g.hasOffset(topicPartition{"ghost", 0}) || g.hasOffset(topicPartition{"unsubscribed", 0}) {
		t.Fatalf("offsets after retention: ghost %v (want kept), unsubscribed %v (want expired)",
			g.hasOffset(topicPartition{"ghost", 0}), g.hasOffset(topicPartition{"unsubscribed", 0}))
	}
	if d := h.offsetDelete("cg", map[string][]int32{"ghost": {0}}); d.ErrorCode != 0 || d.Topics[0].Partitions[0].ErrorCode != ErrGroupSubscribedToTopic {
		t.Fatalf("OffsetDelete of a subscribed missing topic: top %d partition %d, want 0 and %d",
			d.ErrorCode, d.Topics[0].Partitions[0].ErrorCode, ErrGroupSubscribedToTopic)
	}
}

// heartbeatPastRetention keeps member alive with a heartbeat every 30 s for
// two hours (twice the tests' one-hour retention), then runs the offset
// expiry.
func (h *h) heartbeatPastRetention(member string, epoch int32) {
	for i := 0; i < 2*60*2; i++ {
		h.advance(30 * time.Second)
		h.cg(hb{member: member, epoch: epoch})
	}
	var out Output
	h.s.ExpireOffsets(h.now, &out)
	h.settle(&out)
}

// TestC74C75RetentionAndDeletes: unsubscribed topics' offsets expire while
// the group is Stable; subscribed ones do not; a non-empty consumer group
// cannot be deleted and a subscribed topic's offsets cannot be deleted.
func TestKIP848_C74C75RetentionAndDeletes(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1, "b": 1}, func(c *Config) { c.OffsetsRetention = time.Hour })
	r := h.cgJoin("m1", "a")
	h.consumerCommit(9, "m1", r.MemberEpoch, "a", 0)
	h.consumerCommit(9, "m1", r.MemberEpoch, "b", 0)
	h.heartbeatPastRetention("m1", r.MemberEpoch)
	g := h.s.Group("cg")
	if g == nil || g.cg == nil {
		t.Fatal("group gone")
	}
	if !g.hasOffset(topicPartition{"a", 0}) || g.hasOffset(topicPartition{"b", 0}) {
		t.Fatalf("C74: offsets after retention: a %v b %v", g.hasOffset(topicPartition{"a", 0}), g.hasOffset(topicPartition{"b", 0}))
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"cg"}
	tk := h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, del, out) })
	expectCode(t, "C75 delete", h.resp(tk).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, ErrNonEmptyGroup)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "cg"
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = "a"
	rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	od.Topics = append(od.Topics, rt)
	tk = h.do(func(t Ticket, out *Output) { h.s.OffsetDelete(h.now, t, od, out) })
	expectCode(t, "C75 offset delete", h.resp(tk).(*kmsg.OffsetDeleteResponse).Topics[0].Partitions[0].ErrorCode, ErrGroupSubscribedToTopic)
}

// subscription is a classic consumer-protocol subscription (v1) of topics
// owning owned.
func subscription(owned tpset, topics ...string) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, topics
	for _, t := range owned.topics() {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = t, owned[t]
		md.OwnedPartitions = append(md.OwnedPartitions, op)
	}
	return md.AppendTo(nil)
}

// classicStable forms a Stable classic consumer group "cg" of members c1,
// c2 on topic a (4 partitions), c1 given a/0,1 and c2 a/2,3, and returns
// their member ids and the generation.
func (h *h) classicStable() (string, string, int32) {
	h.t.Helper()
	meta := string(subscription(nil, "a"))
	r1 := h.joinResp(h.newMember("cg", jo{client: "c1", protos: protos("range", meta)}))
	id1 := r1.MemberID
	t2 := h.newMember("cg", jo{client: "c2", protos: protos("range", meta)})
	t1 := h.join("cg", jo{member: id1, client: "c1", protos: protos("range", meta)})
	r1, r2 := h.joinResp(t1), h.joinResp(t2)
	leader, gen := r1.LeaderID, r1.Generation
	assign := map[string]string{
		r1.MemberID: string(encodeAssignment(set("a", 0, 1), []byte(meta))),
		r2.MemberID: string(encodeAssignment(set("a", 2, 3), []byte(meta))),
	}
	var ts []Ticket
	for _, id := range []string{r1.MemberID, r2.MemberID} {
		var a map[string]string
		if id == leader {
			a = assign
		}
		ts = append(ts, h.sync("cg", id, gen, a))
	}
	for _, tk := range ts {
		expectCode(h.t, "classic sync", h.syncResp(tk).ErrorCode, ErrNone)
	}
	return r1.MemberID, r2.MemberID, gen
}

// classicRejoin runs a classic member's JoinGroup and SyncGroup in a
// consumer-protocol group, owning owned, and returns the assignment it got
// and its generation.
func (h *h) classicRejoin(id, client string, owned tpset) (tpset, int32) {
	h.t.Helper()
	meta := string(subscription(owned, "a"))
	jr := h.joinResp(h.join("cg", jo{member: id, client: client, protos: protos("range", meta)}))
	expectCode(h.t, "classic join into consumer group", jr.ErrorCode, ErrNone)
	if jr.LeaderID != "" || len(jr.Members) != 0 || jr.ProtocolType == nil || *jr.ProtocolType != "consumer" {
		h.t.Fatalf("C80: join answer %+v", jr)
	}
	if m := h.cmember("cg", id); m == nil || jr.Generation != m.epoch {
		h.t.Fatalf("C80: generation %d is not the member epoch", jr.Generation)
	}
	sr := h.syncResp(h.sync("cg", id, jr.Generation, map[string]string{id: "ignored"}))
	if sr.ErrorCode != ErrNone {
		return nil, jr.Generation
	}
	got, ok := parseAssignment(sr.MemberAssignment)
	if !ok {
		h.t.Fatalf("C80: SyncGroup assignment %x does not parse", sr.MemberAssignment)
	}
	return got, jr.Generation
}

// TestKIP848_C80ClassicJoinsWithGivenID: a classic member (JoinGroup v4+)
// joining a consumer-protocol group that has members is first answered
// MEMBER_ID_REQUIRED with an id; its JoinGroup with that id creates the
// member, which is then served like the others and gets partitions once the
// next-gen member has given them up.
func TestKIP848_C80ClassicJoinsWithGivenID(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	expectCode(t, "next-gen join", h.cgJoin("n1", "a").ErrorCode, ErrNone)
	n1 := h.cmember("cg", "n1")
	h.cg(hb{member: "n1", epoch: n1.epoch, owned: n1.assigned.clone()})
	meta := string(subscription(tpset{}, "a"))
	jr := h.joinResp(h.join("cg", jo{client: "c1", protos: protos("range", meta)}))
	expectCode(t, "C80 first join", jr.ErrorCode, ErrMemberIDRequired)
	if jr.MemberID == "" {
		t.Fatal("C80: MEMBER_ID_REQUIRED without an id")
	}
	id := jr.MemberID
	owned := tpset{}
	for round := 0; round < 4; round++ {
		got, _ := h.classicRejoin(id, "c1", owned)
		if got != nil {
			owned = got
		}
		m := h.cmember("cg", "n1")
		h.cg(hb{member: "n1", epoch: m.epoch, owned: m.assigned.clone()})
		h.checkNoDoubleOwner("cg")
	}
	if owned.size() != 2 || h.cmember("cg", "n1").assigned.size() != 2 || overlaps(owned, h.cmember("cg", "n1").assigned) {
		t.Fatalf("C80: classic member owns %v, next-gen member %v", owned, h.cmember("cg", "n1").assigned)
	}
}

// TestC76C84ConvertEmptyGroups: a consumer join converts an empty classic
// group (offsets stay); a classic join turns an empty consumer group
// classic.
func TestKIP848_C76C84ConvertEmptyGroups(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 1, "a": 1})
	h.commit("cg", "", -1, 2, map[string]int64{"t": 42})
	expectCode(t, "C76", h.cgJoin("m1", "a").ErrorCode, ErrNone)
	if g := h.s.Group("cg"); g.cg == nil || !g.hasOffset(topicPartition{"t", 0}) {
		t.Fatal("C76: not converted, or the offsets were lost")
	}
	if d := h.checkReload(); d != "" {
		t.Fatalf("C76 reload: %s", d)
	}
	h.cg(hb{member: "m1", epoch: -1})
	tk := h.join("cg", jo{member: "", protos: protos("range", string(subscription(nil, "a"))), v: 3})
	expectCode(t, "C84", h.joinResp(tk).ErrorCode, ErrNone)
	if g := h.s.Group("cg"); g.cg != nil || !g.hasOffset(topicPartition{"t", 0}) {
		t.Fatal("C84: not classic, or the offsets were lost")
	}
}

// TestKIP848_C84ConversionWrittenInOrder: a classic JoinGroup turns an
// empty consumer group classic (here its first JoinGroup, answered
// MEMBER_ID_REQUIRED); a consumer-protocol member that joins while the
// conversion's tombstones are still on their way to the store makes it a
// consumer group again. The tombstones, replayed once durable, removed that
// new consumer group from the shard: the member's next heartbeat was
// answered GROUP_ID_NOT_FOUND while the store held it as a member. And a
// conversion whose write failed left the shard classic and the store with
// the consumer group, without asking for a reload.
func TestKIP848_C84ConversionWrittenInOrder(t *testing.T) {
	for _, offsets := range []bool{false, true} {
		h, _ := newCH(t, map[string]int32{"t": 1, "a": 1})
		if offsets {
			h.commit("cg", "", -1, 2, map[string]int64{"t": 42})
		}
		h.cgJoin("m1", "a")
		h.cg(hb{member: "m1", epoch: -1})
		h.hold = true
		meta := string(subscription(nil, "a"))
		expectCode(t, "classic join", h.joinResp(h.join("cg", jo{protos: protos("range", meta)})).ErrorCode, ErrMemberIDRequired)
		req := h.cgReq(hb{member: "m2", names: []string{"a"}, owned: tpset{}})
		tk := h.do(func(t Ticket, out *Output) {
			h.s.ConsumerGroupHeartbeat(h.now, t, Client{ID: "client-m2", Host: "127.0.0.1"}, req, out)
		})
		h.release() // in write order: the conversion's, then m2's
		r := h.resp(tk).(*kmsg.ConsumerGroupHeartbeatResponse)
		expectCode(t, "m2 join", r.ErrorCode, ErrNone)
		r = h.cg(hb{member: "m2", epoch: r.MemberEpoch})
		expectCode(t, fmt.Sprintf("m2 heartbeat (offsets %v)", offsets), r.ErrorCode, ErrNone)
		if d := h.checkReload(); d != "" {
			t.Fatalf("offsets %v: %s", offsets, d)
		}
	}
	h, _ := newCH(t, map[string]int32{"a": 1})
	h.cgJoin("m1", "a")
	h.cg(hb{member: "m1", epoch: -1})
	h.fail = ErrCoordinatorNotAvailable
	h.join("cg", jo{protos: protos("range", string(subscription(nil, "a")))})
	if !h.s.NeedsReload() {
		t.Fatal("a failed conversion write left the shard classic and the store with the consumer group, and no reload asked")
	}
}

// TestKIP848_C84NotDuringDelete: a classic JoinGroup to an empty consumer
// group that DeleteGroups is removing is told to retry
// (COORDINATOR_NOT_AVAILABLE), as for a classic group being deleted, and
// once the deletion is durable the group id is free for either protocol.
// The JoinGroup used to turn the group classic first: the deletion's
// consumer-group tombstones then found no consumer group to remove and the
// group stayed Dead in memory, every JoinGroup and ConsumerGroupHeartbeat
// answered COORDINATOR_NOT_AVAILABLE until the partition was loaded again.
func TestKIP848_C84NotDuringDelete(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 1, "a": 1})
	h.commit("cg", "", -1, 2, map[string]int64{"t": 42})
	h.cgJoin("m1", "a")
	h.cg(hb{member: "m1", epoch: -1})
	h.hold = true
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 2, []string{"cg"}
	dt := h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
	meta := string(subscription(nil, "a"))
	expectCode(t, "join during the delete", h.joinResp(h.join("cg", jo{protos: protos("range", meta)})).ErrorCode, ErrCoordinatorNotAvailable)
	h.release()
	expectCode(t, "delete", h.resp(dt).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, ErrNone)
	if g := h.s.Group("cg"); g != nil {
		t.Fatalf("after the delete: a group is left, state %v, consumer %v", g.State(), g.cg != nil)
	}
	expectCode(t, "classic join after the delete", h.joinResp(h.join("cg", jo{protos: protos("range", meta)})).ErrorCode, ErrMemberIDRequired)
	expectCode(t, "consumer join after the delete", h.cgJoin("m2", "a").ErrorCode, ErrNone)
}

// TestKIP848_C76EmptyClassicGroupWithoutOffsets: a classic group whose
// members all left, with no offsets (none committed, or all deleted), is
// replaced by the first consumer-protocol member's group: the member joins
// and gets the partitions, and a reload finds the consumer group, not the
// classic one. The tombstone of the classic record removed the group from
// the shard as it was replayed, before the consumer group's first record,
// and the heartbeat went on with the removed group (nil pointer: a panic).
func TestKIP848_C76EmptyClassicGroupWithoutOffsets(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1})
	ids, _ := h.stableGroup("cg", 1)
	h.leave("cg", lm(ids[0]))
	if g := h.s.Group("cg"); g == nil || g.State() != Empty || !g.persisted || g.NumOffsets() != 0 {
		t.Fatal("setup: want an empty classic group with a stored record and no offsets")
	}
	r := h.cgJoin("m1", "a")
	expectCode(t, "C76 join", r.ErrorCode, ErrNone)
	if got := assigned(r); !got.equal(set("a", 0)) {
		t.Fatalf("C76: the member got %v", got)
	}
	if l := h.s.ListGroups(kmsg.NewPtrListGroupsRequest()); len(l) != 1 || l[0].GroupType != "consumer" || l[0].GroupState != "Stable" {
		t.Fatalf("C76: listed %+v", l)
	}
	re := h.reload()
	if g := re.Group("cg"); g == nil || g.cg == nil || g.cg.members["m1"] == nil || g.persisted {
		t.Fatal("C76: reloaded without the consumer group, or with the classic record")
	}
}

// TestC77C80C81C82C83OnlineMigration: a consumer-protocol member joins a
// live classic group (upgrade): the classic members keep their partitions,
// are told to rejoin, rejoin through JoinGroup/SyncGroup served from the
// consumer group's state, and end up sharing the partitions with the new
// member without any partition in two hands; when the consumer-protocol
// member leaves, the group turns classic again and rebalances (downgrade).
func TestKIP848_C77C80C81C82C83OnlineMigration(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	id1, id2, gen := h.classicStable()
	h.commit("cg", id1, gen, 9, map[string]int64{"a": 7})
	r := h.cgJoin("n1", "a")
	expectCode(t, "C77 upgrade", r.ErrorCode, ErrNone)
	g := h.s.Group("cg")
	if g.cg == nil || !g.hasOffset(topicPartition{"a", 0}) {
		t.Fatal("C77: not converted, or offsets lost")
	}
	if m := h.cmember("cg", id1); m == nil || m.classic == nil || !m.assigned.equal(set("a", 0, 1)) || m.epoch != gen {
		t.Fatalf("C77: classic member after upgrade: %+v", m)
	}
	if got := assigned(r); got.size() != 0 {
		t.Fatalf("C77: the new member got %v while the classic members hold everything", got)
	}
	h.checkNoDoubleOwner("cg")
	// C82: the classic members are told to rejoin.
	expectCode(t, "C82", h.heartbeat("cg", id1, gen), ErrRebalanceInProgress)
	// C81: a SyncGroup at another generation.
	expectCode(t, "C81", h.syncResp(h.sync("cg", id1, gen+5, nil)).ErrorCode, ErrIllegalGeneration)
	// Both rejoin, owning what they had (cooperative): each keeps what the
	// target leaves it and revokes the rest, then rejoins again.
	owned := map[string]tpset{id1: set("a", 0, 1), id2: set("a", 2, 3)}
	for round := 0; round < 3; round++ {
		for _, id := range []string{id1, id2} {
			got, _ := h.classicRejoin(id, "c", owned[id])
			if got != nil {
				owned[id] = got // it revokes what it lost; keeps and adds the rest
			}
			h.checkNoDoubleOwner("cg")
		}
		r = h.cg(hb{member: "n1", epoch: h.cmember("cg", "n1").epoch, owned: h.cmember("cg", "n1").assigned.clone()})
		if r.ErrorCode != 0 {
			t.Fatalf("round %d: n1's heartbeat failed: %d", round, r.ErrorCode)
		}
		h.checkNoDoubleOwner("cg")
	}
	cg := h.cgroup("cg")
	if cg.state() != "Stable" || h.cmember("cg", "n1").assigned.size() == 0 {
		t.Fatalf("mixed group did not settle: %s, n1 %v", cg.state(), h.cmember("cg", "n1").assigned)
	}
	total := owned[id1].size() + owned[id2].size() + h.cmember("cg", "n1").assigned.size()
	if total != 4 || overlaps(owned[id1], owned[id2]) || overlaps(owned[id1], h.cmember("cg", "n1").assigned) {
		t.Fatalf("partitions: c1 %v c2 %v n1 %v", owned[id1], owned[id2], h.cmember("cg", "n1").assigned)
	}
	d := h.s.DescribeConsumerGroup("cg", 1, false)
	types := map[int8]int{}
	for _, m := range d.Members {
		types[m.MemberType]++
	}
	if types[0] != 2 || types[1] != 1 {
		t.Fatalf("C59: member types %v", types)
	}
	if dr := h.checkReload(); dr != "" {
		t.Fatalf("mixed group reload: %s", dr)
	}
	// C83: the consumer-protocol member leaves: the group turns classic and
	// rebalances; the classic members rejoin the classic way. The classic
	// group takes the epoch from before the leave, the generation the
	// classic members know, so their Heartbeat is told to rejoin rather
	// than fenced as ILLEGAL_GENERATION.
	before, known := cg.epoch, h.cmember("cg", id1).epoch
	h.cg(hb{member: "n1", epoch: -1})
	g = h.s.Group("cg")
	if g.cg != nil || g.State() != PreparingRebalance || len(g.MemberIDs()) != 2 {
		t.Fatalf("C83: after the last consumer member left: consumer %v state %v members %v", g.cg != nil, g.State(), g.MemberIDs())
	}
	if g.generation != before {
		t.Fatalf("C83: classic generation %d after the downgrade, want the epoch before the leave %d", g.generation, before)
	}
	expectCode(t, "C83 heartbeat after downgrade", h.heartbeat("cg", id1, known), ErrRebalanceInProgress)
	if !g.hasOffset(topicPartition{"a", 0}) {
		t.Fatal("C83: offsets lost")
	}
	meta := string(subscription(owned[id1], "a"))
	t1 := h.join("cg", jo{member: id1, client: "c1", protos: protos("range", meta)})
	t2 := h.join("cg", jo{member: id2, client: "c2", protos: protos("range", string(subscription(owned[id2], "a")))})
	r1, r2 := h.joinResp(t1), h.joinResp(t2)
	expectCode(t, "C83 rejoin", r1.ErrorCode, ErrNone)
	if r1.Generation <= cg.epoch-1 || r2.Generation != r1.Generation {
		t.Fatalf("C83: classic generation %d/%d after group epoch %d", r1.Generation, r2.Generation, cg.epoch)
	}
}

// TestC78C79MigrationRefused: upgrades and mixed joins that Kafka refuses.
func TestKIP848_C78C79MigrationRefused(t *testing.T) {
	for _, policy := range []string{MigrationDisabled, MigrationDowngrade} {
		h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.ConsumerMigrationPolicy = policy })
		h.classicStable()
		expectCode(t, "C78 policy "+policy, h.cgJoin("n1", "a").ErrorCode, ErrGroupIDNotFound)
	}
	// A group whose protocol type is not consumer.
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.joinResp(h.newMember("cg", jo{ptype: "connect", protos: protos("x", "y")}))
	expectCode(t, "C78 protocol type", h.cgJoin("n1", "a").ErrorCode, ErrGroupIDNotFound)
	// C79: classic join into a consumer group with members, policy disabled.
	h, _ = newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.ConsumerMigrationPolicy = MigrationDisabled })
	h.cgJoin("n1", "a")
	tk := h.join("cg", jo{member: "", protos: protos("range", string(subscription(nil, "a"))), v: 3})
	expectCode(t, "C79", h.joinResp(tk).ErrorCode, ErrInconsistentProtocol)
}

// TestC85ReplayRestores: a shard reloaded from the store has the same
// members, epochs, states, targets and assignment epochs, and its timers
// run again.
func TestKIP848_C85ReplayRestores(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4, "b": 2})
	r := h.cgJoin("m1", "a", "b")
	inst := "i"
	h.cg(hb{member: "s1", instance: &inst, names: []string{"a"}, owned: tpset{}})
	h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: set("a", 0, 1, 2, 3).union(set("b", 0, 1))})
	if h.cmember("cg", "m1").state != mUnrevoked {
		t.Fatal("setup: m1 should be revoking")
	}
	h.cg(hb{member: "s1", epoch: -2, instance: &inst})
	live := h.cgroup("cg")
	re := h.reload()
	got := re.Group("cg").cg
	if got == nil || got.epoch != live.epoch || got.assignEpoch != live.assignEpoch || len(got.ids) != len(live.ids) {
		t.Fatalf("C85: reloaded %+v, live %+v", got, live)
	}
	for _, id := range live.ids {
		a, b := live.members[id], got.members[id]
		if b == nil || a.epoch != b.epoch || a.prevEpoch != b.prevEpoch || a.state != b.state || !a.assigned.equal(b.assigned) ||
			!a.pending.equal(b.pending) || !live.target[id].equal(got.target[id]) || len(a.assignedAt) != len(b.assignedAt) {
			t.Fatalf("C85: member %s reloaded %+v, live %+v", id, b, a)
		}
		for tp, e := range a.assignedAt {
			if b.assignedAt[tp] != e {
				t.Fatalf("C85: member %s %v assigned at %d, reloaded %d", id, tp, e, b.assignedAt[tp])
			}
		}
	}
	// C87: the -2 static member survived and its instance can be taken over.
	h.s = re
	r2 := h.cg(hb{member: "s2", instance: &inst, names: []string{"a"}, owned: tpset{}})
	expectCode(t, "C87", r2.ErrorCode, ErrNone)
	// Timers came back: silence for 46 s removes everyone.
	h.advance(46 * time.Second)
	if len(h.cgroup("cg").members) != 0 {
		t.Fatalf("C85: members left after the session timeout: %v", h.cgroup("cg").ids)
	}
}

// union returns s ∪ o as a new set.
func (s tpset) union(o tpset) tpset {
	u := s.clone()
	for t, ps := range o {
		for _, p := range ps {
			u.add(t, p)
		}
	}
	return u
}

// TestKIP848RebalanceHeartbeatInterval: while the group is not Stable, an
// answer gives the time since the member's current assignment last changed,
// from ConsumerRebalanceHeartbeatMin (1 ms) up to
// ConsumerRebalanceHeartbeatInterval (500 ms), so that the members learn
// what to give up and take in short rounds and back off while nothing
// changes for them; once the group is Stable, the normal interval again.
// With the minimum disabled, a flat 500 ms.
func TestKIP848RebalanceHeartbeatInterval(t *testing.T) {
	for _, flat := range []bool{false, true} {
		t.Run(map[bool]string{false: "backoff", true: "flat"}[flat], func(t *testing.T) {
			h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) {
				if flat {
					c.ConsumerRebalanceHeartbeatMin = 0
				}
			})
			want := func(what string, r *kmsg.ConsumerGroupHeartbeatResponse, ms int32) {
				t.Helper()
				if flat && ms < 500 {
					ms = 500
				}
				if r.ErrorCode != ErrNone || r.HeartbeatIntervalMillis != ms {
					t.Fatalf("%s: error %d, interval %d ms, want %d ms", what, r.ErrorCode, r.HeartbeatIntervalMillis, ms)
				}
			}
			r1 := h.cgJoin("m1", "a")
			want("stable group", r1, 5000)
			r2 := h.cgJoin("m2", "a") // UNRELEASED_PARTITIONS: m1 holds its target
			want("newcomer waiting for m1", r2, 1)
			h.advance(40 * time.Millisecond)
			want("newcomer, nothing new for 40 ms", h.cg(hb{member: "m2", epoch: r2.MemberEpoch}), 40)
			h.advance(2 * time.Second)
			want("newcomer, nothing new for 2 s", h.cg(hb{member: "m2", epoch: r2.MemberEpoch}), 500)
			r := h.cg(hb{member: "m1", epoch: r1.MemberEpoch, owned: set("a", 0, 1, 2, 3)})
			want("m1 told to revoke", r, 1)
			h.advance(10 * time.Millisecond)
			want("m1 still revoking", h.cg(hb{member: "m1", epoch: r1.MemberEpoch}), 10)
			h.cg(hb{member: "m1", epoch: r1.MemberEpoch, owned: h.cmember("cg", "m1").assigned.clone()})
			r = h.cg(hb{member: "m2", epoch: h.cmember("cg", "m2").epoch, owned: tpset{}})
			if h.cgroup("cg").state() != "Stable" {
				t.Fatalf("settled: state %s", h.cgroup("cg").state())
			}
			want("settled", r, 5000)
		})
	}
}

// countingTopics counts the walks over the catalog: each is one regex
// matched against every topic.
type countingTopics struct {
	*catalog.Catalog
	ranges int
}

func (c *countingTopics) Range(fn func(*catalog.Topic) bool) { c.ranges++; c.Catalog.Range(fn) }

// A member's regex is compiled and matched once per version of the
// catalog, not at every heartbeat that reconciles or recomputes the target:
// matching a long regex against many topics can take seconds, on the
// partition's only goroutine. A new topic still reaches the member (C53),
// and the cache goes with the regex's last member.
func TestRegexMatchedOncePerCatalogVersion(t *testing.T) {
	topics := map[string]int32{}
	for i := range 200 {
		topics[fmt.Sprintf("t-%03d", i)] = 2
	}
	h, cat := newCH(t, topics)
	ct := &countingTopics{Catalog: cat}
	h.s.cfg.Topics = ct
	regex := "t-00.*"
	r1 := h.cg(hb{member: "m1", regex: &regex, owned: tpset{}})
	r2 := h.cg(hb{member: "m2", regex: &regex, owned: tpset{}})
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 {
		t.Fatal(r1.ErrorCode, r2.ErrorCode)
	}
	after := ct.ranges
	if after == 0 {
		t.Fatal("the regex was never matched against the catalog")
	}
	// Heartbeats that reconcile (m1 releases what m2's join moved) and a
	// third member joining with the same regex: no new matching.
	for range 3 {
		r1 = h.cg(hb{member: "m1", epoch: r1.MemberEpoch, owned: assigned(r1)})
		r2 = h.cg(hb{member: "m2", epoch: r2.MemberEpoch, owned: assigned(r2)})
	}
	r3 := h.cg(hb{member: "m3", regex: &regex, owned: tpset{}})
	if r3.ErrorCode != 0 {
		t.Fatal(r3.ErrorCode)
	}
	if ct.ranges != after {
		t.Errorf("the unchanged catalog was walked %d more times for the same regex", ct.ranges-after)
	}
	// A new matching topic: matched once more, and subscribed.
	if _, err := cat.Create("t-00new", 3, nil); err != nil {
		t.Fatal(err)
	}
	before := ct.ranges
	r1 = h.cg(hb{member: "m1", epoch: r1.MemberEpoch, owned: assigned(r1)})
	if r1.ErrorCode != 0 {
		t.Fatalf("m1's heartbeat after the new topic failed: %d", r1.ErrorCode)
	}
	if ct.ranges != before+2 {
		t.Errorf("a new catalog version walked the catalog %d times, want 2 (its names' size, the regex)", ct.ranges-before)
	}
	cg := h.s.Group("cg").cg
	if ts := cg.regexTopics(regex, ct); !slices.Contains(ts, "t-00new") || len(ts) != 11 {
		t.Errorf("regex matches %q", ts)
	}
	if !slices.Contains(cg.subscribed(ct), "t-00new") {
		t.Error("the new topic matching the regex is not subscribed")
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		h.cg(hb{member: m, epoch: -1})
	}
	if len(cg.regexCache) != 0 {
		t.Errorf("%d regexes cached after the last member left", len(cg.regexCache))
	}
}

// BenchmarkRegexMemberJoin measures a member joining, and leaving, a group of
// 20 members that subscribe by regex over a catalog of 1,000 topics: the
// target is recomputed and every member's topics resolved each time. "long"
// is a 3 KB regex of nested stars (valid, and matching little), the kind a
// client can send to stall the coordinator's partition.
func BenchmarkRegexMemberJoin(b *testing.B) {
	topics := serviceTopics()
	for _, c := range []struct{ name, regex string }{
		{"simple", "service-00.*"},
		{"long", strings.Repeat("((((((((((a*)*)*)*)*)*)*)*)*)*)", 100) + "|service-00.*"},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, _ := newCH(b, topics)
			for i := range 20 {
				if r := h.cg(hb{member: fmt.Sprintf("m%d", i), regex: &c.regex, owned: tpset{}}); r.ErrorCode != 0 {
					b.Fatal(r.ErrorCode)
				}
			}
			b.ResetTimer()
			for range b.N {
				if r := h.cg(hb{member: "joiner", regex: &c.regex, owned: tpset{}}); r.ErrorCode != 0 {
					b.Fatal(r.ErrorCode)
				}
				h.cg(hb{member: "joiner", epoch: -1})
			}
		})
	}
}

// A regex whose matching would cost more than the shard spends itself is
// left to the runtime as a job: the heartbeat is answered at once, without
// the regex's topics, and once the result is handed back the next heartbeat
// brings them (a new group epoch and target). While a job is out no other is
// made for the regex; a catalog change makes another, the previous matches
// standing in meanwhile; a result for a regex nobody uses any more is dropped.
func TestCostlyRegexResolvedInTheBackground(t *testing.T) {
	topics := serviceTopics()
	h, cat := newCH(t, topics)
	h.holdRegex = true
	regex := costlyRegex(t, h, cat)
	partitions := func(r *kmsg.ConsumerGroupHeartbeatResponse) int {
		n := 0
		if r.Assignment != nil {
			for _, t := range r.Assignment.Topics {
				n += len(t.Partitions)
			}
		}
		return n
	}
	r := h.cg(hb{member: "m1", regex: &regex, owned: tpset{}})
	if r.ErrorCode != 0 || partitions(r) != 0 {
		t.Fatalf("join: code %d, %d partitions before the regex is resolved", r.ErrorCode, partitions(r))
	}
	if len(h.regexJobs) != 1 || h.regexJobs[0].Group != "cg" || h.regexJobs[0].Expr != regex {
		t.Fatalf("jobs after the join: %+v", h.regexJobs)
	}
	r = h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: tpset{}})
	if len(h.regexJobs) != 1 {
		t.Fatalf("%d jobs for one regex while its matching is out", len(h.regexJobs))
	}
	epoch := r.MemberEpoch
	h.resolveRegexes()
	r = h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: tpset{}})
	if r.MemberEpoch <= epoch || partitions(r) != 200 {
		t.Fatalf("after the result: epoch %d (was %d), %d partitions, want the 200 topics service-00x", r.MemberEpoch, epoch, partitions(r))
	}

	// A new matching topic: matched in the background again; the member
	// keeps its 200 partitions meanwhile.
	if _, err := cat.Create("service-001.new", 1, nil); err != nil {
		t.Fatal(err)
	}
	owned := tpset{}
	for _, tp := range r.Assignment.Topics {
		for _, p := range tp.Partitions {
			ct, _ := cat.LookupID(tp.TopicID)
			owned.add(ct.Name, p)
		}
	}
	r = h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: owned})
	if len(h.regexJobs) != 1 || r.ErrorCode != 0 {
		t.Fatalf("after a catalog change: %d jobs, code %d", len(h.regexJobs), r.ErrorCode)
	}
	if ts := h.s.Group("cg").cg.regexTopics(regex, cat); len(ts) != 200 {
		t.Fatalf("the regex gives %d topics while its new matching is out, want the previous 200", len(ts))
	}
	h.resolveRegexes()
	r = h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: owned})
	if partitions(r) != 201 {
		t.Fatalf("%d partitions after the new topic's matching, want 201", partitions(r))
	}

	// The regex's last member leaves with a matching out: its result is
	// dropped.
	if _, err := cat.Create("service-002.new", 1, nil); err != nil {
		t.Fatal(err)
	}
	h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: owned})
	if len(h.regexJobs) != 1 {
		t.Fatalf("%d jobs after the second catalog change", len(h.regexJobs))
	}
	h.cg(hb{member: "m1", epoch: -1})
	h.resolveRegexes()
	if cg := h.s.Group("cg").cg; len(cg.regexCache) != 0 || len(cg.regexes) != 0 {
		t.Errorf("the departed member's regex is still held: %d cached", len(cg.regexCache))
	}
}

// longServiceRegex matches the service-00* topics of serviceTopics with a
// long program (~2,000 instructions) that is still quick to match: the shard
// goes by the program's size alone.
func longServiceRegex() string {
	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf("zq%03dk", i)
	}
	return "service-00.*|" + strings.Join(words, "|")
}

// costlyRegex is longServiceRegex, checked to be over the shard's budget
// for synchronous matching over cat, so that h matches it in the background.
func costlyRegex(t *testing.T, h *h, cat *catalog.Catalog) string {
	t.Helper()
	regex := longServiceRegex()
	if cost := h.s.newRegexMatch(regex).size * h.s.nameBytes(cat, cat.Version()); cost <= syncRegexBudget {
		t.Fatalf("the regex costs %d, within the shard's budget %d", cost, syncRegexBudget)
	}
	return regex
}

// regexSize, the shard's estimate of a regex's matching cost per byte, stays
// near the size of the program regexp compiles.
func TestRegexSizeEstimate(t *testing.T) {
	for _, expr := range []string{
		"t-00.*", ".*(?:(?:orders)|(?:payments)).*", "(^a)|(^b)", longServiceRegex(),
		strings.Repeat("((((((((((a*)*)*)*)*)*)*)*)*)*)", 100), strings.Repeat("(.*.*.*.*)", 100),
		strings.Repeat(`[\p{L}\p{N}]{100}`, 5), "(.*){100}", "a{1000}",
	} {
		re, err := syntax.Parse("^(?:"+expr+")$", syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		re = re.Simplify()
		prog, err := syntax.Compile(re)
		if err != nil {
			t.Fatal(err)
		}
		est, got := regexSize(re), len(prog.Inst)
		if r := float64(est) / float64(got); r < 0.7 || r > 1.3 {
			t.Errorf("%.40q: estimated %d instructions, compiled %d", expr, est, got)
		}
	}
}

// TestRegexSizeBound: a regex whose repeats expand past maxRegexProgram
// instructions is refused INVALID_REGULAR_EXPRESSION before anything expands
// them (23 KB of "a{1000}" side by side parse, and compiling them took
// seconds and a gigabyte on the partition). A long regex without repeats
// (franz-go's alternation of thousands of patterns) is not refused.
// regexInsts, the estimate the bound is checked against, never falls below
// the compiled program's size, so what passes compiles to at most about its
// text's size plus the bound.
func TestRegexSizeBound(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1})
	huge := strings.Repeat("a{1000}", 3300)
	r := h.cg(hb{member: "m1", regex: &huge, owned: tpset{}})
	expectCode(t, "side-by-side repeats", r.ErrorCode, ErrInvalidRegularExpression)
	if msg := strOr(r.ErrorMessage); !strings.Contains(msg, "too large") {
		t.Fatalf("message %q does not say the regex is too large", msg)
	}
	within := strings.Repeat(`[\p{L}\p{N}]{100}`, 320)
	if r := h.cg(hb{member: "m2", regex: &within, owned: tpset{}}); r.ErrorCode != ErrNone {
		t.Fatalf("a regex within the bound: %d %s", r.ErrorCode, strOr(r.ErrorMessage))
	}
	patterns := make([]string, 5000)
	for i := range patterns {
		patterns[i] = fmt.Sprintf(`(?:svc-%06d\.events\.v1)`, i)
	}
	long := strings.Join(patterns, "|") // 135 KB, no repeats: 85k instructions, compiled in milliseconds
	if r := h.cg(hb{member: "m3", regex: &long, owned: tpset{}}); r.ErrorCode != ErrNone {
		t.Fatalf("an alternation of 5,000 patterns: %d %s", r.ErrorCode, strOr(r.ErrorMessage))
	}
	for _, expr := range []string{
		"t-00.*", ".*(?:(?:orders)|(?:payments)).*", "(a{10}b){30}", "(.*){100}", "a{1000}", "[a-z]{5,}x",
		"(?:(?:x{10}){10}){10}", strings.Repeat("(.*.*.*.*)", 3200), within,
	} {
		re, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		est := regexInsts(re, true, math.MaxInt/2)
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if regexTooLarge(re) {
			t.Errorf("%.40q: refused (estimated %d)", expr, est)
		}
		if got := len(prog.Inst) - 2; est < got { // less the program's own fail and match
			t.Errorf("%.40q: estimated %d instructions, compiled %d", expr, est, got)
		}
	}
}

// TestRegexOpenQuotation: a regex whose \Q quotation is never closed with
// \E quotes to its end, as RE2/J (Kafka) reads it: it matches the topic
// named by the quoted text. (Wrapped to match whole names, the quotation
// swallowed the wrapper's ")$", the regex failed to compile, and it matched
// nothing.)
func TestRegexOpenQuotation(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a.b": 1, "axb": 1})
	re := `\Qa.b`
	h.cg(hb{member: "m1", regex: &re, owned: tpset{}})
	if got := h.cgroup("cg").memberTopics(h.cmember("cg", "m1"), h.s.cfg.Topics); !slices.Equal(got, []string{"a.b"}) {
		t.Fatalf(`\Qa.b subscribes to %v, want [a.b]`, got)
	}
}

// BenchmarkRegexFirstJoin measures what the shard spends on a member joining
// with a regex new to the group, over a catalog of 1,000 topics: parsing it,
// and matching it when that is cheap (the costly matching is a RegexJob the
// runtime runs elsewhere; the harness holds it here). "stars" is 32 KB of
// `(.*.*.*.*)`, whose matching over these topics takes seconds; "classes",
// 5 KB of Unicode classes repeated up to the regex size bound
// (maxRegexProgram), the slowest to parse found.
func BenchmarkRegexFirstJoin(b *testing.B) {
	topics := serviceTopics()
	for _, c := range []struct{ name, regex string }{
		{"simple", "service-00.*"},
		{"stars", strings.Repeat("(.*.*.*.*)", 3200)},
		{"classes", strings.Repeat(`[\p{L}\p{N}]{100}`, 320)},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, _ := newCH(b, topics)
			h.holdRegex = true
			b.ResetTimer()
			for i := range b.N {
				regex := fmt.Sprintf("%s|x%d", c.regex, i) // new to the group each time
				m := fmt.Sprintf("m%d", i)
				if r := h.cg(hb{member: m, regex: &regex, owned: tpset{}}); r.ErrorCode != 0 {
					b.Fatal(r.ErrorCode)
				}
				b.StopTimer()
				h.cg(hb{member: m, epoch: -1})
				h.regexJobs = nil
				b.StartTimer()
			}
		})
	}
}

// mixedStable forms the mixed group "cg" on topic a (6 partitions): two
// classic members (their ids returned, with what each owns) and the
// consumer-protocol members n1 and n2, all heartbeating until the group is
// Stable with both classic members at its epoch and owning partitions.
func (h *h) mixedStable(t *testing.T) (id1, id2 string, owned map[string]tpset) {
	t.Helper()
	id1, id2, _ = h.classicStable()
	h.cgJoin("n1", "a")
	h.cgJoin("n2", "a")
	owned = map[string]tpset{id1: set("a", 0, 1, 2), id2: set("a", 3, 4, 5)}
	for round := 0; round < 4; round++ {
		for _, id := range []string{id1, id2} {
			if got, _ := h.classicRejoin(id, "c", owned[id]); got != nil {
				owned[id] = got
			}
		}
		for _, n := range []string{"n1", "n2"} {
			m := h.cmember("cg", n)
			if r := h.cg(hb{member: n, epoch: m.epoch, owned: m.assigned.clone()}); r.ErrorCode != 0 {
				t.Fatalf("round %d: %s's heartbeat: %d", round, n, r.ErrorCode)
			}
		}
		h.checkNoDoubleOwner("cg")
	}
	cg := h.cgroup("cg")
	k1, k2 := h.cmember("cg", id1).epoch, h.cmember("cg", id2).epoch
	if cg.state() != "Stable" || k1 != cg.epoch || k2 != cg.epoch || owned[id1].size() == 0 {
		t.Fatalf("setup: mixed group %s at epoch %d, classic members at %d and %d owning %v", cg.state(), cg.epoch, k1, k2, owned[id1])
	}
	return id1, id2, owned
}

// serviceTopics is a catalog of 1,000 one-partition topics named like a
// real deployment's ("service-007.events.orders-0457"); those of services
// 000-009 (200 topics) match "service-00.*".
func serviceTopics() map[string]int32 {
	topics := map[string]int32{}
	for i := range 1000 {
		topics[fmt.Sprintf("service-%03d.events.orders-%04d", i%50, i)] = 1
	}
	return topics
}

// TestKIP848DowngradeAfterTwoLeaves: two consumer-protocol members leave
// one right after the other. The first leave bumps the group epoch, and the
// classic members have not heartbeated since, so they still know the epoch
// from before both leaves; the downgrade (at the second leave) takes the
// epoch from before that one. A classic member's Heartbeat at the epoch it
// last learned is told to rejoin (REBALANCE_IN_PROGRESS), so that it rejoins
// with what it owns rather than being fenced and losing its partitions
// (found by a walkthrough with franz-go: two next-gen workers stopped
// together, the classic one reported its partitions lost). Any other
// generation is still ILLEGAL_GENERATION, and once the classic rebalance
// completes the old epoch no longer passes.
func TestKIP848DowngradeAfterTwoLeaves(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 6})
	id1, id2, owned := h.mixedStable(t)
	k1 := h.cmember("cg", id1).epoch
	h.cg(hb{member: "n1", epoch: -1})
	beforeSecond := h.cgroup("cg").epoch
	h.cg(hb{member: "n2", epoch: -1})
	g := h.s.Group("cg")
	if g.cg != nil || g.State() != PreparingRebalance || g.generation != beforeSecond || beforeSecond == k1 {
		t.Fatalf("after both leaves: consumer %v state %v generation %d (epoch before the second leave %d, classic members at %d)",
			g.cg != nil, g.State(), g.generation, beforeSecond, k1)
	}
	expectCode(t, "heartbeat at the epoch the member last learned", h.heartbeat("cg", id1, k1), ErrRebalanceInProgress)
	expectCode(t, "heartbeat at the classic group's generation", h.heartbeat("cg", id2, g.generation), ErrRebalanceInProgress)
	expectCode(t, "heartbeat at another generation", h.heartbeat("cg", id1, k1-1), ErrIllegalGeneration)
	// A commit at that epoch is not taken, and also says rejoin.
	expectCode(t, "commit at the epoch the member last learned", commitCodes(h.commit("cg", id1, k1, 9, map[string]int64{"a": 41}))[0], ErrRebalanceInProgress)
	expectCode(t, "commit at another generation", commitCodes(h.commit("cg", id1, k1-1, 9, map[string]int64{"a": 42}))[0], ErrIllegalGeneration)
	if o, _ := h.fetch("cg", "a", 0); o != -1 {
		t.Fatalf("a refused commit was taken: offset %d", o)
	}
	t1 := h.join("cg", jo{member: id1, client: "c1", protos: protos("range", string(subscription(owned[id1], "a")))})
	t2 := h.join("cg", jo{member: id2, client: "c2", protos: protos("range", string(subscription(owned[id2], "a")))})
	r1, r2 := h.joinResp(t1), h.joinResp(t2)
	expectCode(t, "rejoin", r1.ErrorCode, ErrNone)
	expectCode(t, "rejoin", r2.ErrorCode, ErrNone)
	if r1.Generation <= beforeSecond {
		t.Fatalf("classic generation %d after the downgrade at %d", r1.Generation, beforeSecond)
	}
	expectCode(t, "heartbeat at the old epoch after the rejoin", h.heartbeat("cg", id1, k1), ErrIllegalGeneration)
	expectCode(t, "commit at the old epoch after the rejoin", commitCodes(h.commit("cg", id1, k1, 9, map[string]int64{"a": 43}))[0], ErrIllegalGeneration)
	expectCode(t, "heartbeat at the new generation", h.heartbeat("cg", id1, r1.Generation), ErrNone)
	// The next rebalance does not bring the old epoch back.
	plan := map[string]string{id1: string(encodeAssignment(owned[id1], nil)), id2: string(encodeAssignment(owned[id2], nil))}
	s1 := h.sync("cg", id1, r1.Generation, plan)
	s2 := h.sync("cg", id2, r2.Generation, plan)
	expectCode(t, "sync", h.syncResp(s1).ErrorCode, ErrNone)
	expectCode(t, "sync", h.syncResp(s2).ErrorCode, ErrNone)
	h.join("cg", jo{client: "c3", protos: protos("range", string(subscription(nil, "a"))), v: 3})
	if g := h.s.Group("cg"); g.State() != PreparingRebalance {
		t.Fatalf("a third member's join: %v", g.State())
	}
	expectCode(t, "heartbeat at the old epoch in the next rebalance", h.heartbeat("cg", id1, k1), ErrIllegalGeneration)
}

// TestKIP848AdminLeaveRemovesConsumerMembers: LeaveGroup removes a
// consumer-protocol member named by member id, or by member id and its
// instance id, as Kafka does since 4.0 (KAFKA-18188: the admin client's
// "remove all members" names each member by id); the group epoch moves and
// the removed member's next heartbeat is UNKNOWN_MEMBER_ID. A member id
// that is not the instance's owner is FENCED_INSTANCE_ID, an unknown one
// UNKNOWN_MEMBER_ID, and those members stay.
func TestKIP848AdminLeaveRemovesConsumerMembers(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	r2 := h.cgJoin("m2", "a")
	inst := "i3"
	h.cg(hb{member: "m3", names: []string{"a"}, owned: tpset{}, instance: &inst})
	epoch := h.cgroup("cg").epoch

	resp := h.leave("cg", lm("m2"), lm("m1", "i3"), lm("nobody"), lm("m3", "i3"))
	want := []int16{ErrNone, ErrFencedInstanceID, ErrUnknownMemberID, ErrNone}
	for i, m := range resp.Members {
		expectCode(t, "leave of "+m.MemberID, m.ErrorCode, want[i])
	}
	cg := h.cgroup("cg")
	if _, ok := cg.members["m2"]; ok {
		t.Fatal("m2 still a member after its removal by member id")
	}
	if _, ok := cg.members["m3"]; ok {
		t.Fatal("m3 still a member after its removal by member id and instance id")
	}
	if _, ok := cg.members["m1"]; !ok {
		t.Fatal("m1 removed by a leave naming another member's instance")
	}
	if cg.epoch <= epoch {
		t.Fatalf("group epoch %d after the removals, was %d", cg.epoch, epoch)
	}
	expectCode(t, "removed member's heartbeat", h.cg(hb{member: "m2", epoch: r2.MemberEpoch}).ErrorCode, ErrUnknownMemberID)
}

// A LeaveGroup that removes members of a consumer group (an administrator's
// removal, or a classic member of a mixed group leaving) is answered only
// once the removal's records are durable, as every change of a consumer
// group is: Kafka completes the request when its records are committed, and
// a failed append fails it (a top-level error, which clients retry). cohort
// answered NONE at once, so when the write failed the caller was told the
// member had gone while the reloaded group still held it.
func TestConsumerLeaveGroupAnsweredOnceDurable(t *testing.T) {
	leave := func(h *h, v int16, members ...kmsg.LeaveGroupRequestMember) Ticket {
		tk, _ := h.leaveBatch(v, members...)
		return tk
	}

	// Durable: answered when the writes are done, each member with its
	// own answer.
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	h.cgJoin("m2", "a")
	h.hold = true
	tk := leave(h, 5, lm("m1"), lm("nobody"), lm("m2"))
	h.notAnswered(tk)
	h.release()
	r := h.resp(tk).(*kmsg.LeaveGroupResponse)
	expectCode(t, "batch removal", r.ErrorCode, ErrNone)
	for i, want := range []int16{ErrNone, ErrUnknownMemberID, ErrNone} {
		expectCode(t, "leave of "+r.Members[i].MemberID, r.Members[i].ErrorCode, want)
	}
	if re := h.reload().Group("cg"); re == nil || re.cg == nil || len(re.cg.members) != 0 {
		t.Fatal("the stored group still has members after their removal was answered")
	}

	// Failed: the write's error, and the member is still in the store.
	h, _ = newCH(t, map[string]int32{"a": 4})
	h.cgJoin("m1", "a")
	h.cgJoin("m2", "a")
	h.fail = ErrNotCoordinator
	r = h.resp(leave(h, 5, lm("m1"))).(*kmsg.LeaveGroupResponse)
	h.fail = ErrNone
	expectCode(t, "removal whose write failed", r.ErrorCode, ErrNotCoordinator)
	expectCode(t, "its member's answer", r.Members[0].ErrorCode, ErrNotCoordinator)
	if !h.s.NeedsReload() {
		t.Fatal("a failed write of applied records did not ask for a reload")
	}
	if re := h.reload().Group("cg"); re == nil || re.cg == nil || re.cg.members["m1"] == nil {
		t.Fatal("m1 missing from the stored group although its removal failed")
	}

	// A classic member of a mixed group leaving (LeaveGroup v1) waits too,
	// and gets the write's error.
	h, _ = newCH(t, map[string]int32{"a": 4})
	h.cgJoin("n1", "a")
	cid, _ := h.classicJoin("", tpset{}, "a")
	h.hold = true
	tk = leave(h, 1, lm(cid))
	h.notAnswered(tk)
	h.fail = ErrNotCoordinator
	h.release()
	expectCode(t, "classic member's leave whose write failed", h.resp(tk).(*kmsg.LeaveGroupResponse).ErrorCode, ErrNotCoordinator)
}

// TestUpgradeWhileClassicRecordInFlight: a classic group upgraded to the
// consumer protocol while its leader's metadata write is still on its way to
// the store: that record lands first, and the upgrade's tombstone must
// follow it, or a load rebuilt the classic group (with its member) beside
// the consumer group, and a later downgrade listed the member twice.
func TestUpgradeWhileClassicRecordInFlight(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	meta := string(subscription(nil, "a"))
	r1 := h.joinResp(h.newMember("cg", jo{client: "c1", protos: protos("range", meta)}))
	if r1.ErrorCode != 0 {
		t.Fatal(r1.ErrorCode)
	}
	id1 := r1.MemberID
	h.hold = true // the leader's SyncGroup write stays in flight; writes complete in order
	h.sync("cg", id1, r1.Generation, map[string]string{id1: string(encodeAssignment(set("a", 0, 1, 2, 3), []byte(meta)))})
	req := h.cgReq(hb{member: "n1", names: []string{"a"}, owned: tpset{}})
	tk := h.do(func(t Ticket, out *Output) { h.s.ConsumerGroupHeartbeat(h.now, t, Client{ID: "n1"}, req, out) })
	h.release()
	h.hold = false
	if r := h.resp(tk).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("the consumer-protocol join: %d", r.ErrorCode)
	}
	if g := h.s.Group("cg"); g.cg == nil || len(g.members) != 0 {
		t.Fatalf("live: consumer group %v, %d classic members", g.cg != nil, len(g.members))
	}
	rg := h.reload().Group("cg")
	if rg == nil || rg.cg == nil || len(rg.members) != 0 || len(rg.cg.members) != 2 {
		t.Fatalf("reloaded: consumer group %v, %d classic members, %d consumer members", rg != nil && rg.cg != nil, len(rg.members), len(rg.cg.members))
	}
}

// TestClassicMemberRevocationTimer: a classic member of a consumer group
// that must revoke is not fenced by the consumer-protocol revocation timer
// armed at its JoinGroup: it has Kafka's join and sync timers only, its
// rebalance timeout running from the first heartbeat answered
// REBALANCE_IN_PROGRESS (a slow revocation callback took its partitions 3 s
// early here).
func TestClassicMemberRevocationTimer(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	id1, id2, gen := h.classicStable()
	expectCode(t, "upgrade", h.cgJoin("n1", "a").ErrorCode, ErrNone)
	expectCode(t, "hb", h.heartbeat("cg", id1, gen), ErrRebalanceInProgress)
	if h.cgroup("cg").target[id1].size() == 2 {
		id1, id2 = id2, id1
	}
	// c1 rejoins owning what it has: it must revoke something.
	meta := string(subscription(h.cmember("cg", id1).assigned, "a"))
	jr := h.joinResp(h.join("cg", jo{member: id1, client: "c1", protos: protos("range", meta)}))
	expectCode(t, "join", jr.ErrorCode, ErrNone)
	m := h.cmember("cg", id1)
	if m.state != mUnrevoked {
		t.Fatalf("after its join the classic member is %v, want UNREVOKED_PARTITIONS", m.state)
	}
	sr := h.syncResp(h.sync("cg", id1, jr.Generation, nil))
	expectCode(t, "sync", sr.ErrorCode, ErrNone)
	// The classic client revokes (its callback takes a while) while heartbeating.
	for i := 0; i < 9; i++ {
		h.advance(3 * time.Second)
		expectCode(t, "heartbeat", h.heartbeat("cg", id1, jr.Generation), ErrRebalanceInProgress)
	}
	h.advance(3*time.Second + 500*time.Millisecond) // 30.5s after the join, 27.5s after the first RIP heartbeat
	if h.cmember("cg", id1) == nil {
		t.Fatalf("classic member removed 30.5s after its JoinGroup, 27.5s after its first REBALANCE_IN_PROGRESS heartbeat")
	}
}

// TestDowngradeProtocolVote: the downgrade to a classic group chooses the
// protocol by the classic vote (each member's first protocol all support;
// most votes win), as Kafka converts, not the first member's preference.
func TestDowngradeProtocolVote(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	meta := string(subscription(nil, "a"))
	expectCode(t, "n1", h.cgJoin("n1", "a").ErrorCode, ErrNone)
	// c1 (whose id sorts first) prefers range, the two others coop.
	for i, ps := range [][]string{{"range", meta, "coop", meta}, {"coop", meta, "range", meta}, {"coop", meta, "range", meta}} {
		jr := h.joinResp(h.join("cg", jo{client: fmt.Sprintf("c%d", i+1), protos: protos(ps...)}))
		jr = h.joinResp(h.join("cg", jo{member: jr.MemberID, client: fmt.Sprintf("c%d", i+1), protos: protos(ps...)}))
		expectCode(t, "classic join", jr.ErrorCode, ErrNone)
	}
	h.cg(hb{member: "n1", epoch: -1})
	g := h.s.Group("cg")
	if g.cg != nil {
		t.Fatal("not downgraded")
	}
	if g.protocol != "coop" || g.selectProtocol() != "coop" {
		t.Fatalf("downgrade selected %q (a vote now: %q); want coop, two votes against one", g.protocol, g.selectProtocol())
	}
}

// TestKIP848LaggingCommitSkipsOversizedMetadata: a commit at an older member
// epoch is checked partition by partition (KIP-1251), and, as in Kafka 4.3,
// a partition whose metadata is too large is answered
// OFFSET_METADATA_TOO_LARGE before that check: it does not fail the whole
// request as STALE_MEMBER_EPOCH, and the partitions the member may still
// commit at that epoch are committed.
func TestKIP848LaggingCommitSkipsOversizedMetadata(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	e1 := h.cgJoin("m1", "a").MemberEpoch
	h.cgJoin("m2", "a")
	h.cg(hb{member: "m1", epoch: e1, owned: set("a", 0, 1, 2, 3)})
	kept := h.cmember("cg", "m1").assigned.clone()
	h.cg(hb{member: "m1", epoch: e1, owned: kept})
	if h.cmember("cg", "m1").epoch <= e1 {
		t.Fatal("m1 did not advance")
	}
	keptP, movedP := kept["a"][0], int32(-1)
	for p := int32(0); p < 4; p++ {
		if !kept.has("a", p) {
			movedP = p
		}
	}
	big := strings.Repeat("x", 4097)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "cg", "m1", e1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "a"
	for _, p := range []int32{keptP, movedP} {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 7
		if p == movedP {
			rp.Metadata = &big // moved away, and too large
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	tk := h.do(func(t Ticket, out *Output) { h.s.OffsetCommit(h.now, t, req, out) })
	ps := h.resp(tk).(*kmsg.OffsetCommitResponse).Topics[0].Partitions
	if ps[0].ErrorCode != ErrNone || ps[1].ErrorCode != ErrOffsetMetadataTooLarge {
		t.Fatalf("kept partition answered %d (want 0), moved one with too large metadata %d (want %d)",
			ps[0].ErrorCode, ps[1].ErrorCode, ErrOffsetMetadataTooLarge)
	}
	if !h.s.Group("cg").hasOffset(topicPartition{"a", keptP}) {
		t.Fatal("the kept partition's offset was not committed")
	}
}

// TestKIP848DowngradeSurvivesReload: the downgrade of a mixed group (its
// last consumer-protocol member left) prepares a classic rebalance, so that
// the classic members rejoin and the departed members' partitions are
// given out again. That rebalance lives in memory only; a restart (or a
// failover) right after the downgrade loaded the classic group Stable with
// the converted assignment, the classic members' heartbeats were answered
// NONE, nobody rejoined, and the partitions of the members that left stayed
// unassigned until the membership changed again (found by
// TestKIP848UpgradeNodeRestart in clients: two of six partitions unowned
// for the rest of the run). The converted record now says a rebalance is
// pending, and the load starts it.
func TestKIP848DowngradeSurvivesReload(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 6})
	id1, id2, _ := h.mixedStable(t)
	h.cg(hb{member: "n1", epoch: -1})
	h.cg(hb{member: "n2", epoch: -1})
	if g := h.s.Group("cg"); g.cg != nil || g.State() != PreparingRebalance {
		t.Fatalf("after the leaves: consumer %v, state %v", g.cg != nil, g.State())
	}
	h.adopt() // the node restarts
	g := h.s.Group("cg")
	if g.State() != PreparingRebalance {
		t.Fatalf("after a reload the downgraded group is %v, want PreparingRebalance (its members must rejoin)", g.State())
	}
	for _, id := range []string{id1, id2} {
		expectCode(t, "heartbeat after the reload", h.heartbeat("cg", id, g.generation), ErrRebalanceInProgress)
	}
	// The rebalance completes, and the next reload is an ordinary one.
	owned := map[string]tpset{id1: set("a", 0, 1, 2), id2: set("a", 3, 4, 5)}
	t1 := h.join("cg", jo{member: id1, client: "c1", protos: protos("range", string(subscription(nil, "a")))})
	t2 := h.join("cg", jo{member: id2, client: "c2", protos: protos("range", string(subscription(nil, "a")))})
	r1, r2 := h.joinResp(t1), h.joinResp(t2)
	expectCode(t, "rejoin", r1.ErrorCode, ErrNone)
	expectCode(t, "rejoin", r2.ErrorCode, ErrNone)
	plan := map[string]string{id1: string(encodeAssignment(owned[id1], nil)), id2: string(encodeAssignment(owned[id2], nil))}
	expectCode(t, "sync", h.syncResp(h.sync("cg", id1, r1.Generation, plan)).ErrorCode, ErrNone)
	expectCode(t, "sync", h.syncResp(h.sync("cg", id2, r2.Generation, plan)).ErrorCode, ErrNone)
	h.adopt()
	if g := h.s.Group("cg"); g.State() != Stable {
		t.Fatalf("reloaded after the classic rebalance completed: %v, want Stable", g.State())
	}
}
