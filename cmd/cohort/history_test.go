package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
)

// rawMember is a classic consumer-group member driven request by request
// (JoinGroup, SyncGroup, LeaveGroup), so that the test decides when each
// step happens on the node's fake clock, and a member can simply stop.
type rawMember struct {
	t       *testing.T
	cl      *kgo.Client
	id      string
	session int32 // ms
}

func newRawMember(t *testing.T, addr, clientID string, session time.Duration) *rawMember {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(clientID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &rawMember{t: t, cl: cl, session: int32(session.Milliseconds())}
}

// rawCtx bounds one request of a raw member.
func rawCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// join sends JoinGroup (twice for a new member: KIP-394's member id round
// trip) and returns the answer; it blocks while the join phase lasts.
func (m *rawMember) join(grp string) (*kmsg.JoinGroupResponse, error) {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"events"}
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = grp, m.id, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = m.session, 30000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
		resp, err := req.RequestWith(rawCtx(m.t), m.cl)
		if err != nil {
			return nil, err
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code && m.id == "" {
			m.id = resp.MemberID
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		m.id = resp.MemberID
		return resp, nil
	}
}

// sync sends SyncGroup for generation gen; a leader gives the assignment
// (member id -> partitions of "events").
func (m *rawMember) sync(grp string, gen int32, assign map[string][]int32) error {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = grp, m.id, gen
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for id, ps := range assign {
		a := kmsg.NewConsumerMemberAssignment()
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "events", Partitions: ps}}
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a.AppendTo(nil)})
	}
	resp, err := req.RequestWith(rawCtx(m.t), m.cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// leave sends LeaveGroup with reason.
func (m *rawMember) leave(grp, reason string) error {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = grp
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m.id, Reason: kmsg.StringPtr(reason)}}
	resp, err := req.RequestWith(rawCtx(m.t), m.cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, r := range resp.Members {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}

// async runs f in a goroutine; receive its error from the channel.
func async(f func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// historyDoc runs "group history ID" with --output json and extra.
func (c cli) historyDoc(id string, extra ...string) group.HistoryDoc {
	c.t.Helper()
	var doc group.HistoryDoc
	c.jsonOf(&doc, append([]string{"group", "history", id}, extra...)...)
	return doc
}

// awaitHistory waits until the history of id satisfies cond (the node
// writes an event after the answer that completes the rebalance).
func (c cli) awaitHistory(id, what string, cond func(group.HistoryDoc) bool) group.HistoryDoc {
	c.t.Helper()
	var doc group.HistoryDoc
	testwait.For(c.t, 10*time.Second, what, func() bool {
		doc = c.historyDoc(id)
		return cond(doc)
	})
	return doc
}

// wantIn fails the test unless out holds every one of parts.
func wantIn(t *testing.T, what, out string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(out, p) {
			t.Fatalf("%s lacks %q:\n%s", what, p, out)
		}
	}
}

// TestGroupHistoryAndWhy: a classic group goes through a known sequence on
// the node's fake clock (c-1 joins; c-2 joins while c-1 takes 2.1 s to
// rejoin and 0.3 s to send the assignment; c-2 leaves; c-3 joins and stops,
// and its session times out). "group why" during the second rebalance
// names the member the group waits for and when the timeout evicts it,
// in PreparingRebalance and in CompletingRebalance; afterwards "group
// history" (table and JSON, --last) and "group why" tell the five
// rebalances with their causes, members, durations and moved partitions.
func TestGroupHistoryAndWhy(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.StormThreshold = 3 // the fifth rebalance keeps the group flagged
	// Seeded member ids: the outputs logged under -v are docs/cli.md's
	// examples.
	n := startNodeConfig(t, node.Config{Listen: "127.0.0.1:0", Group: cfg, Clock: clk, Rand: rand.NewChaCha8([32]byte{16})})
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}, clock: clk}
	const g = "hg"
	m1 := newRawMember(t, n.Addr(), "c-1", 45*time.Second)
	m2 := newRawMember(t, n.Addr(), "c-2", 45*time.Second)
	m3 := newRawMember(t, n.Addr(), "c-3", 10*time.Second)

	// #1: c-1 joins an empty group and takes every partition.
	j1, err := m1.join(g)
	must(t, err)
	must(t, m1.sync(g, j1.Generation, map[string][]int32{m1.id: {0, 1, 2}}))
	c.awaitHistory(g, "event 1", func(d group.HistoryDoc) bool { return len(d.History) == 1 })

	// #2: c-2 joins at +1 s; the group waits for c-1 to rejoin.
	clk.Advance(time.Second)
	var j2 *kmsg.JoinGroupResponse
	joined2 := async(func() (err error) { j2, err = m2.join(g); return err })
	c.awaitHistory(g, "c-2 waiting", func(d group.HistoryDoc) bool {
		return d.Waiting != nil && d.State == "PreparingRebalance" && d.Waiting.Cause != nil && len(d.Waiting.Members) == 1
	})
	clk.Advance(2100 * time.Millisecond)
	why := c.ok("group", "why", g)
	t.Logf("cohort group why %s (during rebalance #2)\n%s", g, why)
	wantIn(t, "why in PreparingRebalance", why,
		"Now the group is PreparingRebalance: a rebalance is in progress since 10:00:01.000, started because a new member "+m2.id+" (client c-2, host 127.0.0.1) joined.",
		"It waits for member "+m1.id+" (client c-1, host 127.0.0.1), which has not rejoined since 10:00:01.000; the timeout evicts it at 10:00:31.000 unless it does so before.")
	if tbl := c.ok("group", "history", g); !strings.Contains(tbl, "hg is PreparingRebalance: a rebalance is in progress since 2026-05-01T10:00:01.000Z (see cohort group why hg)") {
		t.Fatalf("history during the rebalance:\n%s", tbl)
	}
	j1, err = m1.join(g)
	must(t, err)
	must(t, <-joined2)
	if j1.LeaderID != m1.id || j2.Generation != j1.Generation {
		t.Fatalf("leader %s (c-1 is %s), generations %d %d", j1.LeaderID, m1.id, j1.Generation, j2.Generation)
	}
	synced2 := async(func() error { return m2.sync(g, j2.Generation, nil) })
	c.awaitHistory(g, "c-2 synced", func(d group.HistoryDoc) bool {
		return d.Waiting != nil && d.State == "CompletingRebalance" && len(d.Waiting.Members) == 1 && d.Waiting.Members[0].MemberID == m1.id
	})
	why = c.ok("group", "why", g)
	wantIn(t, "why in CompletingRebalance", why,
		"It waits for member "+m1.id+" (client c-1, host 127.0.0.1), which is the leader and has not sent the assignment (SyncGroup) since 10:00:03.100; the timeout evicts it at 10:00:33.100 unless it does so before.")
	clk.Advance(300 * time.Millisecond)
	must(t, m1.sync(g, j1.Generation, map[string][]int32{m1.id: {0, 1}, m2.id: {2}}))
	must(t, <-synced2)
	c.awaitHistory(g, "event 2", func(d group.HistoryDoc) bool { return len(d.History) == 2 })

	// #3: c-2 leaves at +4.4 s; c-1 rejoins at once and takes all.
	clk.Advance(time.Second)
	must(t, m2.leave(g, "shutting down"))
	j1, err = m1.join(g)
	must(t, err)
	must(t, m1.sync(g, j1.Generation, map[string][]int32{m1.id: {0, 1, 2}}))
	c.awaitHistory(g, "event 3", func(d group.HistoryDoc) bool { return len(d.History) == 3 })

	// #4: c-3 joins at +5.4 s; #5: it stops, and its 10 s session runs
	// out at +15.4 s.
	clk.Advance(time.Second)
	var j3 *kmsg.JoinGroupResponse
	joined3 := async(func() (err error) { j3, err = m3.join(g); return err })
	c.awaitHistory(g, "c-3 waiting", func(d group.HistoryDoc) bool { return d.Waiting != nil && d.Waiting.Cause != nil })
	j1, err = m1.join(g)
	must(t, err)
	must(t, <-joined3)
	synced3 := async(func() error { return m3.sync(g, j3.Generation, nil) })
	must(t, m1.sync(g, j1.Generation, map[string][]int32{m1.id: {0, 1}, m3.id: {2}}))
	must(t, <-synced3)
	c.awaitHistory(g, "event 4", func(d group.HistoryDoc) bool { return len(d.History) == 4 })
	clk.Advance(10 * time.Second)
	c.awaitHistory(g, "c-3 timed out", func(d group.HistoryDoc) bool { return d.Waiting != nil && d.State == "PreparingRebalance" })
	j1, err = m1.join(g)
	must(t, err)
	must(t, m1.sync(g, j1.Generation, map[string][]int32{m1.id: {0, 1, 2}}))
	doc := c.awaitHistory(g, "event 5", func(d group.HistoryDoc) bool { return len(d.History) == 5 })

	// JSON: the history document, decoded strictly.
	if doc.Version != group.HistoryDocVersion || doc.Group != g || doc.Type != "classic" || doc.State != "Stable" || doc.Waiting != nil {
		t.Fatalf("document: %+v", doc)
	}
	if s := doc.Storm; !s.Flagged || s.Count != 5 || s.Threshold != 3 || s.Causes[group.CauseMemberJoined] != 3 || s.Causes[group.CauseSessionTimeout] != 1 {
		t.Fatalf("storm: %+v", s)
	}
	type want struct {
		kind           group.CauseKind
		member, client string
		join, sync     int64
		from, gen      int32
	}
	wants := []want{
		{group.CauseMemberJoined, m1.id, "c-1", 0, 0, 0, 1},
		{group.CauseMemberJoined, m2.id, "c-2", 2100, 300, 1, 2},
		{group.CauseMemberLeft, m2.id, "c-2", 0, 0, 2, 3},
		{group.CauseMemberJoined, m3.id, "c-3", 0, 0, 3, 4},
		{group.CauseSessionTimeout, m3.id, "c-3", 0, 0, 4, 5},
	}
	for i, w := range wants {
		ev := doc.History[i]
		if ev.Seq != uint64(i+1) || ev.Cause.Kind != w.kind || ev.Cause.MemberID != w.member || ev.Cause.ClientID != w.client ||
			ev.JoinMs != w.join || ev.SyncMs != w.sync || ev.FromGeneration != w.from || ev.Generation != w.gen || ev.Outcome != "stable" {
			t.Fatalf("event %d: %+v, want %+v", i+1, ev, w)
		}
	}
	if w := doc.History[1].WaitedFor; len(w) < 2 || w[0] != (group.Wait{MemberID: m1.id, Phase: "join", WaitedMs: 2100}) ||
		!slices.Contains(w, group.Wait{MemberID: m1.id, Phase: "sync", WaitedMs: 300}) {
		t.Fatalf("event 2 waited for %+v", w)
	}
	if r := doc.History[2].Cause.Reason; r != "shutting down" {
		t.Fatalf("leave reason %q", r)
	}
	if hb := doc.History[4].Cause.LastHeartbeat; hb == nil || !hb.Equal(t0.Add(5400*time.Millisecond)) {
		t.Fatalf("last heartbeat %v", hb)
	}

	// The table: one row per rebalance with the same facts.
	tbl := c.ok("group", "history", g)
	t.Logf("cohort group history %s\n%s", g, tbl)
	rows := strings.Split(strings.TrimSpace(tbl), "\n")
	if len(rows) != 7 || !strings.HasPrefix(table(rows[0]), "SEQ START GENERATIONS OUTCOME CAUSE MEMBER CLIENT JOIN SYNC WAITED-FOR EVICTED MOVED REJOIN-OF") {
		t.Fatalf("table:\n%s", strings.Join(rows, "\n"))
	}
	wantRows := [][]string{
		{"1", "2026-05-01T10:00:00.000Z", "0->1", "stable", "member_joined", m1.id, "c-1@127.0.0.1", "0ms", "0ms"},
		{"2", "2026-05-01T10:00:01.000Z", "1->2", "stable", "member_joined", m2.id, "c-2@127.0.0.1", "2.1s", "300ms"},
		{"3", "2026-05-01T10:00:04.400Z", "2->3", "stable", "member_left", m2.id, "c-2@127.0.0.1", "0ms", "0ms"},
		{"4", "2026-05-01T10:00:05.400Z", "3->4", "stable", "member_joined", m3.id, "c-3@127.0.0.1", "0ms", "0ms"},
		{"5", "2026-05-01T10:00:15.400Z", "4->5", "stable", "session_timeout", m3.id, "c-3@127.0.0.1", "0ms", "0ms"},
	}
	for i, w := range wantRows {
		if f := strings.Fields(rows[i+1]); len(f) < len(w) || !slices.Equal(f[:len(w)], w) {
			t.Fatalf("row %d: %q, want it to start %q", i+1, rows[i+1], w)
		}
	}
	wantIn(t, "row 2", rows[2], m1.id+"(join 2.1s)", m1.id+"(sync 300ms)", m1.id+" -events(2); "+m2.id+" +events(2)")
	wantIn(t, "row 3", rows[3], m1.id+" +events(2)")
	const storm = "Rebalance storm since 2026-05-01T10:00:05.400Z: 5 completed rebalances started within the last 5m0s, more than 3; causes: member_joined 3, member_left 1, session_timeout 1."
	if rows[6] != storm {
		t.Fatalf("storm line %q", rows[6])
	}

	// --last.
	if d := c.historyDoc(g, "--last", "2"); len(d.History) != 2 || d.History[0].Seq != 4 || d.History[1].Seq != 5 {
		t.Fatalf("--last 2: %+v", d.History)
	}

	// why: the last three rebalances in sentences.
	why = c.ok("group", "why", g)
	if strings.Contains(why, "Rebalance #2 ") || !strings.Contains(why, "Rebalance #3 ") {
		t.Fatalf("why shows other than the last 3:\n%s", why)
	}
	wantIn(t, "why", why,
		"Rebalance #3 at 10:00:04.400 started because member "+m2.id+` (client c-2, host 127.0.0.1) left the group (reason: "shutting down").`,
		"Rebalance #4 at 10:00:05.400 started because a new member "+m3.id+" (client c-3, host 127.0.0.1) joined.",
		"Rebalance #5 at 10:00:15.400 started because member "+m3.id+" (client c-3, host 127.0.0.1) stopped heartbeating: its last heartbeat was at 10:00:05.400, 10 s before the coordinator timed it out at 10:00:15.400.",
		"10 s before the coordinator timed it out at 10:00:15.400. The join and sync phases completed at once. It ended at 10:00:15.400 with generation 5",
		"Moved: "+m1.id+" gained events(2).",
		storm,
		"Now the group is Stable: no rebalance is in progress.")
	if why := c.ok("group", "why", g, "--last", "0"); strings.Contains(why, "Rebalance #") || strings.Contains(why, "no recorded rebalance") ||
		!strings.Contains(why, "Now the group is Stable") {
		t.Fatalf("why --last 0:\n%s", why)
	}
	why = c.ok("group", "why", g, "--last", "5")
	t.Logf("cohort group why %s --last 5\n%s", g, why)
	wantIn(t, "why --last 5", why,
		"Rebalance #2 at 10:00:01.000 started because a new member "+m2.id+" (client c-2, host 127.0.0.1) joined. The join phase took 2.1 s, waiting for "+m1.id+" (2.1 s); the sync phase took 300 ms, waiting for "+m1.id+" (300 ms).",
		"It ended at 10:00:03.400 with generation 2 (leader "+m1.id+", protocol range).",
		"Moved: "+m1.id+" lost events(2); "+m2.id+" (new) gained events(2).")
}

