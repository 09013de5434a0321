package group

// Conformance tests for LeaveGroup, ListGroups, DescribeGroups, DeleteGroups
// and OffsetDelete (66–71), offsets (72–76 and 79; 77–78 are transactional
// offsets, which cohort does not serve: it has no transaction coordinator)
// and loading (80), numbered as in docs/group-semantics.md §tests, whose
// sections name the tests that show each rule. Offset commit fencing (72–75)
// and durability are scenario files in testdata/.

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestC66_LeaveGroupUnknownGroupAndDeadGroup(t *testing.T) {
	h := newH(t)
	r := h.leave("nope", lm("m"))
	if r.ErrorCode != 0 || r.Members[0].ErrorCode != ErrUnknownMemberID {
		t.Fatalf("%+v", r)
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group, req.MemberID = 0, "nope", "m"
	h.wantCode(h.do(func(t Ticket, out *Output) { h.s.LeaveGroup(h.now, t, req, out) }), ErrUnknownMemberID)
	ids, _ := h.stableGroup("g", 1)
	h.s.Group("g").state = Dead
	if r := h.leave("g", lm(ids[0])); r.ErrorCode != ErrCoordinatorNotAvailable || len(r.Members) != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestC69_ListGroupsAndDescribeGroups(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	h.commit("simple", "", -1, 9, map[string]int64{"t": 5})
	all := h.s.ListGroups(&kmsg.ListGroupsRequest{})
	if len(all) != 2 || all[0].Group != "g" || all[0].GroupState != "Stable" || all[0].ProtocolType != "consumer" ||
		all[1].Group != "simple" || all[1].ProtocolType != "" || all[1].GroupState != "Empty" || all[0].GroupType != "classic" {
		t.Fatalf("%+v", all)
	}
	if l := h.s.ListGroups(&kmsg.ListGroupsRequest{StatesFilter: []string{"empty"}}); len(l) != 1 || l[0].Group != "simple" {
		t.Fatalf("state filter %+v", l)
	}
	if l := h.s.ListGroups(&kmsg.ListGroupsRequest{TypesFilter: []string{"consumer"}}); len(l) != 0 {
		t.Fatalf("type filter %+v", l)
	}
	d := h.s.DescribeGroup("g", 5, false)
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 2 || string(d.Members[0].MemberAssignment) != "a-"+d.Members[0].MemberID ||
		d.Members[0].ClientHost != "/127.0.0.1" || string(d.Members[0].ProtocolMetadata) != "m" {
		t.Fatalf("%+v", d)
	}
	h.join("g", jo{member: ids[0]}) // rebalancing: no protocol, no metadata, the assignment still held
	d = h.s.DescribeGroup("g", 5, true)
	if d.State != "PreparingRebalance" || d.Protocol != "" || len(d.Members[0].ProtocolMetadata) != 0 ||
		string(d.Members[0].MemberAssignment) != "a-"+d.Members[0].MemberID || d.AuthorizedOperations == -2147483648 {
		t.Fatalf("%+v", d)
	}
	if d := h.s.DescribeGroup("missing", 5, false); d.State != "Dead" || d.ErrorCode != 0 {
		t.Fatalf("%+v", d)
	}
	if d := h.s.DescribeGroup("missing", 6, false); d.ErrorCode != ErrGroupIDNotFound || d.ErrorMessage == nil {
		t.Fatalf("%+v", d)
	}
}

func (h *h) deleteGroups(ids ...string) *kmsg.DeleteGroupsResponse {
	return h.deleteGroupsAt(2, ids...)
}

func (h *h) deleteGroupsAt(v int16, ids ...string) *kmsg.DeleteGroupsResponse {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = v
	req.Groups = ids
	tk := h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
	return h.resp(tk).(*kmsg.DeleteGroupsResponse)
}

// DeleteGroups v3 answers each refused group with a message that says
// why; a deleted group has none, and v2 (which cannot carry one) gets none.
func TestDeleteGroupsV3Messages(t *testing.T) {
	h := newH(t)
	h.stableGroup("busy", 1)
	h.commit("idle", "", -1, 9, map[string]int64{"t": 5})
	r := h.deleteGroupsAt(3, "busy", "idle", "missing")
	want := []struct {
		code int16
		msg  string // "": no message
	}{
		{ErrNonEmptyGroup, `group "busy" is Stable with 1 member: only a group without members can be deleted`},
		{ErrNone, ""},
		{ErrGroupIDNotFound, `group "missing" does not exist`},
	}
	for i, w := range want {
		g := r.Groups[i]
		got := ""
		if g.ErrorMessage != nil {
			got = *g.ErrorMessage
		}
		if g.ErrorCode != w.code || got != w.msg {
			t.Errorf("%s: code %d message %q, want %d %q", g.Group, g.ErrorCode, got, w.code, w.msg)
		}
	}
	for _, g := range h.deleteGroupsAt(2, "busy", "missing").Groups {
		if g.ErrorCode == ErrNone || g.ErrorMessage != nil {
			t.Errorf("v2 %s: code %d message %v, want an error without message", g.Group, g.ErrorCode, g.ErrorMessage)
		}
	}
}

func TestC70_DeleteGroups(t *testing.T) {
	h := newH(t)
	h.stableGroup("busy", 1)
	h.commit("idle", "", -1, 9, map[string]int64{"t": 5})
	r := h.deleteGroups("busy", "idle", "missing")
	want := []int16{ErrNonEmptyGroup, ErrNone, ErrGroupIDNotFound}
	for i, w := range want {
		if r.Groups[i].ErrorCode != w {
			t.Fatalf("%s: %d want %d", r.Groups[i].Group, r.Groups[i].ErrorCode, w)
		}
	}
	if o, _ := h.fetch("idle", "t", 0); o != -1 {
		t.Fatal("offsets survived delete")
	}
	if d := h.s.DescribeGroup("idle", 5, false); d.State != "Dead" {
		t.Fatal(d.State)
	}
	for k := range h.store {
		if bytes.Contains([]byte(k), []byte("idle")) {
			t.Fatal("tombstones not written")
		}
	}
}

func (h *h) offsetDelete(group string, topics map[string][]int32) *kmsg.OffsetDeleteResponse {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	for tp, ps := range topics {
		rt := kmsg.OffsetDeleteRequestTopic{Topic: tp}
		for _, p := range ps {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
		}
		req.Topics = append(req.Topics, rt)
	}
	tk := h.do(func(t Ticket, out *Output) { h.s.OffsetDelete(h.now, t, req, out) })
	return h.resp(tk).(*kmsg.OffsetDeleteResponse)
}

// consumerMeta encodes a ConsumerProtocol subscription to topics.
func consumerMeta(topics ...string) string {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return string(m.AppendTo(nil))
}

func TestC71_OffsetDelete(t *testing.T) {
	h := newH(t)
	if r := h.offsetDelete("missing", map[string][]int32{"t": {0}}); r.ErrorCode != ErrGroupIDNotFound {
		t.Fatal(r.ErrorCode)
	}
	// Non-consumer group with members → 68.
	rc := h.joinResp(h.newMember("conn", jo{ptype: "connect"}))
	_ = rc
	if r := h.offsetDelete("conn", map[string][]int32{"t": {0}}); r.ErrorCode != ErrNonEmptyGroup {
		t.Fatal(r.ErrorCode)
	}
	// Stable consumer group subscribed to "sub": sub → 86, other deleted.
	r := h.joinResp(h.newMember("cg", jo{protos: protos("range", consumerMeta("sub"))}))
	h.syncAll("cg", r.LeaderID, []string{r.MemberID}, r.Generation)
	h.commit("cg", r.MemberID, r.Generation, 9, map[string]int64{"sub": 1, "other": 2})
	d := h.offsetDelete("cg", map[string][]int32{"sub": {0}, "other": {0}})
	for _, tp := range d.Topics {
		want := ErrNone
		if tp.Topic == "sub" {
			want = ErrGroupSubscribedToTopic
		}
		if tp.Partitions[0].ErrorCode != want {
			t.Fatalf("%s: %d", tp.Topic, tp.Partitions[0].ErrorCode)
		}
	}
	if o, _ := h.fetch("cg", "other", 0); o != -1 {
		t.Fatal("other not deleted")
	}
	if o, _ := h.fetch("cg", "sub", 0); o != 1 {
		t.Fatal("sub deleted")
	}
	// Unparsable subscription: everything counts as subscribed.
	r2 := h.joinResp(h.newMember("bad", jo{protos: protos("range", "x")}))
	h.syncAll("bad", r2.LeaderID, []string{r2.MemberID}, r2.Generation)
	h.commit("bad", r2.MemberID, r2.Generation, 9, map[string]int64{"t": 1})
	if d := h.offsetDelete("bad", map[string][]int32{"t": {0}}); d.Topics[0].Partitions[0].ErrorCode != ErrGroupSubscribedToTopic {
		t.Fatal("unparsable subscription should protect all topics")
	}
	// A subscription of a negative version is one Kafka refuses to read
	// (no such version), so it is unknown too: "t" is protected although
	// the topic list that follows names only "a".
	neg := []byte(consumerMeta("a"))
	neg[0], neg[1] = 0xff, 0xff // version -1
	r3 := h.joinResp(h.newMember("negver", jo{protos: protos("range", string(neg))}))
	h.syncAll("negver", r3.LeaderID, []string{r3.MemberID}, r3.Generation)
	h.commit("negver", r3.MemberID, r3.Generation, 9, map[string]int64{"t": 1})
	if d := h.offsetDelete("negver", map[string][]int32{"t": {0}}); d.Topics[0].Partitions[0].ErrorCode != ErrGroupSubscribedToTopic {
		t.Fatalf("subscription of version -1: OffsetDelete of an unlisted topic got error %d, want %d (unknown subscription protects every topic)",
			d.Topics[0].Partitions[0].ErrorCode, ErrGroupSubscribedToTopic)
	}
}

func TestC76_CommitAndFetchOffsetsWithEmptyGroupID(t *testing.T) {
	h := newH(t)
	if c := commitCodes(h.commit("", "", -1, 9, map[string]int64{"t": 3})); c[0] != 0 {
		t.Fatal(c)
	}
	if o, c := h.fetch("", "t", 0); o != 3 || c != 0 {
		t.Fatal(o, c)
	}
	if d := h.s.DescribeGroup("", 5, false); d.State != "Empty" {
		t.Fatal(d.State)
	}
	if r := h.deleteGroups(""); r.Groups[0].ErrorCode != 0 {
		t.Fatal(r.Groups[0].ErrorCode)
	}
}

func TestC79_OffsetMetadataTooLarge(t *testing.T) {
	h := newH(t)
	big := string(make([]byte, 4097))
	req := commitReq("g", "", -1)
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.Metadata = 1, 9, &big
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p)
	c := commitCodes(h.commitReq(req))
	if c[0] != 0 || c[1] != ErrOffsetMetadataTooLarge {
		t.Fatal(c)
	}
	if o, _ := h.fetch("g", "t", 0); o != 1 {
		t.Fatal("valid partition not committed")
	}
	if o, _ := h.fetch("g", "t", 1); o != -1 {
		t.Fatal("oversized partition committed")
	}
	// A failed write gives its error to the partitions written, and the
	// refused one keeps its own.
	h.fail = ErrCoordinatorNotAvailable
	c = commitCodes(h.commitReq(req))
	h.fail = ErrNone
	if c[0] != ErrCoordinatorNotAvailable || c[1] != ErrOffsetMetadataTooLarge {
		t.Fatal(c)
	}
}

func TestOffsetFetchAllTopicsMultiGroupAndRequireStable(t *testing.T) {
	h := newH(t)
	h.commit("a", "", -1, 9, map[string]int64{"x": 1, "y": 2})
	h.commit("b", "", -1, 9, map[string]int64{"z": 3})
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "a"}, {Group: "b", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "z", Partitions: []int32{0, 1}}}}, {Group: "none"}}
	r := h.s.OffsetFetch(req)
	if len(r.Groups) != 3 || len(r.Groups[0].Topics) != 2 || r.Groups[0].Topics[1].Partitions[0].Offset != 2 ||
		r.Groups[1].Topics[0].Partitions[0].Offset != 3 || r.Groups[1].Topics[0].Partitions[1].Offset != -1 || len(r.Groups[2].Topics) != 0 {
		t.Fatalf("%+v", r)
	}
	// RequireStable: a fetch of a group with a commit in flight waits for
	// it and answers what it wrote (Kafka 4.x); without, the durable value.
	h.hold = true
	h.commit2("a", "x", 10)
	req = kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, "a", true
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "x", Partitions: []int32{0}}}
	stable := h.do(func(t Ticket, out *Output) { h.s.ServeOffsetFetch(t, req, out) })
	h.notAnswered(stable)
	plain := *req
	plain.RequireStable = false
	if p := h.s.OffsetFetch(&plain).Topics[0].Partitions[0]; p.Offset != 1 {
		t.Fatal("uncommitted offset visible")
	}
	h.release()
	if p := h.resp(stable).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 10 {
		t.Fatalf("stable fetch after the commit: %+v", p)
	}
	if p := h.s.OffsetFetch(&plain).Topics[0].Partitions[0]; p.Offset != 10 {
		t.Fatal(p.Offset)
	}
}

