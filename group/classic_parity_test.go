package group

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Classic-group behaviours checked against Kafka's group coordinator in an
// audit (2026-12-03). A test whose comment says what cohort did before shows
// a behaviour that was wrong; those after "Rules the audit found no test
// for" hold rules that were right but untested.

// A static member added during a rebalance (still new) that restarts before
// the join phase closes is replaced; the replacement is not a new member, so
// while it waits in JoinGroup it counts as alive until the phase closes, as
// in Kafka. (cohort evicted it at its session timeout.)
func TestReplacedNewStaticMemberSurvivesParked(t *testing.T) {
	h := newH(t)
	ids, gen := h.staticGroup(2)         // a (leader), b; Stable gen 1
	c1 := h.join("g", jo{instance: "c"}) // new static member: rebalance
	h.notAnswered(c1)
	h.advance(time.Second)
	c2 := h.join("g", jo{instance: "c"}) // c restarts: replacement in PreparingRebalance
	h.wantCode(c1, ErrFencedInstanceID)
	// a and b stay alive by heartbeating but do not rejoin for 20s.
	for i := 0; i < 5; i++ {
		h.advance(4 * time.Second)
		h.heartbeat("g", ids["a"], gen, "a")
		h.heartbeat("g", ids["b"], gen, "b")
	}
	if h.answered(c2) {
		t.Fatalf("replaced member's parked JoinGroup answered before the barrier closed: %+v", h.joinResp(c2))
	}
}

// An Empty group's offsets expire a retention period after the group became
// Empty. A DeleteGroups whose write fails leaves the group as it was (Kafka
// changes nothing until the tombstones are durable): the retention clock does
// not restart. (cohort restarted it.)
func TestFailedDeleteKeepsRetentionClock(t *testing.T) {
	h := newH(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	r := h.joinResp(h.newMember("cg", jo{}))
	h.syncAll("cg", r.LeaderID, []string{r.MemberID}, r.Generation)
	h.commit("cg", r.MemberID, r.Generation, 9, map[string]int64{"t": 1})
	h.leave("cg", lm(r.MemberID)) // Empty now
	h.advance(50 * time.Minute)
	h.fail = ErrCoordinatorNotAvailable
	if c := h.deleteGroups("cg").Groups[0].ErrorCode; c != ErrCoordinatorNotAvailable {
		t.Fatalf("delete: %d", c)
	}
	h.fail = ErrNone
	h.advance(11 * time.Minute) // 61 min after the group emptied
	h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) })
	if o, _ := h.fetch("cg", "t", 0); o != -1 {
		t.Fatalf("offset kept %v after the group emptied (retention 1h): the failed delete restarted the clock", 61*time.Minute)
	}
}

// Expiring an Empty group leaves nothing of it in the store, even when its
// metadata record is still being written as the sweep runs: the group is
// tombstoned. (cohort forgot it without a tombstone, and the record in flight
// brought it back at the next load.)
func TestExpiryWithMetadataWriteInFlight(t *testing.T) {
	h := newH(t)
	j := h.newMember("g", jo{})
	id := h.joinResp(j).MemberID
	h.hold = true
	h.leave("g", lm(id)) // join phase closes with no member: empty generation written (held)
	if st := h.s.Group("g").State(); st != Empty {
		t.Fatalf("state %v", st)
	}
	h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) })
	h.release()
	if h.s.Group("g") != nil {
		t.Fatalf("live group kept")
	}
	if re := h.reload(); re.Group("g") != nil {
		t.Fatalf("expired group comes back on reload: state %v gen %d (live shard has no such group)", re.Group("g").State(), re.Group("g").Generation())
	}
}