// TestGroupHistoryErrors: a missing group is an error naming it (exit 1),
// usage mistakes exit 2, -h exits 0, and a node that is not there is
// named.
func TestGroupHistoryErrors(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	for _, action := range []string{"history", "why"} {
		c.fails(1, []string{"group", action, "nope"}, "history of nope: GROUP_ID_NOT_FOUND: group nope not found")
		for _, tc := range []struct {
			args []string
			msg  string
		}{
			{[]string{"group", action}, "want exactly one group id, got 0"},
			{[]string{"group", action, "a", "b"}, "want exactly one group id, got 2"},
			{[]string{"group", action, "a", "--last", "-1"}, "--last -1: want 0 or more"},
			{[]string{"group", action, "a", "--last", "x"}, `invalid value "x" for flag -last`},
			{[]string{"group", action, "a", "--members"}, "group " + action + ": --members is not one of its flags"},
			{[]string{"group", action, "a", "--data-bootstrap", "127.0.0.1:1"}, "group " + action + ": --data-bootstrap is not one of its flags"},
		} {
			c.fails(2, tc.args, tc.msg)
		}
		if out, errOut, code := c.run("group", action, "-h"); code != 0 || !strings.Contains(out+errOut, "cohort group "+action+" ID [--last N]") {
			t.Fatalf("%s -h: exit %d\n%s%s", action, code, out, errOut)
		}
	}
	c.fails(2, []string{"group", "why", "a", "--output", "json"}, "group why prints sentences only")
	c.fails(2, []string{"group", "describe", "a", "--last", "2"}, "group describe: --last is not one of its flags")
	dead := closedAddr(t)
	start := time.Now()
	cli{t: t}.fails(1, []string{"group", "history", "g", "--bootstrap", dead, "--timeout", "400ms"}, "cannot connect to cohort at "+dead+" (")
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("gave up after %s", el)
	}
	// An empty group with no rebalance: history has no rows, why says so.
	c.ok("topic", "create", "events")
	commit(t, n.Addr(), "idle", "events", map[int32]int64{0: 1})
	if d := c.historyDoc("idle"); d.State != "Empty" || len(d.History) != 0 || d.History == nil {
		t.Fatalf("idle: %+v", d)
	}
	wantIn(t, "why idle", c.ok("group", "why", "idle"), "Group idle has no recorded rebalance.", "No rebalance storm: 0 completed rebalances started within the last 5m0s (a storm is more than 10).", "Now the group is Empty: no rebalance is in progress.")
}