func (h *h) commit2(group, topic string, off int64) Ticket {
	req := commitReq(group, "", -1)
	req.Topics[0].Topic = topic
	req.Topics[0].Partitions[0].Offset = off
	return h.do(func(t Ticket, out *Output) { h.s.OffsetCommit(h.now, t, req, out) })
}

func TestOffsetRetentionAndEmptyGroupExpiry(t *testing.T) {
	h := newH(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	// Simple group: offsets expire an hour after commit, then the group goes.
	h.commit("simple", "", -1, 9, map[string]int64{"t": 1})
	// Consumer group, Stable, subscribed to "sub": only "other" expires.
	h.session = 600_000
	r := h.joinResp(h.newMember("cg", jo{protos: protos("range", consumerMeta("sub"))}))
	h.syncAll("cg", r.LeaderID, []string{r.MemberID}, r.Generation)
	h.commit("cg", r.MemberID, r.Generation, 9, map[string]int64{"sub": 1, "other": 2})
	for i := 0; i < 8; i++ { // keep the member alive for 72 min
		h.advance(9 * time.Minute)
		if c := h.heartbeat("cg", r.MemberID, r.Generation); c != 0 {
			t.Fatal(c)
		}
	}
	expire := func() {
		h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) })
	}
	expire()
	if h.s.Group("simple") != nil {
		t.Fatal("expired simple group kept")
	}
	if o, _ := h.fetch("cg", "other", 0); o != -1 {
		t.Fatal("unsubscribed offset kept")
	}
	if o, _ := h.fetch("cg", "sub", 0); o != 1 {
		t.Fatal("subscribed offset expired")
	}
	// Once the group is Empty the clock starts at the transition.
	h.leave("cg", lm(r.MemberID))
	h.advance(59 * time.Minute)
	expire()
	if o, _ := h.fetch("cg", "sub", 0); o != 1 {
		t.Fatal("expired before retention after emptying")
	}
	h.advance(time.Minute)
	expire()
	if h.s.Group("cg") != nil {
		t.Fatal("empty group without offsets kept")
	}
	if len(h.store) != 0 {
		t.Fatalf("store not cleaned: %d keys", len(h.store))
	}
}