// A static replacement fences the old incarnation's waiting JoinGroup with
// FENCED_INSTANCE_ID at once, also when the old one is itself a replacement
// whose new member id is still being written. (cohort answered the first
// replacement success, with a member id already stale.)
func TestSecondReplacementFencesFirstInFlight(t *testing.T) {
	h := newH(t)
	h.staticGroup(2) // a (leader), b; Stable
	h.hold = true
	b1 := h.join("g", jo{instance: "b"}) // replacement #1: write held
	h.notAnswered(b1)
	b2 := h.join("g", jo{instance: "b"}) // replacement #2 (another process / retry)
	if !h.answered(b1) {
		t.Errorf("first replacement's JoinGroup not fenced at once by the second")
	}
	h.release()
	r1, r2 := h.joinResp(b1), h.joinResp(b2)
	if r1.ErrorCode != ErrFencedInstanceID {
		t.Fatalf("first replacement answered %d with member id %s, want FENCED_INSTANCE_ID (82)", r1.ErrorCode, r1.MemberID)
	}
	if r2.ErrorCode != ErrNone || r2.MemberID != h.s.Group("g").static["b"] {
		t.Fatalf("second replacement answered %d with member id %s; the group's is %s", r2.ErrorCode, r2.MemberID, h.s.Group("g").static["b"])
	}
}