// TestGroupHistoryOff: on a node that keeps no history (--group-history
// 0), group history and group why say so in one line, instead of an empty
// table, "no recorded rebalance" and a storm count of 0 that read as a
// quiet group; the JSON document carries "history_off": true.
func TestGroupHistoryOff(t *testing.T) {
	n := startNodeWith(t, "127.0.0.1:0", func(c *group.Config) { c.HistorySize = -1 }) // what --group-history 0 sets
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	const g = "unrecorded"
	m := newRawMember(t, n.Addr(), "c-1", 45*time.Second)
	j, err := m.join(g)
	must(t, err)
	must(t, m.sync(g, j.Generation, map[string][]int32{m.id: {0}}))

	const off = "The node keeps no rebalance history (cohort serve --group-history 0): no rebalance of unrecorded is recorded, nor counted for storms."
	for _, action := range []string{"history", "why"} {
		out := c.ok("group", action, g)
		if !strings.Contains(out, off) || strings.Contains(out, "No rebalance storm") || strings.Contains(out, "no recorded rebalance") || strings.Contains(out, "SEQ") {
			t.Errorf("group %s on a node without history:\n%s", action, out)
		}
	}
	if d := c.historyDoc(g); !d.HistoryOff || len(d.History) != 0 {
		t.Errorf("history document: %+v", d)
	}
	// A node that keeps history leaves the field out.
	on := startNode(t, "127.0.0.1:0")
	m2 := newRawMember(t, on.Addr(), "c-1", 45*time.Second)
	j, err = m2.join(g)
	must(t, err)
	must(t, m2.sync(g, j.Generation, nil))
	if out := (cli{t: t, base: []string{"--bootstrap", on.Addr()}}).ok("group", "history", g, "--output", "json"); strings.Contains(out, "history_off") {
		t.Errorf("history_off sent by a node that keeps history:\n%s", out)
	}
}