// TestRecipeGroupKeptForRetention: an Empty group of cohort's recipes
// (protocol type election or workers) without offsets stays for the offsets
// retention after it emptied, as a group with offsets does, so that its
// generation, the recipes' fencing token, keeps growing across a stop of
// every process shorter than that; removed at the next check, as a consumer
// group is, the next member started again at generation 1 and every write
// of it was refused as stale.
func TestRecipeGroupKeptForRetention(t *testing.T) {
	h := newH(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	expire := func() { h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) }) }
	gens := map[string]int32{}
	for _, ptype := range []string{"election", "workers", "consumer"} {
		id := ptype + "-group"
		r := h.joinResp(h.newMember(id, jo{ptype: ptype, protos: protos("range", "m")}))
		h.syncAllType(id, ptype, r.LeaderID, []string{r.MemberID}, r.Generation)
		h.leave(id, lm(r.MemberID))
		gens[id] = r.Generation
	}
	h.advance(10 * time.Minute)
	h.s = h.reload() // kept across a restart too: the time it emptied is stored
	expire()
	if h.s.Group("consumer-group") != nil {
		t.Fatal("an Empty consumer group without offsets kept past the check")
	}
	for _, id := range []string{"election-group", "workers-group"} {
		if h.s.Group(id) == nil {
			t.Fatalf("%s removed 10 minutes after it emptied", id)
		}
		r := h.joinResp(h.newMember(id, jo{ptype: strings.TrimSuffix(id, "-group"), protos: protos("p", "m")}))
		if r.Generation <= gens[id] {
			t.Fatalf("%s: generation %d after a stop, not above %d", id, r.Generation, gens[id])
		}
		h.leave(id, lm(r.MemberID))
	}
	h.advance(time.Hour)
	expire()
	for _, id := range []string{"election-group", "workers-group"} {
		if h.s.Group(id) != nil {
			t.Fatalf("%s kept past the retention", id)
		}
	}
}