// A group loaded above the size limit (group.max.size lowered across a
// restart) rebalances; the last rejoiners get GROUP_MAX_SIZE_REACHED.
func TestLoadedAboveMaxSizeRebalances(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 3)
	h2 := newH(t, func(c *Config) { c.MaxSize = 2 })
	h2.store, h2.now = h.store, h.now
	var out Output
	for k, v := range h.store {
		if err := h2.s.Load([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	h2.s.FinishLoad(h2.now, &out)
	h2.settle(&out)
	if st := h2.s.Group("g").State(); st != PreparingRebalance {
		t.Fatalf("loaded above max size: state %v", st)
	}
	for _, id := range ids {
		if c := h2.heartbeat("g", id, gen); c != ErrRebalanceInProgress {
			t.Fatalf("hb %d", c)
		}
	}
	var ts []Ticket
	for _, id := range ids {
		ts = append(ts, h2.join("g", jo{member: id}))
	}
	h2.wantCode(ts[2], ErrGroupMaxSizeReached)
	if r := h2.joinResp(ts[0]); r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 2 {
		t.Fatalf("leader: %+v", r)
	}
}

// A classic group whose metadata record is larger than the store takes
// (Config.MaxRecordBytes, etcd's request limit in cluster mode) is not
// written: its SyncGroups get UNKNOWN_SERVER_ERROR, which clients surface,
// as Kafka answers a group too large for its log; the group rebalances. (The
// store's error was retriable before: the clients rejoined and failed for
// ever, and the failure took the other writes of its batch with it.)
func TestMetadataTooLargeForTheStore(t *testing.T) {
	h := newH(t, func(c *Config) { c.MaxRecordBytes = 400 })
	if ids, _ := h.stableGroup("small", 2); len(ids) != 2 { // fits: written as usual
		t.Fatal("a group under the limit did not stabilise")
	}
	h.s.cfg.InitialRebalanceDelay = 100 * time.Millisecond // all three in the first generation
	var joins []Ticket
	for range 3 {
		joins = append(joins, h.newMember("big", jo{protos: protos("range", strings.Repeat("m", 200))}))
	}
	for i := 0; i < 100 && !h.answered(joins[0]); i++ {
		h.advance(100 * time.Millisecond)
	}
	var members []string
	var leader string
	var g int32
	for _, tk := range joins {
		r := h.joinResp(tk)
		if r.ErrorCode != 0 {
			t.Fatalf("join: %d", r.ErrorCode)
		}
		members, leader, g = append(members, r.MemberID), r.LeaderID, r.Generation
	}
	keys := len(h.store)
	var syncs []Ticket
	for _, id := range members {
		if id != leader {
			syncs = append(syncs, h.sync("big", id, g, nil))
		}
	}
	syncs = append(syncs, h.sync("big", leader, g, map[string]string{members[0]: "a", members[1]: "b", members[2]: "c"}))
	for _, tk := range syncs {
		h.wantCode(tk, ErrUnknownServer)
	}
	if len(h.store) != keys {
		t.Errorf("%d records written for a group too large to store", len(h.store)-keys)
	}
	if st := h.s.Group("big").State(); st != PreparingRebalance {
		t.Errorf("state %v after the refused write, want PreparingRebalance", st)
	}
}

// A batch LeaveGroup removes every listed member first, then rebalances (or
// checks the join barrier) once, as Kafka. (cohort reacted after each: a
// member removed later in the batch was first made leader of a generation
// the next removal cancelled.)
func TestLeaveBatchChecksBarrierOnce(t *testing.T) {
	h := newH(t)
	ids, gen := h.staticGroup(3) // a (leader), b, c
	// Open the barrier: the leader rejoins; c rejoins; b stays away.
	ta := h.join("g", jo{instance: "a", member: ids["a"]})
	tc := h.join("g", jo{instance: "c", member: ids["c"]})
	h.notAnswered(ta)
	h.notAnswered(tc)
	// An admin removes b and a by instance id, in one request.
	r := h.leave("g", lm("", "b"), lm("", "a"))
	for _, m := range r.Members {
		if m.ErrorCode != 0 {
			t.Fatalf("leave %v: %d", m.InstanceID, m.ErrorCode)
		}
	}
	// a was removed while parked: its JoinGroup must get UNKNOWN_MEMBER_ID,
	// and the barrier closes once with c alone.
	if c := h.joinResp(ta).ErrorCode; c != ErrUnknownMemberID {
		t.Errorf("removed member a's parked JoinGroup: error %d, want 25 (gen %d)", c, h.joinResp(ta).Generation)
	}
	g := h.s.Group("g")
	if g.State() != CompletingRebalance || g.Generation() != gen+1 {
		t.Errorf("group %v gen %d, want CompletingRebalance gen %d", g.State(), g.Generation(), gen+1)
	}
	if rc := h.joinResp(tc); rc.ErrorCode != 0 || rc.LeaderID != ids["c"] || rc.Generation != gen+1 {
		t.Errorf("c's join: err %d leader %q gen %d, want leader c gen %d", rc.ErrorCode, rc.LeaderID, rc.Generation, gen+1)
	}
}

// Offset metadata longer than offset.metadata.max.bytes (4096) is
// OFFSET_METADATA_TOO_LARGE, the length counted as Kafka counts it: in
// characters (UTF-16 code units), not bytes.
func TestMetadataLengthInUTF16Units(t *testing.T) {
	h := newH(t)
	meta := strings.Repeat("日", 2000) // 2000 UTF-16 units, 6000 UTF-8 bytes
	r := h.commit("g", "", -1, 9, map[string]int64{"t": 5}, meta)
	if c := commitCodes(r)[0]; c != ErrNone {
		t.Errorf("metadata of 2000 characters (6000 bytes): error %d, want 0 (Kafka accepts up to 4096 characters)", c)
	}
	// 4,097 units: one astral character counts two.
	r = h.commit("g", "", -1, 9, map[string]int64{"t": 6}, strings.Repeat("a", 4095)+"😀")
	if c := commitCodes(r)[0]; c != ErrOffsetMetadataTooLarge {
		t.Errorf("metadata of 4,097 UTF-16 units: error %d, want 12", c)
	}
}

// JoinGroup's admission test goes by the group's state, as Kafka's: a group
// whose only member left during the initial delay (PreparingRebalance, no
// members) keeps its protocol type, and a join of another type is
// INCONSISTENT_GROUP_PROTOCOL. (cohort went by the member count and let a
// "connect" member take over a consumer group.)
func TestSupportsProtocolsKeyedOnEmptyState(t *testing.T) {
	h := newH(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	h.join("g", jo{instance: "a"}) // parked; barrier opened with the initial delay
	h.leave("g", lm("", "a"))
	if g := h.s.Group("g"); g.State() != PreparingRebalance || len(g.MemberIDs()) != 0 {
		t.Fatalf("setup: %v", g.State())
	}
	tb := h.join("g", jo{instance: "b", ptype: "connect"})
	if !h.answered(tb) || h.joinResp(tb).ErrorCode != ErrInconsistentProtocol {
		t.Errorf("join with protocol type connect: answered=%v, want INCONSISTENT_GROUP_PROTOCOL; group type now %q",
			h.answered(tb), h.s.Group("g").ProtocolType())
	}
}

// Rules the audit found no test for (a mutation of each passed every test).

// A SyncGroup while the group prepares a rebalance is REBALANCE_IN_PROGRESS,
// and a DeleteGroups of a rebalancing group is NON_EMPTY_GROUP.
func TestSyncAndDeleteDuringRebalance(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	ta := h.join("g", jo{member: ids[0]}) // the leader rejoins: PreparingRebalance
	h.notAnswered(ta)
	h.wantCode(h.sync("g", ids[1], gen, nil), ErrRebalanceInProgress)
	if c := h.deleteGroups("g").Groups[0].ErrorCode; c != ErrNonEmptyGroup {
		t.Fatalf("DeleteGroups of a rebalancing group: %d, want NON_EMPTY_GROUP", c)
	}
}

// A JoinGroup with a rebalance timeout of zero or less gets its session
// timeout as rebalance timeout (KAFKA-8653): zero would end every rebalance
// at once.
func TestZeroRebalanceTimeoutBecomesSessionTimeout(t *testing.T) {
	h := newH(t)
	for _, rt := range []int32{-1, -5} { // (the harness sends 0 as its default, 30 s)
		group := fmt.Sprintf("g%d", rt)
		r := h.joinResp(h.newMember(group, jo{session: 12_000, rebalance: rt}))
		if m := h.s.Group(group).memberByID(r.MemberID); m == nil || m.rebalanceTimeout != 12*time.Second {
			t.Fatalf("rebalance timeout %d: member's is %v, want the session timeout 12s", rt, m.rebalanceTimeout)
		}
	}
}

// A follower whose SyncGroup arrives after the leader's (the group already
// Stable) gets its assignment and is no longer expected: the sync timeout
// does not evict it.
func TestLateSyncInStableIsNotEvicted(t *testing.T) {
	h := newH(t)
	h.s.cfg.InitialRebalanceDelay = 100 * time.Millisecond
	t1, t2 := h.newMember("g", jo{}), h.newMember("g", jo{})
	for i := 0; i < 100 && !h.answered(t1); i++ {
		h.advance(100 * time.Millisecond)
	}
	r1, r2 := h.joinResp(t1), h.joinResp(t2)
	leader, follower := r1.MemberID, r2.MemberID
	if r2.MemberID == r1.LeaderID {
		leader, follower = r2.MemberID, r1.MemberID
	}
	gen := r1.Generation
	h.wantCode(h.sync("g", leader, gen, map[string]string{leader: "x", follower: "y"}), ErrNone)
	if st := h.s.Group("g").State(); st != Stable {
		t.Fatalf("state %v after the leader's sync", st)
	}
	if r := h.syncResp(h.sync("g", follower, gen, nil)); r.ErrorCode != ErrNone || string(r.MemberAssignment) != "y" {
		t.Fatalf("late follower sync: %d %q", r.ErrorCode, r.MemberAssignment)
	}
	for range 8 { // past the rebalance timeout (30 s), heartbeating
		h.advance(5 * time.Second)
		if c := h.heartbeat("g", follower, gen); c != ErrNone {
			t.Fatalf("the late follower's heartbeat: %d", c)
		}
		h.heartbeat("g", leader, gen)
	}
	if h.s.Group("g").memberByID(follower) == nil || h.s.Group("g").State() != Stable {
		t.Fatal("the follower that synced late was evicted")
	}
}

// A commit with a negative generation to an Empty group is an admin or
// standalone commit: accepted without checking the member id it names.
func TestNegativeGenerationCommitToEmptyGroup(t *testing.T) {
	h := newH(t)
	r := h.joinResp(h.newMember("g", jo{}))
	h.syncAll("g", r.LeaderID, []string{r.MemberID}, r.Generation)
	h.leave("g", lm(r.MemberID))
	if st := h.s.Group("g").State(); st != Empty {
		t.Fatalf("state %v", st)
	}
	if codes := commitCodes(h.commit("g", "someone", -1, 7, map[string]int64{"t": 3})); codes[0] != ErrNone {
		t.Fatalf("negative-generation commit to an Empty group naming a member: %v", codes)
	}
	if o, _ := h.fetch("g", "t", 0); o != 3 {
		t.Fatalf("offset %d after the commit", o)
	}
}

// The retention sweep leaves a partition alone while a commit to it is being
// written, even when its stored offset has expired; an OffsetFetch of a group
// being deleted (Dead) reads its durable offsets until the deletion is
// durable, then -1 (Kafka's coordinator answers fetches from its last
// durable state; its older one read -1 at once).
func TestExpirySkipsCommitsInFlightAndDeadGroupsReadDurable(t *testing.T) {
	h := newH(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	h.commit("g", "", -1, 9, map[string]int64{"t": 1, "u": 1})
	h.advance(2 * time.Hour)
	h.hold = true
	h.commit2("g", "t", 5) // written, not yet durable
	h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) })
	h.release()
	if o, _ := h.fetch("g", "t", 0); o != 5 {
		t.Errorf("t/0: %d, want the commit that was in flight during the sweep (5)", o)
	}
	if o, _ := h.fetch("g", "u", 0); o != -1 {
		t.Errorf("u/0: %d, want expired", o)
	}
	h.hold = true
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) }) // answered once durable
	if g := h.s.Group("g"); g == nil || g.State() != Dead {
		t.Fatal("the group is not being deleted")
	}
	if o, _ := h.fetch("g", "t", 0); o != 5 {
		t.Errorf("a Dead group's offset read %d before the deletion is durable, want 5", o)
	}
	h.release()
	if o, _ := h.fetch("g", "t", 0); o != -1 {
		t.Errorf("the deleted group's offset read %d, want -1", o)
	}
}