// TestGroupHistoryConsumerProtocol: the history of a consumer-protocol
// (KIP-848) group, which DescribeGroups answers as missing but with its
// history: two franz-go consumers join one after the other and the second
// leaves; history and why tell the joins (type consumer, group epochs,
// partitions moved) and the leave.
func TestGroupHistoryConsumerProtocol(t *testing.T) {
	t.Parallel() // its own node; waits on 5 s heartbeats
	testwait.WallClock(t, "franz-go KIP-848 consumers against a live node, 5 s heartbeats")
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "jobs", "--partitions", "4")
	const g = "jobs-app"
	member848(t, n.Addr(), g, "jobs", "worker-a", "", "")
	c.waitConsumer(g, "stable with worker-a", func(d groupDesc) bool { return settled(d, 1, 4) })
	_, stopB := member848(t, n.Addr(), g, "jobs", "worker-b", "", "")
	c.waitConsumer(g, "stable with both", func(d groupDesc) bool { return settled(d, 2, 4) })
	stopB()
	c.waitConsumer(g, "stable with worker-a again", func(d groupDesc) bool { return settled(d, 1, 4) })
	// The joins and the leave each start an event (more events may come
	// between them: franz-go's own subscription updates).
	doc := c.awaitHistory(g, "the leave recorded", func(d group.HistoryDoc) bool {
		return slices.ContainsFunc(d.History, func(e group.RebalanceEvent) bool { return e.Cause.Kind == group.CauseMemberLeft })
	})
	if doc.Type != "consumer" || doc.Group != g {
		t.Fatalf("document: %+v", doc)
	}
	byClient := func(kind group.CauseKind, client string) *group.RebalanceEvent {
		for i := range doc.History {
			if e := &doc.History[i]; e.Cause.Kind == kind && e.Cause.ClientID == client {
				return e
			}
		}
		t.Fatalf("no %s event of %s: %+v", kind, client, doc.History)
		return nil
	}
	first, second, left := byClient(group.CauseMemberJoined, "worker-a"), byClient(group.CauseMemberJoined, "worker-b"),
		byClient(group.CauseMemberLeft, "worker-b")
	if first.Type != "consumer" || first.Seq != 1 || !(first.Seq < second.Seq && second.Seq < left.Seq) || second.Generation <= first.Generation {
		t.Fatalf("events: %+v %+v %+v", first, second, left)
	}
	moved := 0
	for _, m := range second.Members {
		for _, tp := range m.Added {
			moved += len(tp.Partitions)
		}
	}
	if moved == 0 {
		t.Fatalf("worker-b's join moved nothing: %+v", second.Members)
	}
	tbl := c.ok("group", "history", g)
	wantIn(t, "table", table(tbl), "SEQ START EPOCHS", fmt.Sprintf("%d->%d", second.FromGeneration, second.Generation), "member_left")
	why := c.ok("group", "why", g, "--last", "100")
	t.Logf("cohort group why %s --last 100\n%s", g, why)
	wantIn(t, "why", why,
		fmt.Sprintf("Rebalance #%d at ", second.Seq),
		"started because a new member "+second.Cause.MemberID+" (client worker-b, host 127.0.0.1) joined. The target assignment was computed after",
		fmt.Sprintf("with group epoch %d", second.Generation),
		"started because member "+left.Cause.MemberID+" (client worker-b, host 127.0.0.1) left the group",
		"Now the group is Stable")
}