func TestC80_LoadRestoresGroupsAndOffsets(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	h.commit("g", ids[0], gen, 9, map[string]int64{"t": 42})
	h.commit("simple", "", -1, 9, map[string]int64{"u": 7})
	h.commit("gone", "", -1, 9, map[string]int64{"u": 7})
	h.deleteGroups("gone")

	// A fresh shard loads the store (any order; unknown key kinds skipped).
	h2 := newH(t)
	h2.store = h.store
	h2.now = h.now.Add(time.Second)
	if err := h2.s.Load([]byte{0x7f, 'x'}, []byte("future record kind")); err != nil {
		t.Fatal(err)
	}
	for k, v := range h.store {
		if err := h2.s.Load([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	h2.do(func(_ Ticket, out *Output) { h2.s.FinishLoad(h2.now, out) })
	g := h2.s.Group("g")
	if g == nil || g.State() != Stable || g.Generation() != gen || g.Leader() != ids[0] || len(g.MemberIDs()) != 2 {
		t.Fatalf("loaded %+v", g)
	}
	if a, _ := g.Assignment(ids[1]); string(a) != "a-"+ids[1] {
		t.Fatal("assignment lost")
	}
	if o, _ := h2.fetch("g", "t", 0); o != 42 {
		t.Fatal(o)
	}
	if o, _ := h2.fetch("simple", "u", 0); o != 7 {
		t.Fatal(o)
	}
	if h2.s.Group("gone") != nil {
		t.Fatal("deleted group came back")
	}
	// Live follower keeps its generation with unchanged metadata (only the
	// selected protocol is known after a load) ...
	h2.advance(5 * time.Second)
	if c := h2.heartbeat("g", ids[1], gen); c != 0 {
		t.Fatal(c)
	}
	if r := h2.joinResp(h2.join("g", jo{member: ids[1]})); r.Generation != gen {
		t.Fatalf("follower lost its generation: %+v", r)
	}
	// ... and the leader, which does not heartbeat, is evicted.
	h2.advance(6 * time.Second)
	if g.memberByID(ids[0]) != nil || g.State() != PreparingRebalance {
		t.Fatalf("dead member kept: %v %v", g.MemberIDs(), g.State())
	}
	// Corrupt values are errors, not panics.
	for k, v := range h.store {
		for cut := 0; cut < len(v); cut += 3 {
			_ = newH(t).s.Load([]byte(k), v[:cut])
		}
	}
	if err := newH(t).s.Load(groupKey("x"), []byte{0, 0, 5}); err == nil {
		t.Fatal("truncated group value accepted")
	}
}

// A group deleted while a commit to it is still being written must not come
// back from the store.
func TestDeleteGroupWithCommitInFlight(t *testing.T) {
	h := newH(t)
	h.commit("g", "", -1, 9, map[string]int64{"a": 1})
	h.hold = true
	tc := h.commit2("g", "b", 2) // in flight
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	td := h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
	h.release()
	h.resp(tc)
	if r := h.resp(td).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != 0 {
		t.Fatal(r.Groups[0].ErrorCode)
	}
	if len(h.store) != 0 {
		t.Fatalf("store still holds %d keys of the deleted group", len(h.store))
	}
}

// TestDeleteTopicOffsets: a topic deleted from the catalog loses its
// committed offsets in every group (simple, Stable and subscribed to it,
// Empty), including one being committed at that moment; other topics'
// offsets and the groups themselves stay, and the removal is durable.
func TestDeleteTopicOffsets(t *testing.T) {
	h := newH(t)
	h.commit("simple", "", -1, 9, map[string]int64{"gone": 1, "kept": 2})
	h.session = 600_000
	r := h.joinResp(h.newMember("cg", jo{protos: protos("range", consumerMeta("gone", "kept"))}))
	h.syncAll("cg", r.LeaderID, []string{r.MemberID}, r.Generation)
	h.commit("cg", r.MemberID, r.Generation, 9, map[string]int64{"gone": 3, "kept": 4})
	h.commit("empty", "", -1, 9, map[string]int64{"gone": 5})
	h.hold = true
	tc := h.commit2("pending", "gone", 6) // in flight when the topic goes
	h.do(func(_ Ticket, out *Output) { h.s.DeleteTopicOffsets([]string{"gone"}, out) })
	h.release()
	h.resp(tc)
	for _, g := range []string{"simple", "cg", "empty", "pending"} {
		if o, _ := h.fetch(g, "gone", 0); o != -1 {
			t.Errorf("%s: offset %d of the deleted topic kept", g, o)
		}
	}
	if o, _ := h.fetch("simple", "kept", 0); o != 2 {
		t.Errorf("simple: kept's offset %d, want 2", o)
	}
	if o, _ := h.fetch("cg", "kept", 0); o != 4 {
		t.Errorf("cg: kept's offset %d, want 4", o)
	}
	if g := h.s.Group("cg"); g == nil || g.State() != Stable {
		t.Errorf("cg after the deletion: %v", g)
	}
	if h.s.Group("empty") == nil {
		t.Error("a group without offsets left was removed at once")
	}
	for k := range h.store {
		if strings.Contains(k, "gone") {
			t.Errorf("store still holds %q", k)
		}
	}
}

// A commit of one partition keeps its response and records in one
// allocation with an inline encoding buffer (oneOffsetCommit); a record
// longer than that buffer, a failed write and a write the shard forgets
// (release) must behave as on the general path.
func TestOneOffsetCommitPaths(t *testing.T) {
	h := newH(t)
	long := strings.Repeat("m", 2*oneCommitBytes)
	g := "group-" + strings.Repeat("g", oneCommitBytes)
	if c := commitCodes(h.commit(g, "", -1, 8, map[string]int64{"t": 41}, long)); c[0] != ErrNone {
		t.Fatal(c)
	}
	if c := commitCodes(h.commit("short", "", -1, 8, map[string]int64{"t": 7}, "m")); c[0] != ErrNone {
		t.Fatal(c)
	}
	if o, _ := h.fetch(g, "t", 0); o != 41 {
		t.Fatalf("long commit: offset %d, want 41", o)
	}
	if o, _ := h.fetch("short", "t", 0); o != 7 {
		t.Fatalf("short commit: offset %d, want 7", o)
	}
	if diff := h.checkReload(); diff != "" {
		t.Fatal(diff)
	}
	if got := h.reload(); got != nil {
		// The stored record decodes to the committed offset and metadata.
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version, r.Group = 7, g
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		p := got.OffsetFetch(r).Topics[0].Partitions[0]
		if p.Offset != 41 || p.Metadata == nil || *p.Metadata != long {
			t.Fatalf("reloaded: offset %d, metadata of %d bytes", p.Offset, len(strOr(p.Metadata)))
		}
	}

	h.fail = ErrCoordinatorNotAvailable
	if c := commitCodes(h.commit("short", "", -1, 8, map[string]int64{"t": 8})); c[0] != ErrCoordinatorNotAvailable {
		t.Fatal(c)
	}
	h.fail = ErrNone
	if o, _ := h.fetch("short", "t", 0); o != 7 {
		t.Fatalf("failed commit changed the offset to %d", o)
	}

	h.hold = true
	tk := h.do(func(tk Ticket, out *Output) { h.s.OffsetCommit(h.now, tk, commitReq("short", "", -1), out) })
	h.notAnswered(tk)
	var out Output
	h.s.Unload(h.now, &out)
	h.held = nil
	h.settle(&out)
	if c := commitCodes(h.resp(tk).(*kmsg.OffsetCommitResponse)); c[0] != ErrNotCoordinator {
		t.Fatalf("unloaded while written: %v", c)
	}
}

// An offset committed with an explicit retention time (OffsetCommit v2–v4)
// expires at its own time instead of after the configured retention, but
// only where the group's state lets offsets expire at all, as in Kafka: not
// a topic the Stable consumer group subscribes to, nothing while the group
// rebalances. A retention too long to add to the clock never expires the
// offset (Kafka's sum would wrap and expire it at once).
func TestExplicitRetentionTime(t *testing.T) {
	h := newH(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	commitV2 := func(group, member string, gen int32, retentionMs int64, topics ...string) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 2
		req.Group, req.MemberID, req.Generation, req.RetentionTimeMillis = group, member, gen, retentionMs
		for _, tp := range topics {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = tp
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Offset = 5
			rt.Partitions = append(rt.Partitions, p)
			req.Topics = append(req.Topics, rt)
		}
		if codes := commitCodes(h.commitReq(req)); slices.ContainsFunc(codes, func(c int16) bool { return c != 0 }) {
			t.Fatalf("commit to %s: %v", group, codes)
		}
	}
	expire := func() { h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) }) }
	kept := func(group, topic string) bool { o, _ := h.fetch(group, topic, 0); return o == 5 }

	h.session = 600_000
	r := h.joinResp(h.newMember("cg", jo{protos: protos("range", consumerMeta("sub"))}))
	h.syncAll("cg", r.LeaderID, []string{r.MemberID}, r.Generation)
	commitV2("cg", r.MemberID, r.Generation, time.Minute.Milliseconds(), "sub", "other")
	commitV2("simple", "", -1, time.Minute.Milliseconds(), "t")
	commitV2("forever", "", -1, math.MaxInt64, "t")
	commitV2("long", "", -1, (48 * time.Hour).Milliseconds(), "t")

	h.advance(59 * time.Second)
	expire()
	if !kept("simple", "t") || !kept("cg", "other") {
		t.Fatal("an offset expired before its own retention time")
	}
	h.advance(time.Second)
	if c := h.heartbeat("cg", r.MemberID, r.Generation); c != 0 {
		t.Fatal(c)
	}
	expire()
	if kept("simple", "t") || kept("cg", "other") {
		t.Error("an offset outlived its own retention time (one minute)")
	}
	if !kept("cg", "sub") {
		t.Error("the Stable group's subscribed topic expired by its commit's retention time")
	}

	// A group rebalancing keeps every offset, whatever their expiry.
	commitV2("cg", r.MemberID, r.Generation, time.Minute.Milliseconds(), "other")
	h.join("cg", jo{member: r.MemberID, rebalance: 600_000, protos: protos("range", consumerMeta("sub", "other"))})
	h.advance(2 * time.Minute)
	if g := h.s.Group("cg"); g == nil || g.State() != CompletingRebalance { // its only member has rejoined
		t.Fatal("cg is not rebalancing")
	}
	expire()
	if !kept("cg", "other") || !kept("cg", "sub") {
		t.Error("a rebalancing group's offset expired")
	}

	h.advance(2 * time.Hour) // past the configured retention, before the explicit 48 h
	expire()
	if !kept("long", "t") {
		t.Error("an offset with a 48-hour retention time expired after the configured hour")
	}
	h.advance(46 * time.Hour)
	expire()
	if kept("long", "t") {
		t.Error("an offset outlived its 48-hour retention time")
	}
	h.advance(100 * 365 * 24 * time.Hour)
	expire()
	if !kept("forever", "t") {
		t.Error("an offset committed with the longest retention time expired")
	}
}