// A protocol vote that ties goes to the leader's order of preference (the
// leader is the first member to join): two members each preferring a
// different protocol both support get the leader's first. Kafka breaks the
// tie by candidate order in a set whose iteration order is unspecified;
// cohort's rule is docs/group-semantics.md's. (No test held it.)
func TestProtocolVoteTieGoesToTheLeader(t *testing.T) {
	for _, tc := range []struct {
		first, second []kmsg.JoinGroupRequestProtocol
		want          string
	}{
		{protos("range", "m", "roundrobin", "m"), protos("roundrobin", "m", "range", "m"), "range"},
		{protos("roundrobin", "m", "range", "m"), protos("range", "m", "roundrobin", "m"), "roundrobin"},
	} {
		h := newH(t, func(c *Config) { c.InitialRebalanceDelay = 100 * time.Millisecond })
		t1 := h.newMember("g", jo{protos: tc.first})
		t2 := h.newMember("g", jo{protos: tc.second})
		for i := 0; i < 100 && !h.answered(t1); i++ {
			h.advance(100 * time.Millisecond)
		}
		r1, r2 := h.joinResp(t1), h.joinResp(t2)
		if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r1.LeaderID != r1.MemberID {
			t.Fatalf("joins: %d %d, leader %q (first member %q)", r1.ErrorCode, r2.ErrorCode, r1.LeaderID, r1.MemberID)
		}
		for _, r := range []*kmsg.JoinGroupResponse{r1, r2} {
			if r.Protocol == nil || *r.Protocol != tc.want {
				t.Errorf("leader prefers %s: protocol %v, want %s", tc.first[0].Name, r.Protocol, tc.want)
			}
		}
	}
}