// TestWhyConsumerWaiting: "why" of a consumer-protocol group that is
// Reconciling names the member that has not revoked (with the time its
// rebalance timeout fences it) and the one waiting for partitions (no
// deadline), from the history document alone; Assigning waits for no
// member.
func TestWhyConsumerWaiting(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	deadline := at(46_000)
	cause := group.Cause{Kind: group.CauseMemberJoined, At: at(1000), MemberID: "m-b", ClientID: "worker-b", ClientHost: "/127.0.0.1"}
	doc := &group.HistoryDoc{Version: 1, Group: "jobs", Type: "consumer", State: "Reconciling", History: []group.RebalanceEvent{},
		Storm: group.StormStatus{Group: "jobs", Count: 1, Threshold: 10, WindowMs: 300_000},
		Waiting: &group.Waiting{State: "Reconciling", Since: at(1000), Cause: &cause, Members: []group.WaitingMember{
			{MemberID: "m-a", ClientID: "worker-a", Phase: "revoke", Since: at(1000), Deadline: &deadline},
			{MemberID: "m-b", ClientID: "worker-b", ClientHost: "/127.0.0.1", Phase: "assign", Since: at(1000)},
		}}}
	var out strings.Builder
	other := group.Cause{Kind: group.CauseOther, At: at(500), Detail: "group converted to the classic protocol"}
	if s := causeText(other, "classic", timeFmt{now: t0}); s != "of another event: group converted to the classic protocol" {
		t.Fatalf("cause other: %q", s)
	}
	// A load's event names the member whose rejoin started it.
	loaded := group.Cause{Kind: group.CauseLoaded, At: at(500), MemberID: "m-c", ClientID: "worker-c", ClientHost: "10.0.0.3"}
	if s := causeText(loaded, "classic", timeFmt{now: t0}); s != "the coordinator loaded the group (a restart or a failover) and member m-c (client worker-c, host 10.0.0.3) then rejoined" {
		t.Fatalf("cause loaded: %q", s)
	}
	writeWhy(&out, doc, "", nil, at(2000), false)
	wantIn(t, "why", out.String(),
		"Now the group is Reconciling: a rebalance is in progress since 10:00:01.000, started because a new member m-b (client worker-b, host 127.0.0.1) joined.",
		"It waits for member m-a (client worker-a), which has not revoked the partitions it must give up since 10:00:01.000; the timeout evicts it at 10:00:46.000 unless it does so before.",
		"It waits for member m-b (client worker-b, host 127.0.0.1), which has not reached its target assignment (it waits for partitions others still hold, or has not heartbeated since) since 10:00:01.000; nothing evicts it for that but its session timeout.",
		"No rebalance storm: 1 completed rebalance started within the last 5m0s (a storm is more than 10).",
		"(Times are UTC.)")
	// Why it takes seconds: the members hear of the target at their next
	// heartbeat, said once, with the default interval and where to see
	// the group's.
	hbLine := "Members learn of a new target assignment only at their next heartbeat, which is why reaching it usually takes seconds:" +
		" a member at rest heartbeats every consumer.heartbeat.interval.ms, 5 s by default" +
		" (the node's cohort serve --consumer-heartbeat-interval, or the group's own: cohort group config jobs)," +
		" and once it has heard, cohort asks it to heartbeat every 500 ms or less until the group is Stable" +
		" (a classic-protocol member heartbeats at its client's heartbeat.interval.ms)."
	wantIn(t, "why", out.String(), "unless it does so before. It waits for member m-b", "nothing evicts it for that but its session timeout. "+hbLine+"\n")
	if n := strings.Count(out.String(), "next heartbeat"); n != 1 {
		t.Errorf("the heartbeat line %d times:\n%s", n, out.String())
	}
	if s := heartbeatSentence("x; y", nil); !strings.Contains(s, "cohort group config 'x; y')") {
		t.Errorf("the group config command does not quote the group id: %s", s)
	}
	// A member that must revoke and has not been told yet: no deadline.
	doc.Waiting.Members[0].Deadline = nil
	out.Reset()
	writeWhy(&out, doc, "", nil, at(2000), false)
	wantIn(t, "why not told", out.String(),
		"It waits for member m-a (client worker-a), which has not revoked the partitions it must give up since 10:00:01.000; it learns so at its next heartbeat, and its rebalance timeout starts then.")
	doc.State, doc.Waiting.State, doc.Waiting.Members = "Assigning", "Assigning", []group.WaitingMember{}
	out.Reset()
	writeWhy(&out, doc, "", nil, at(2000), false)
	wantIn(t, "why assigning", out.String(), "It waits for no member: the next heartbeat computes the target assignment.")
	if strings.Contains(out.String(), "Members learn of a new target") {
		t.Errorf("the heartbeat line without a member waited for:\n%s", out.String())
	}
	// Nor for a classic group, whose members are told to rejoin.
	classic := &group.HistoryDoc{Version: 1, Group: "jobs", Type: "classic", State: "PreparingRebalance", History: []group.RebalanceEvent{},
		Waiting: &group.Waiting{State: "PreparingRebalance", Since: at(1000), Members: []group.WaitingMember{{MemberID: "m-a", Phase: "join", Since: at(1000)}}}}
	out.Reset()
	writeWhy(&out, classic, "", nil, at(2000), false)
	if strings.Contains(out.String(), "Members learn of a new target") {
		t.Errorf("the heartbeat line for a classic group:\n%s", out.String())
	}
}