// TestOffsetDeleteWithCommitInFlight: an OffsetDelete of a partition whose
// first commit is still being written deletes it (Kafka reads its latest
// state, where the commit counts): answered NONE, the offset must not come
// back when the commit lands, nor at the next load.
func TestOffsetDeleteWithCommitInFlight(t *testing.T) {
	h := newH(t)
	h.commit("g", "", -1, 9, map[string]int64{"other": 1}) // a simple group, Empty
	h.hold = true
	tc := h.commit2("g", "t", 42) // no durable offset of t/0 yet
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	td := h.do(func(tk Ticket, out *Output) { h.s.OffsetDelete(h.now, tk, req, out) })
	h.release()
	h.resp(tc)
	r := h.resp(td).(*kmsg.OffsetDeleteResponse)
	if r.ErrorCode != ErrNone || r.Topics[0].Partitions[0].ErrorCode != ErrNone {
		t.Fatalf("OffsetDelete: %d / %d", r.ErrorCode, r.Topics[0].Partitions[0].ErrorCode)
	}
	if o, _ := h.fetch("g", "t", 0); o != -1 {
		t.Errorf("t/0 reads %d after the delete, want -1", o)
	}
	if o, ok := h.reload().groups["g"].offsets.get(topicPartition{"t", 0}); ok {
		t.Errorf("the reloaded shard has t/0=%d", o.offset)
	}
	if o, _ := h.fetch("g", "other", 0); o != 1 {
		t.Errorf("other/0 reads %d, want 1 (not deleted)", o)
	}
}