// A batch LeaveGroup that removes a parked member and then a KIP-394 pending
// id must close the join barrier once: Kafka's new coordinator
// (GroupMetadataManager.classicGroupLeaveToClassicGroup) removes every listed
// identity and then runs maybeCompleteJoinPhase once; the old one
// (GroupCoordinator.handleLeaveGroup) reacts after each removal, which for
// this order also completes the join once. cohort completed the join while
// handling the pending id and then, reacting to the earlier removal, opened a
// new rebalance on the CompletingRebalance group: the remaining member's
// fresh generation was cancelled at once.
func TestLeaveBatchMemberThenPendingCompletesJoinOnce(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2) // leader, follower
	leader, follower := ids[0], ids[1]
	// A third member gets a pending id and does not come back yet.
	r := h.joinResp(h.join("g", jo{}))
	if r.ErrorCode != ErrMemberIDRequired {
		t.Fatalf("setup: %d", r.ErrorCode)
	}
	pending := r.MemberID
	// The leader and the follower rejoin: the barrier waits for the pending id.
	tl := h.join("g", jo{member: leader})
	tf := h.join("g", jo{member: follower})
	h.notAnswered(tl)
	h.notAnswered(tf)
	// One LeaveGroup (v3+ batch) removes the follower and the pending id.
	lr := h.leave("g", lm(follower), lm(pending))
	for _, m := range lr.Members {
		if m.ErrorCode != 0 {
			t.Fatalf("leave %s: %d", m.MemberID, m.ErrorCode)
		}
	}
	g := h.s.Group("g")
	if g.State() != CompletingRebalance || g.Generation() != gen+1 {
		t.Errorf("group %v gen %d, want CompletingRebalance gen %d (one join completion, no extra rebalance)",
			g.State(), g.Generation(), gen+1)
	}
	rl := h.joinResp(tl)
	if rl.ErrorCode != 0 {
		t.Fatalf("leader join: %d", rl.ErrorCode)
	}
	if len(rl.Members) != 1 {
		t.Errorf("leader's member list has %d members, want 1 (the follower left in the same request)", len(rl.Members))
	}
	if c := h.syncResp(h.sync("g", leader, rl.Generation, map[string]string{leader: "x"})).ErrorCode; c != 0 {
		t.Errorf("leader's SyncGroup for generation %d: error %d, want 0", rl.Generation, c)
	}
}