// TestGroupHistoryNotCohort: a Kafka-protocol server that is not cohort
// (kfake) answers without history: an error that says so, exit 1.
func TestGroupHistoryNotCohort(t *testing.T) {
	data := startData(t, 3, "events")
	consumer(t, data.addr, "kg", "events", "app", "")
	c := cli{t: t, base: []string{"--bootstrap", data.addr}}
	for _, action := range []string{"history", "why"} {
		c.fails(1, []string{"group", action, "kg"}, "history of kg: the server sent no rebalance history (it is not cohort, or a version without history)")
	}
}

// TestStormSentenceSaysWhatStartedTheRebalances: when members rejoining
// during the rebalances add causes that started none, the storm line says
// first what started them (an operator audit read the rejoins as the
// storm's cause); equal counts keep the one list.
func TestStormSentenceSaysWhatStartedTheRebalances(t *testing.T) {
	st := group.StormStatus{Flagged: true, Count: 24, Threshold: 10, WindowMs: 300_000,
		StartedBy: map[group.CauseKind]int{group.CauseMemberJoined: 7, group.CauseMemberLeft: 10, group.CauseMetadataChanged: 6, group.CauseSessionTimeout: 1},
		Causes:    map[group.CauseKind]int{group.CauseMetadataChanged: 52, group.CauseMemberJoined: 13, group.CauseMemberLeft: 10, group.CauseSessionTimeout: 1}}
	want := "started by member_left 10, member_joined 7, metadata_changed 6, session_timeout 1; all causes, with the rejoins during them: metadata_changed 52, member_joined 13, member_left 10, session_timeout 1."
	if s := stormSentence(st); !strings.HasSuffix(s, want) {
		t.Fatalf("storm line %q\nwant it to end %q", s, want)
	}
	st.StartedBy = maps.Clone(st.Causes)
	if s := stormSentence(st); strings.Contains(s, "started by") || !strings.HasSuffix(s, "; causes: metadata_changed 52, member_joined 13, member_left 10, session_timeout 1.") {
		t.Fatalf("storm line with equal counts %q", s)
	}
}

// TestWhyNamesTheInitialDelay: a join phase that began with the initial
// rebalance delay says so (an operator audit took a new group's 6 s join
// phase for a slow member).
func TestWhyNamesTheInitialDelay(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	ev := group.RebalanceEvent{Seq: 1, Group: "g", Type: "classic", Generation: 1, Start: t0, End: t0.Add(6 * time.Second),
		Outcome: "stable", Cause: group.Cause{Kind: group.CauseMemberJoined, At: t0, MemberID: "m"}, JoinMs: 6000, SyncMs: 5,
		InitialDelay: true}
	wantIn(t, "why", explainEvent(ev, timeFmt{now: t0}),
		"The join phase took 6 s (it began with the initial rebalance delay, which waits for more members of a group that was empty: --initial-rebalance-delay); the sync phase took 5 ms.")
	ev.InitialDelay = false
	if s := explainEvent(ev, timeFmt{now: t0}); strings.Contains(s, "initial rebalance delay") {
		t.Fatalf("without the delay: %q", s)
	}
}

// TestHistoryShowsWhatTheStoredBoundLeftOut: an event of a big group keeps
// at most a few hundred entries per list (docs/history.md "Stored bound");
// the table and "why" count the rest instead of passing them over.
func TestHistoryShowsWhatTheStoredBoundLeftOut(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	ev := group.RebalanceEvent{Seq: 1, Group: "g", Type: "classic", Generation: 1, Start: t0, End: t0.Add(time.Second),
		Outcome: "stable", Cause: group.Cause{Kind: group.CauseMemberJoined, At: t0, MemberID: "m"}, JoinMs: 1000,
		WaitedFor: []group.Wait{{MemberID: "a", Phase: "join", WaitedMs: 900}}, Evicted: []string{"x"},
		Members: []group.MemberChange{{MemberID: "a", New: true, AssignmentBytes: 8, Changed: true}},
		Omitted: &group.Omitted{WaitedFor: 1799, Evicted: 4, Members: 800}}
	var b strings.Builder
	if err := writeHistoryTable(&b, &group.HistoryDoc{Group: "g", Type: "classic", History: []group.RebalanceEvent{ev}}); err != nil {
		t.Fatal(err)
	}
	wantIn(t, "table", b.String(), "a(join 900ms) +1799 more", "x +4 more", "a changed(8 B) +800 more")
	wantIn(t, "why", explainEvent(ev, timeFmt{now: t0}), "1799 more members it waited for are not recorded.",
		"It evicted x and 4 more members.", "800 more members whose assignment changed are not recorded.")
}

// TestHistoryOffWithOlderEvents: a node restarted with --group-history 0
// (or taking over a partition from one that kept history) still serves the
// events stored before; history and why show them and say that none since
// is recorded, instead of "no rebalance is recorded" over a hidden table.
func TestHistoryOffWithOlderEvents(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	ev := group.RebalanceEvent{Seq: 7, Start: t0, FromGeneration: 3, Generation: 4, Outcome: "completed",
		Cause: group.Cause{Kind: group.CauseMemberJoined, At: t0, MemberID: "m-b", ClientID: "worker-b"}}
	doc := &group.HistoryDoc{Version: 1, Group: "g", Type: "classic", State: "Stable", HistoryOff: true,
		History: []group.RebalanceEvent{ev}, Storm: group.StormStatus{Group: "g", Threshold: 10, WindowMs: 300_000}}
	var out strings.Builder
	if err := writeHistoryTable(&out, doc); err != nil {
		t.Fatal(err)
	}
	older := "the rebalances of g shown were recorded before; none since is recorded"
	wantIn(t, "history", out.String(), "SEQ", "3->4", older)
	if strings.Contains(out.String(), "no rebalance of g is recorded") || strings.Contains(out.String(), "No rebalance storm") {
		t.Fatalf("history:\n%s", out.String())
	}
	out.Reset()
	writeWhy(&out, doc, "", nil, t0.Add(time.Minute), false)
	wantIn(t, "why", out.String(), older, "m-b")
	if strings.Contains(out.String(), "no rebalance of g is recorded") {
		t.Fatalf("why:\n%s", out.String())
	}
	// Without events: the one line, as before.
	doc.History = nil
	out.Reset()
	if err := writeHistoryTable(&out, doc); err != nil {
		t.Fatal(err)
	}
	wantIn(t, "history without events", out.String(), "no rebalance of g is recorded")
	if strings.Contains(out.String(), "SEQ") {
		t.Fatalf("history without events:\n%s", out.String())
	}
}

// TestWhyClassicMemberRejoinTimeout: a classic-protocol member of a
// consumer-protocol group fenced because it did not send the JoinGroup or
// SyncGroup it owed (group.cNoteTimer's detail) is not said to have failed to
// revoke its partitions, which is what the sentence for a consumer-protocol
// member's rebalance timeout says.
func TestWhyClassicMemberRejoinTimeout(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	c := group.Cause{Kind: group.CauseRebalanceTimeout, At: t0, MemberID: "m-k", ClientID: "legacy",
		Detail: "classic protocol member did not send the JoinGroup or SyncGroup it owed within its rebalance timeout"}
	s := causeText(c, "consumer", timeFmt{now: t0})
	if want := "member m-k (client legacy), a classic-protocol member, did not send the JoinGroup or SyncGroup it owed within its rebalance timeout and was evicted"; s != want {
		t.Errorf("classic member's rebalance timeout:\n got %q\nwant %q", s, want)
	}
	c.ClientID, c.Detail = "modern", "did not revoke t[2 3] within its rebalance timeout (30s)"
	s = causeText(c, "consumer", timeFmt{now: t0})
	if want := "member m-k (client modern) did not revoke its partitions within the rebalance timeout and was evicted (did not revoke t[2 3] within its rebalance timeout (30s))"; s != want {
		t.Errorf("consumer member's rebalance timeout:\n got %q\nwant %q", s, want)
	}
}