// A consumer group that went Empty and whose next rebalance has not
// completed yet (here: its only joiner left during the initial delay, so the
// group is PreparingRebalance with no member at all) does not protect any
// topic from OffsetDelete in Kafka: ClassicGroup.initNextGeneration computed
// subscribedTopics = Optional.of(emptySet) when the group became Empty
// (computeSubscribedTopics, "members.isEmpty()"), and isSubscribedToTopic
// only falls back to "everything subscribed" when the subscription is
// unknown. cohort clears its subscription at the Empty transition and then
// treats that nil as an unparsable subscription: every partition is refused
// GROUP_SUBSCRIBED_TO_TOPIC (86), by a group with no members.
func TestOffsetDeleteWhileRejoiningAfterEmpty(t *testing.T) {
	for _, reload := range []bool{false, true} {
		t.Run(fmt.Sprintf("reloaded=%v", reload), func(t *testing.T) {
			h := newH(t)
			h.session = 600_000
			r := h.joinResp(h.newMember("cg", jo{protos: protos("range", consumerMeta("sub"))}))
			h.syncAll("cg", r.LeaderID, []string{r.MemberID}, r.Generation)
			h.commit("cg", r.MemberID, r.Generation, 9, map[string]int64{"sub": 1})
			h.leave("cg", lm(r.MemberID))
			if g := h.s.Group("cg"); g.State() != Empty {
				t.Fatalf("setup: %v", g.State())
			}
			if reload { // the Empty group as a node taking the partition over loads it
				h.s = h.reload()
			}
			// A static member joins (initial delay running) and is removed by an
			// admin before the delay ends: PreparingRebalance, no members.
			h.s.cfg.InitialRebalanceDelay = 3 * time.Second
			h.join("cg", jo{instance: "i", protos: protos("range", consumerMeta("sub"))})
			h.leave("cg", lm("", "i"))
			if g := h.s.Group("cg"); g.State() != PreparingRebalance || len(g.MemberIDs()) != 0 {
				t.Fatalf("setup: %v %d members", g.State(), len(g.MemberIDs()))
			}
			d := h.offsetDelete("cg", map[string][]int32{"sub": {0}})
			if d.ErrorCode != 0 || d.Topics[0].Partitions[0].ErrorCode != ErrNone {
				t.Errorf("OffsetDelete on a memberless group: top %d partition %d, want 0/0 (Kafka deletes)",
					d.ErrorCode, d.Topics[0].Partitions[0].ErrorCode)
			}
		})
	}
}