// TestHistoryHintQuotesTheGroupID: the "see cohort group why ID" hint of a
// group in a rebalance names the group as one shell word. Before, the id
// went in as it was: a group named "x; touch PWNED" made the hint a command
// line that ran a second command when pasted, and an id starting with '-'
// read as a flag.
func TestHistoryHintQuotesTheGroupID(t *testing.T) {
	for id, want := range map[string]string{
		"x; touch PWNED":        "(see cohort group why 'x; touch PWNED')",
		"--bootstrap=evil:9092": "(see cohort group why -- --bootstrap=evil:9092)",
		"evil\n$(touch PWNED)":  `(see cohort group why $'evil\n$(touch PWNED)')`,
		"hg":                    "(see cohort group why hg)",
	} {
		doc := &group.HistoryDoc{Version: 1, Group: id, Type: "classic", State: "PreparingRebalance",
			Waiting: &group.Waiting{State: "PreparingRebalance", Since: time.Date(2026, 5, 1, 10, 0, 1, 0, time.UTC)}}
		var b strings.Builder
		if err := writeHistoryTable(&b, doc); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("group %q: the output lacks %s:\n%s", id, want, b.String())
		}
	}
}

// TestWhyNamesTheTimeoutSetting: an event that evicted a member for a
// rebalance or sync timeout says which timeout that was, how long it was,
// and which client setting it is (the setting an on-call engineer changes);
// an event without such an eviction says nothing of it. Staged with franz-go
// (a member blocking rebalances for 25 s, a 10 s rebalance timeout), "why"
// said only "did not rejoin within the rebalance timeout and was evicted".
func TestWhyNamesTheTimeoutSetting(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	slow := group.Cause{Kind: group.CauseRebalanceTimeout, At: t0.Add(10 * time.Second), MemberID: "slow-1", ClientID: "slow", ClientHost: "127.0.0.1"}
	ev := group.RebalanceEvent{Seq: 4, Group: "g", Type: "classic", FromGeneration: 3, Generation: 4, Start: t0, End: t0.Add(10 * time.Second),
		Outcome: "stable", Cause: group.Cause{Kind: group.CauseMemberJoined, At: t0, MemberID: "b-1", ClientID: "b"},
		MoreCauses: []group.Cause{slow}, JoinMs: 10000,
		WaitedFor: []group.Wait{{MemberID: "slow-1", Phase: "join", WaitedMs: 10000, Evicted: true}}, Evicted: []string{"slow-1"}}
	wantIn(t, "classic join eviction", explainEvent(ev, timeFmt{now: t0}),
		"It evicted slow-1. The join phase waits for each member up to the group's rebalance timeout, the longest one its members gave when they joined (10 s here):"+
			" that is the client's rebalance timeout, which the Java client and librdkafka take from max.poll.interval.ms (franz-go: kgo.RebalanceTimeout),"+
			" so an evicted member most likely spent longer than that between two polls or in its callback for revoked partitions;"+
			" raise the setting in that client, or shorten that work. It ended")

	sync := ev
	sync.MoreCauses = []group.Cause{{Kind: group.CauseSyncTimeout, At: t0.Add(10 * time.Second), MemberID: "slow-1"}}
	sync.WaitedFor = []group.Wait{{MemberID: "slow-1", Phase: "sync", WaitedMs: 10000, Evicted: true}}
	wantIn(t, "classic sync eviction", explainEvent(sync, timeFmt{now: t0}),
		"It evicted slow-1. The sync phase waits for each member up to the group's rebalance timeout, the longest one its members gave when they joined (10 s here):")

	cg := group.RebalanceEvent{Seq: 2, Group: "g", Type: "consumer", FromGeneration: 1, Generation: 4, Start: t0, End: t0.Add(12 * time.Second),
		Outcome: "stable", Cause: group.Cause{Kind: group.CauseMemberJoined, At: t0, MemberID: "b-1"},
		MoreCauses: []group.Cause{{Kind: group.CauseRebalanceTimeout, At: t0.Add(11 * time.Second), MemberID: "slow-1",
			Detail: "did not revoke events[2 3] within its rebalance timeout (10s)"}},
		JoinMs: 12000, Evicted: []string{"slow-1"}}
	wantIn(t, "consumer eviction", explainEvent(cg, timeFmt{now: t0}),
		"It evicted slow-1. A member has its own rebalance timeout to give partitions up, counted from the heartbeat that told it to:"+
			" the client's rebalance timeout, which the Java client takes from max.poll.interval.ms (franz-go: kgo.RebalanceTimeout),"+
			" so an evicted member most likely spent longer than that in its callback for revoked partitions;"+
			" raise the setting in that client, or shorten that work. It ended")

	quiet := ev
	quiet.MoreCauses, quiet.WaitedFor, quiet.Evicted = nil, nil, nil
	if s := explainEvent(quiet, timeFmt{now: t0}); strings.Contains(s, "max.poll.interval.ms") {
		t.Errorf("an event without a timeout eviction names the setting: %s", s)
	}
	// A member evicted by its session (a session_timeout more cause) is not
	// a rebalance timeout: no such sentence.
	sess := ev
	sess.MoreCauses = []group.Cause{{Kind: group.CauseSessionTimeout, At: t0.Add(time.Second), MemberID: "slow-1"}}
	sess.WaitedFor = []group.Wait{{MemberID: "slow-1", Phase: "session", WaitedMs: 1000, Evicted: true}}
	if s := explainEvent(sess, timeFmt{now: t0}); strings.Contains(s, "max.poll.interval.ms") {
		t.Errorf("a session eviction names the rebalance timeout's setting: %s", s)
	}
}
