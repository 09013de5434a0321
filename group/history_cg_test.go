package group

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The rebalance history of consumer-protocol (KIP-848) groups: one event per
// rebalance, bumps during it taken in (docs/history.md). Every test runs on the fake clock.

// cgBeat sends a's plain heartbeat at its epoch listing owned.
func (h *h) cgBeat(member string, owned tpset) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	m := h.cmember("cg", member)
	if m == nil {
		h.t.Fatalf("%s is not a member", member)
	}
	r := h.cg(hb{member: member, epoch: m.epoch, owned: owned})
	if r.ErrorCode != 0 {
		h.t.Fatalf("heartbeat of %s: error %d", member, r.ErrorCode)
	}
	return r
}

// cgOwned is what member a owns now, as a client would list it.
func (h *h) cgOwned(member string) tpset {
	m := h.cmember("cg", member)
	out := m.assigned.clone()
	for t, ps := range m.pending {
		for _, p := range ps {
			out.add(t, p)
		}
	}
	return out
}

// cgSettle has every member heartbeat (finishing revocations at once) until
// the group is Stable.
func (h *h) cgSettle(members ...string) {
	h.t.Helper()
	for round := 0; round < 10; round++ {
		if h.cgroup("cg").state() == "Stable" {
			return
		}
		for _, id := range members {
			h.cgBeat(id, h.cmember("cg", id).assigned.clone())
		}
	}
	h.t.Fatalf("group not Stable: %s", h.cgroup("cg").state())
}

func tps(topic string, ps ...int32) []TopicPartitions {
	return []TopicPartitions{{Topic: topic, Partitions: ps}}
}

func sameTPs(a, b []TopicPartitions) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// checkEvent checks what every consumer event must satisfy.
func checkCEvent(t *testing.T, ev RebalanceEvent, cause CauseKind, member string, from, gen int32, outcome string) {
	t.Helper()
	if ev.Type != "consumer" || ev.Cause.Kind != cause || ev.Cause.MemberID != member || ev.FromGeneration != from ||
		ev.Generation != gen || ev.Outcome != outcome || ev.JoinMs+ev.SyncMs != ev.DurationMs || !ev.End.Equal(ev.Start.Add(time.Duration(ev.DurationMs)*time.Millisecond)) {
		b, _ := json.MarshalIndent(ev, "", " ")
		t.Fatalf("want %s by %q, epoch %d -> %d, %s; got %s", cause, member, from, gen, outcome, b)
	}
}

// A join is one event: the first member's completes at once; the second's
// lasts until the first has revoked and the second has taken its half, and
// records whom it waited for (slowest first) and the partitions moved.
func TestHistoryCGJoin(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4})
	h.cgJoin("a", "t")
	ev := h.events("cg", 1)[0]
	checkCEvent(t, ev, CauseMemberJoined, "a", 0, 1, "stable")
	if ev.Cause.ClientID != "client-a" || ev.Cause.ClientHost != "127.0.0.1" || ev.DurationMs != 0 {
		t.Fatalf("cause %+v duration %d", ev.Cause, ev.DurationMs)
	}
	if len(ev.Members) != 1 || !ev.Members[0].New || !ev.Members[0].Decoded || ev.Members[0].Partitions != 4 || !sameTPs(ev.Members[0].Added, tps("t", 0, 1, 2, 3)) {
		t.Fatalf("members %+v", ev.Members)
	}
	if ev.Protocol != "uniform" || ev.ProtocolType != "consumer" {
		t.Fatalf("protocol %q type %q", ev.Protocol, ev.ProtocolType)
	}

	start := h.now
	h.advance(time.Second)
	joinAt := h.now
	h.cgJoin("b", "t")
	h.events("cg", 1) // in progress: nothing recorded yet
	h.advance(time.Second)
	h.cgBeat("a", h.cgOwned("a")) // told to revoke two
	if h.cmember("cg", "a").state != mUnrevoked {
		t.Fatalf("a state %v", h.cmember("cg", "a").state)
	}
	h.advance(time.Second)
	h.cgBeat("a", h.cmember("cg", "a").assigned.clone()) // revoked
	h.advance(time.Second)
	h.cgBeat("b", tpset{}) // takes its half
	ev = h.events("cg", 2)[1]
	checkCEvent(t, ev, CauseMemberJoined, "b", 1, 2, "stable")
	if !ev.Start.Equal(joinAt) || ev.DurationMs != 3000 || ev.JoinMs != 0 || ev.SyncMs != 3000 || ev.Seq != 2 {
		t.Fatalf("start %v (joined %v, first %v) join %d sync %d total %d", ev.Start, joinAt, start, ev.JoinMs, ev.SyncMs, ev.DurationMs)
	}
	want := []Wait{{MemberID: "b", Phase: "assign", WaitedMs: 3000}, {MemberID: "a", Phase: "revoke", WaitedMs: 2000}}
	if !slices.Equal(ev.WaitedFor, want) {
		t.Fatalf("waited for %+v, want %+v", ev.WaitedFor, want)
	}
	if len(ev.Members) != 2 {
		t.Fatalf("members %+v", ev.Members)
	}
	a, b := ev.Members[0], ev.Members[1]
	if a.MemberID != "a" || a.New || a.Partitions != 2 || len(a.Added) != 0 || len(a.Removed) != 1 || len(a.Removed[0].Partitions) != 2 || !a.Changed {
		t.Fatalf("a %+v", a)
	}
	if b.MemberID != "b" || !b.New || b.Partitions != 2 || !sameTPs(b.Added, a.Removed) {
		t.Fatalf("b %+v (a removed %+v)", b, a.Removed)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// The "now" view of a reconciling group names who has not revoked (with the
// rebalance-timeout deadline once told to) and who waits for partitions, and
// the cause. A member that must give partitions up is waited for as
// revoking from the moment the target is computed, before its next heartbeat
// tells it so (it was named as waiting for partitions, which pointed at the
// wrong member).
func TestHistoryCGWaiting(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4})
	h.cg(hb{member: "a", names: []string{"t"}, owned: tpset{}, rebalance: 20000})
	h.advance(time.Second)
	joinAt := h.now
	h.cgJoin("b", "t")
	h.advance(time.Second)
	if doc, _ := h.s.HistoryDoc("cg", -1, h.now); doc.Waiting == nil || len(doc.Waiting.Members) != 2 ||
		doc.Waiting.Members[0].Phase != "revoke" || doc.Waiting.Members[0].Deadline != nil || doc.Waiting.Members[1].Phase != "assign" {
		t.Fatalf("before a heartbeats: waiting %+v", doc.Waiting)
	}
	h.cgBeat("a", h.cgOwned("a"))
	revokeAt := h.now
	h.advance(time.Second)
	doc, ok := h.s.HistoryDoc("cg", -1, h.now)
	if !ok || doc.Type != "consumer" || doc.State != "Reconciling" || len(doc.History) != 1 {
		t.Fatalf("doc %+v", doc)
	}
	w := doc.Waiting
	if w == nil || w.State != "Reconciling" || !w.Since.Equal(joinAt) || w.Cause == nil || w.Cause.Kind != CauseMemberJoined || w.Cause.MemberID != "b" || len(w.Members) != 2 {
		t.Fatalf("waiting %+v", w)
	}
	a, b := w.Members[0], w.Members[1]
	if a.MemberID != "a" || a.Phase != "revoke" || !a.Since.Equal(joinAt) || a.Deadline == nil || !a.Deadline.Equal(revokeAt.Add(20*time.Second)) || a.ClientID != "client-a" {
		t.Fatalf("a %+v", a)
	}
	if b.MemberID != "b" || b.Phase != "assign" || !b.Since.Equal(joinAt) || b.Deadline != nil {
		t.Fatalf("b %+v", b)
	}
	h.cgSettle("a", "b")
	doc, _ = h.s.HistoryDoc("cg", -1, h.now)
	if doc.Waiting != nil || doc.State != "Stable" || len(doc.History) != 2 {
		t.Fatalf("settled doc %+v", doc)
	}
}

// A leave heartbeat (epoch -1) is one event naming the member; the target
// is computed at the next heartbeat of a remaining member (join_ms), which
// takes the partitions at once.
func TestHistoryCGLeave(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4})
	h.cgJoin("a", "t")
	h.cgJoin("b", "t")
	h.cgSettle("a", "b")
	n := len(h.s.History("cg"))
	h.advance(time.Second)
	leftAt := h.now
	if r := h.cg(hb{member: "b", epoch: h.cmember("cg", "b").epoch}); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	_ = h.cg(hb{member: "b", epoch: epochLeave})
	epoch := h.cgroup("cg").epoch
	h.advance(1500 * time.Millisecond)
	h.cgBeat("a", h.cgOwned("a"))
	ev := h.events("cg", n+1)[n]
	checkCEvent(t, ev, CauseMemberLeft, "b", epoch-1, epoch, "stable")
	if !ev.Start.Equal(leftAt) || ev.JoinMs != 1500 || ev.SyncMs != 0 || !strings.Contains(ev.Cause.Detail, "-1") {
		t.Fatalf("event %+v", ev)
	}
	if len(ev.Members) != 1 || ev.Members[0].MemberID != "a" || ev.Members[0].Partitions != 4 || len(ev.Members[0].Added) != 1 || len(ev.Members[0].Added[0].Partitions) != 2 {
		t.Fatalf("members %+v", ev.Members)
	}
}

// A member that stops heartbeating is fenced when its session expires: one
// event, cause session_timeout with its last heartbeat.
func TestHistoryCGSessionTimeout(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4}, func(c *Config) { c.ConsumerSessionTimeout = 10 * time.Second })
	h.cgJoin("a", "t")
	h.cgJoin("b", "t")
	h.cgSettle("a", "b")
	n := len(h.s.History("cg"))
	last := h.now
	for i := 0; i < 4; i++ { // a keeps heartbeating, b is silent
		h.advance(3 * time.Second)
		h.cgBeat("a", h.cgOwned("a"))
	}
	epoch := h.cgroup("cg").epoch
	if h.cmember("cg", "b") != nil {
		t.Fatal("b not fenced")
	}
	ev := h.events("cg", n+1)[n]
	checkCEvent(t, ev, CauseSessionTimeout, "b", epoch-1, epoch, "stable")
	if ev.Cause.LastHeartbeat == nil || !ev.Cause.LastHeartbeat.Equal(last) || !ev.Cause.At.Equal(last.Add(10*time.Second)) {
		t.Fatalf("cause %+v (last heartbeat %v)", ev.Cause, last)
	}
	if ev.JoinMs != 2000 { // fenced at +10 s, target at a's heartbeat at +12 s
		t.Fatalf("join %d", ev.JoinMs)
	}
}

// A member that does not revoke within its rebalance timeout is evicted:
// the eviction's bump comes while the join it held up is in progress, so
// it is a more cause of that join's event, which names it evicted, and
// waited for (revoke) until then, and ends when the joiner has the whole
// topic.
func TestHistoryCGRebalanceTimeout(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4})
	h.cg(hb{member: "a", names: []string{"t"}, owned: tpset{}, rebalance: 5000})
	h.cgJoin("b", "t")
	h.cgBeat("a", h.cgOwned("a")) // must revoke two
	h.advance(2 * time.Second)
	h.cgBeat("a", h.cgOwned("a")) // still lists them
	h.advance(3 * time.Second)    // rebalance timeout
	if h.cmember("cg", "a") != nil {
		t.Fatal("a not fenced")
	}
	h.cgBeat("b", tpset{})
	evs := h.events("cg", 2)
	ev := evs[1]
	checkCEvent(t, ev, CauseMemberJoined, "b", 1, 3, "stable")
	if !slices.Equal(ev.Evicted, []string{"a"}) || len(ev.MoreCauses) != 1 || ev.MoreCauses[0].Kind != CauseRebalanceTimeout ||
		ev.MoreCauses[0].MemberID != "a" || !strings.Contains(ev.MoreCauses[0].Detail, "did not revoke t[") {
		t.Fatalf("event %+v", ev)
	}
	// The 5 s went to a's revocation, not to computing a target: a is
	// waited for (revoke, evicted), and the replaced target was in force
	// all of join_ms.
	want := []Wait{{MemberID: "a", Phase: "revoke", WaitedMs: 5000, Evicted: true}, {MemberID: "b", Phase: "assign"}}
	if ev.DurationMs != 5000 || ev.JoinMs != 5000 || ev.EarlierTargetMs != 5000 || !slices.Equal(ev.WaitedFor, want) {
		t.Fatalf("durations and waits %+v", ev)
	}
	if len(ev.Members) != 1 || ev.Members[0].Partitions != 4 {
		t.Fatalf("members %+v", ev.Members)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// A changed subscription (names, then a regex) is one event each, saying
// what changed.
func TestHistoryCGSubscriptionChanged(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 2, "u": 2, "xa": 1})
	h.cgJoin("a", "t")
	h.advance(time.Second)
	h.cg(hb{member: "a", epoch: 1, names: []string{"t", "u"}, owned: h.cgOwned("a")})
	re := "x.*"
	h.advance(time.Second)
	h.cg(hb{member: "a", epoch: 2, names: []string{}, regex: &re, owned: h.cgOwned("a")})
	h.cgSettle("a")
	evs := h.events("cg", 3)
	checkCEvent(t, evs[1], CauseSubscriptionChanged, "a", 1, 2, "stable")
	if evs[1].Cause.Detail != "topics [t] -> [t u]" || !sameTPs(evs[1].Members[0].Added, tps("u", 0, 1)) {
		t.Fatalf("event %+v", evs[1])
	}
	checkCEvent(t, evs[2], CauseSubscriptionChanged, "a", 2, 3, "stable")
	if !strings.Contains(evs[2].Cause.Detail, `regex "" -> "x.*"`) || !strings.Contains(evs[2].Cause.Detail, "topics [t u] -> []") {
		t.Fatalf("cause %+v", evs[2].Cause)
	}
	if len(evs[2].Members[0].Removed) != 2 || !sameTPs(evs[2].Members[0].Added, tps("xa", 0)) {
		t.Fatalf("members %+v", evs[2].Members)
	}
}

// Topics created (matched by a regex or subscribed by name before they
// existed), grown and deleted bump the epoch: one topics_changed event each,
// naming the topics.
func TestHistoryCGTopicsChanged(t *testing.T) {
	h, cat := newCH(t, map[string]int32{"t": 2})
	re := "x.*"
	h.cg(hb{member: "a", names: []string{"t", "later"}, owned: tpset{}})
	h.cg(hb{member: "b", names: []string{}, regex: &re, owned: tpset{}})
	h.cgSettle("a", "b")
	n := len(h.s.History("cg"))
	step := func(what string, change func()) RebalanceEvent {
		t.Helper()
		change()
		h.advance(time.Second)
		h.cgBeat("a", h.cgOwned("a"))
		h.cgBeat("b", h.cgOwned("b"))
		h.cgSettle("a", "b")
		evs := h.s.History("cg")
		if len(evs) != n+1 {
			t.Fatalf("%s: %d new events", what, len(evs)-n)
		}
		n++
		ev := evs[n-1]
		checkCEvent(t, ev, CauseTopicsChanged, "", ev.Generation-1, ev.Generation, "stable")
		return ev
	}
	ev := step("grow", func() { cat.AddPartitions("t", 3, nil) })
	if !slices.Equal(ev.Cause.Topics, []string{"t"}) || ev.Cause.Detail != "t partitions 2 -> 3" {
		t.Fatalf("grow: %+v", ev.Cause)
	}
	ev = step("create by name", func() { cat.Create("later", 1, nil) })
	if !slices.Equal(ev.Cause.Topics, []string{"later"}) || ev.Cause.Detail != "created later (1 partitions)" {
		t.Fatalf("create: %+v", ev.Cause)
	}
	ev = step("create by regex", func() { cat.Create("xb", 2, nil) })
	if !slices.Equal(ev.Cause.Topics, []string{"xb"}) || ev.Cause.Detail != "created xb (2 partitions)" {
		t.Fatalf("regex: %+v", ev.Cause)
	}
	var b MemberChange
	for _, m := range ev.Members {
		if m.MemberID == "b" {
			b = m
		}
	}
	if !sameTPs(b.Added, tps("xb", 0, 1)) {
		t.Fatalf("b %+v", b)
	}
	ev = step("delete", func() { cat.Delete("xb") })
	if !slices.Equal(ev.Cause.Topics, []string{"xb"}) || ev.Cause.Detail != "deleted xb" {
		t.Fatalf("delete: %+v", ev.Cause)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// A static member that left with epoch -2 and comes back as a new process
// with another subscription: one event, static_replaced naming the new
// member and the old one; with the same subscription nothing is a
// rebalance and nothing is recorded.
func TestHistoryCGStaticReplaced(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 2, "u": 2})
	inst := "i1"
	h.cg(hb{member: "a1", instance: &inst, names: []string{"t"}, owned: tpset{}})
	h.cg(hb{member: "a1", instance: &inst, epoch: epochStatic})
	h.cg(hb{member: "a2", instance: &inst, names: []string{"t"}, owned: tpset{}})
	h.cgSettle("a2")
	h.events("cg", 1)
	h.cg(hb{member: "a2", instance: &inst, epoch: epochStatic})
	h.advance(time.Second)
	h.cg(hb{member: "a3", instance: &inst, names: []string{"t", "u"}, owned: tpset{}})
	h.cgSettle("a3")
	evs := h.events("cg", 2)
	checkCEvent(t, evs[1], CauseStaticReplaced, "a3", 1, 2, "stable")
	if evs[1].Cause.InstanceID != "i1" || evs[1].Cause.Detail != "replaced member a2" || evs[1].Cause.ClientID != "client-a3" ||
		len(evs[1].MoreCauses) != 1 || evs[1].MoreCauses[0].Kind != CauseSubscriptionChanged {
		t.Fatalf("event %+v", evs[1])
	}
	// a3 inherits a2's partitions: only u is added.
	if m := evs[1].Members[0]; m.MemberID != "a3" || m.New || !sameTPs(m.Added, tps("u", 0, 1)) || len(m.Removed) != 0 {
		t.Fatalf("member %+v", m)
	}
}

// An operator removing a member by instance id (LeaveGroup, as
// kafka-consumer-groups --delete-members does) is one admin event.
func TestHistoryCGAdmin(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 2})
	inst := "i1"
	h.cg(hb{member: "a", instance: &inst, names: []string{"t"}, owned: tpset{}})
	h.cgJoin("b", "t")
	h.cgSettle("a", "b")
	n := len(h.s.History("cg"))
	if r := h.leave("cg", lm("", "i1")); r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
		t.Fatalf("leave %+v", r)
	}
	h.cgSettle("b")
	ev := h.events("cg", n+1)[n]
	checkCEvent(t, ev, CauseAdmin, "a", ev.Generation-1, ev.Generation, "stable")
	if ev.Cause.InstanceID != "i1" || ev.Cause.Detail != "remove_members" {
		t.Fatalf("cause %+v", ev.Cause)
	}
}

// The last member leaving ends its event as empty at once.
func TestHistoryCGEmpty(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 2})
	h.cgJoin("a", "t")
	h.cg(hb{member: "a", epoch: epochLeave})
	evs := h.events("cg", 2)
	checkCEvent(t, evs[1], CauseMemberLeft, "a", 1, 2, "empty")
	if len(evs[1].Members) != 0 {
		t.Fatalf("members %+v", evs[1].Members)
	}
}

// A group loaded while reconciling (restart or failover) starts an event
// with cause loaded, which completes when the members have reconciled; the
// history stored before survives the reload unchanged.
func TestHistoryCGLoaded(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4})
	h.cgJoin("a", "t")
	h.cgJoin("b", "t")
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
	h.advance(time.Second)
	h.s = h.reload()
	loadedAt := h.now
	doc, _ := h.s.HistoryDoc("cg", -1, h.now)
	if len(doc.History) != 1 || doc.Waiting == nil || doc.Waiting.Cause == nil || doc.Waiting.Cause.Kind != CauseLoaded || len(doc.Waiting.Members) != 2 {
		t.Fatalf("doc %+v waiting %+v", doc, doc.Waiting)
	}
	h.advance(time.Second)
	h.cgSettle("a", "b")
	ev := h.events("cg", 2)[1]
	checkCEvent(t, ev, CauseLoaded, "", 2, 2, "stable")
	if !ev.Start.Equal(loadedAt) || ev.Seq != 2 || !strings.Contains(ev.Cause.Detail, "Reconciling") {
		t.Fatalf("event %+v", ev)
	}
}

// Consumer events count for the storm detector like classic ones: flagged
// above the threshold with the causes counted, unflagged when the window
// slides.
func TestHistoryCGStorm(t *testing.T) {
	var changes []StormStatus
	h, _ := newCH(t, map[string]int32{"t": 2}, func(c *Config) {
		c.StormThreshold, c.StormWindow = 2, time.Minute
		c.OnStorm = func(s StormStatus) { changes = append(changes, s) }
	})
	h.cgJoin("a", "t")
	members := []string{"a"}
	for _, id := range []string{"b", "c"} { // three rebalances, each settled
		h.advance(time.Second)
		h.cgJoin(id, "t")
		members = append(members, id)
		h.cgSettle(members...)
	}
	st := h.s.storm("cg", h.now)
	if !st.Flagged || st.Count != 3 || st.Causes[CauseMemberJoined] != 3 || len(changes) != 1 || !changes[0].Flagged {
		t.Fatalf("storm %+v changes %+v", st, changes)
	}
	for i := 0; i < 2; i++ {
		h.advance(30 * time.Second)
		for _, id := range []string{"a", "b", "c"} { // keep the sessions alive
			h.cgBeat(id, h.cgOwned(id))
		}
	}
	if st := h.s.storm("cg", h.now); st.Flagged || len(changes) != 2 || changes[1].Flagged {
		t.Fatalf("after the window: %+v changes %+v", st, changes)
	}
}

// DescribeGroups tag 10001 answers for a consumer-protocol group too: its
// entry is GROUP_ID_NOT_FOUND (as Kafka answers) and carries the document.
func TestHistoryCGTag(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 2})
	h.cgJoin("a", "t")
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 6
	req.Groups = []string{"cg"}
	RequestHistory(req, -1)
	back := kmsg.NewPtrDescribeGroupsRequest()
	back.Version = 6
	if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	tk := h.do(func(t Ticket, out *Output) { h.s.Handle(h.now, t, Client{}, back, out) })
	resp := h.resp(tk).(*kmsg.DescribeGroupsResponse)
	dec := kmsg.NewPtrDescribeGroupsResponse()
	dec.Version = 6
	if err := dec.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	d := &dec.Groups[0]
	doc, ok := HistoryTagOf(d)
	if d.ErrorCode != ErrGroupIDNotFound || !ok || doc.Type != "consumer" || doc.State != "Stable" || len(doc.History) != 1 || doc.History[0].Cause.Kind != CauseMemberJoined {
		t.Fatalf("entry %+v doc %+v", d, doc)
	}
}

// A classic group upgraded to the consumer protocol in the middle of a
// rebalance ends that rebalance as superseded, saying why; the consumer
// member's join and leave are consumer events; its leave turns the group
// classic again (the leave's event is superseded, naming the conversion),
// and the classic rebalance that follows names the conversion as its cause.
func TestHistoryCGMigration(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	id1, _, gen := h.classicStable()
	_ = gen // no offset committed: the downgrade must keep the group by its members alone
	h.events("cg", 1)
	h.join("cg", jo{member: id1, client: "c1", protos: protos("range", string(subscription(nil, "a")))})
	if r := h.cgJoin("n1", "a"); r.ErrorCode != 0 {
		t.Fatalf("upgrade: %d", r.ErrorCode)
	}
	evs := h.events("cg", 2)
	if e := evs[1]; e.Type != "classic" || e.Outcome != "superseded" || len(e.MoreCauses) == 0 ||
		!strings.Contains(e.MoreCauses[len(e.MoreCauses)-1].Detail, "converted to the consumer protocol") {
		t.Fatalf("classic event at the upgrade %+v", e)
	}
	h.cg(hb{member: "n1", epoch: epochLeave})
	// n1's leave comes while its join's event is in progress (the classic
	// member has not reconciled): one event, ended by the conversion.
	evs = h.events("cg", 3)
	checkCEvent(t, evs[2], CauseMemberJoined, "n1", evs[2].FromGeneration, evs[2].FromGeneration+2, "superseded")
	if m := evs[2].MoreCauses; len(m) != 2 || m[0].Kind != CauseMemberLeft || m[0].MemberID != "n1" || m[1].Detail != "group converted to the classic protocol" {
		t.Fatalf("more causes %+v", m)
	}
	doc, _ := h.s.HistoryDoc("cg", 0, h.now)
	if w := doc.Waiting; doc.Type != "classic" || w == nil || w.Cause == nil || w.Cause.Kind != CauseOther || !strings.Contains(w.Cause.Detail, "converted from the consumer protocol") {
		t.Fatalf("doc %+v waiting %+v", doc, doc.Waiting)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// A burst of joins before anyone reconciles is one rebalance: the first
// join is the cause, the others more causes, and the event ends when every
// member holds its target. Past cMergeCauses more causes the next bump
// supersedes the event, so continuous churn still ends events.
func TestHistoryCGJoinBurst(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 200})
	h.cgJoin("a", "t")
	members := []string{"a"}
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("b%d", i)
		h.advance(10 * time.Millisecond)
		h.cgJoin(id, "t")
		members = append(members, id)
	}
	h.cgSettle(members...)
	evs := h.events("cg", 2)
	ev := evs[1]
	checkCEvent(t, ev, CauseMemberJoined, "b0", 1, 5, "stable")
	if len(ev.MoreCauses) != 3 || ev.MoreCauses[2].MemberID != "b3" || len(ev.Members) != 5 {
		t.Fatalf("burst event %+v", ev)
	}

	for i := 0; i < cMergeCauses+2; i++ {
		id := fmt.Sprintf("c%02d", i)
		h.cgJoin(id, "t")
		members = append(members, id)
	}
	evs = h.events("cg", 3)
	if ev := evs[2]; ev.Outcome != "superseded" || ev.Cause.MemberID != "c00" || len(ev.MoreCauses) != cMergeCauses {
		t.Fatalf("bounded event: outcome %s cause %s, %d more causes", ev.Outcome, ev.Cause.MemberID, len(ev.MoreCauses))
	}
	h.cgSettle(members...)
	evs = h.events("cg", 4)
	checkCEvent(t, evs[3], CauseMemberJoined, fmt.Sprintf("c%02d", cMergeCauses+1), evs[2].Generation, evs[2].Generation+1, "stable")
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// A rebalance whose completing write fails did not happen: the partition
// reloads from the store, where the group is still reconciling, and the
// loaded group's event (cause loaded) is the one that completes. OnRebalance
// (cohort_rebalances_total and the phase histograms) tells each event the
// history keeps once, when its write is durable; it told the failed
// completion as well, so the one rebalance counted twice.
func TestHistoryCGFailedCompletionToldOnce(t *testing.T) {
	var seen []RebalanceEvent
	h, _ := newCH(t, map[string]int32{"t": 4}, func(c *Config) {
		c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) }
	})
	h.cgJoin("a", "t")
	h.cgJoin("b", "t")
	h.advance(time.Second)
	h.cgBeat("a", h.cgOwned("a")) // told to revoke two
	h.advance(time.Second)
	h.cgBeat("a", h.cmember("cg", "a").assigned.clone()) // revoked
	h.advance(time.Second)
	// b takes its half: the heartbeat that completes the rebalance. Its
	// write fails.
	h.fail = ErrCoordinatorNotAvailable
	r := h.cg(hb{member: "b", epoch: h.cmember("cg", "b").epoch, owned: tpset{}})
	h.fail = ErrNone
	if r.ErrorCode != ErrCoordinatorNotAvailable || len(h.s.History("cg")) != 2 || !h.s.NeedsReload() {
		t.Fatalf("completing heartbeat: error %d, %d events in memory, reload %v; want COORDINATOR_NOT_AVAILABLE, 2, true",
			r.ErrorCode, len(h.s.History("cg")), h.s.NeedsReload())
	}
	h.adopt() // the runtime's reload
	h.advance(time.Second)
	h.cgSettle("a", "b")
	evs := h.events("cg", 2)
	checkCEvent(t, evs[1], CauseLoaded, "", 2, 2, "stable")
	if len(seen) != len(evs) {
		b, _ := json.MarshalIndent(seen, "", " ")
		t.Fatalf("OnRebalance told %d events, the history holds %d: %s", len(seen), len(evs), b)
	}
	for i := range evs {
		if seen[i].Seq != evs[i].Seq || seen[i].Cause.Kind != evs[i].Cause.Kind {
			t.Fatalf("OnRebalance told event %d as seq %d cause %s, the history holds seq %d cause %s",
				i, seen[i].Seq, seen[i].Cause.Kind, evs[i].Seq, evs[i].Cause.Kind)
		}
	}
}

// The storm a rebalance would make is flagged once that rebalance is
// durable, as for classic groups: a completion whose write fails did not
// happen, and flagging it (OnStorm, cohort_rebalance_storms_total) counted
// the group's one storm twice, once for the failed completion and once when
// the reloaded group's own event took it over the threshold again.
func TestHistoryCGFailedCompletionStormFlaggedOnce(t *testing.T) {
	var flagged []StormStatus
	h, _ := newCH(t, map[string]int32{"t": 4}, func(c *Config) {
		c.StormThreshold, c.StormWindow = 1, time.Minute
		c.OnStorm = func(s StormStatus) {
			if s.Flagged {
				flagged = append(flagged, s)
			}
		}
	})
	h.cgJoin("a", "t") // one event: at the threshold
	h.cgJoin("b", "t")
	h.advance(time.Second)
	h.cgBeat("a", h.cgOwned("a")) // told to revoke two
	h.advance(time.Second)
	h.cgBeat("a", h.cmember("cg", "a").assigned.clone()) // revoked
	h.advance(time.Second)
	h.fail = ErrCoordinatorNotAvailable // b's heartbeat completes the rebalance; its write fails
	r := h.cg(hb{member: "b", epoch: h.cmember("cg", "b").epoch, owned: tpset{}})
	h.fail = ErrNone
	if r.ErrorCode != ErrCoordinatorNotAvailable || !h.s.NeedsReload() {
		t.Fatalf("completing heartbeat: error %d, reload %v", r.ErrorCode, h.s.NeedsReload())
	}
	if len(flagged) != 0 {
		t.Fatalf("flagged by a rebalance whose write failed: %+v", flagged)
	}
	h.adopt()
	h.advance(time.Second)
	h.cgSettle("a", "b") // the loaded event: two stored, over the threshold
	h.events("cg", 2)
	if len(flagged) != 1 || flagged[0].Loaded || flagged[0].Count != 2 {
		t.Fatalf("flagged %+v, want once (count 2, not at a load)", flagged)
	}
}

// A static member away for a restart (epoch -2) keeps the group Reconciling
// but starts no rebalance: the "now" view says so, naming the member as
// "away" since its leave, with its session's end as the deadline, and no
// cause or start of a rebalance (it said a rebalance was in progress since
// the group was made, and that the member had not reached its target). In
// a rebalance of the members present, the one away is listed as away beside
// them.
func TestHistoryCGStaticAway(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4}, func(c *Config) { c.ConsumerSessionTimeout = 30 * time.Second })
	inst := "i-1"
	h.cg(hb{member: "a", names: []string{"t"}, owned: tpset{}})
	h.advance(time.Second)
	h.cg(hb{member: "s2", instance: &inst, names: []string{"t"}, owned: tpset{}})
	h.cgSettle("a", "s2")
	if doc, _ := h.s.HistoryDoc("cg", -1, h.now); doc.Waiting != nil || doc.State != "Stable" {
		t.Fatalf("settled: %+v", doc.Waiting)
	}
	h.advance(2 * time.Second)
	h.cgBeat("a", h.cgOwned("a"))
	h.cgBeat("s2", h.cgOwned("s2"))
	leftAt := h.now
	h.cg(hb{member: "s2", epoch: -2, instance: &inst})
	h.advance(3 * time.Second)
	doc, _ := h.s.HistoryDoc("cg", -1, h.now)
	if doc.State != "Reconciling" {
		t.Fatalf("state %s", doc.State)
	}
	w := doc.Waiting
	if w == nil || len(w.Members) != 1 {
		t.Fatalf("waiting %+v", w)
	}
	m := w.Members[0]
	if m.MemberID != "s2" || m.InstanceID != inst || m.Phase != "away" || !m.Since.Equal(leftAt) ||
		m.Deadline == nil || !m.Deadline.Equal(leftAt.Add(30*time.Second)) {
		t.Fatalf("away member %+v (left at %v)", m, leftAt)
	}
	if w.Cause != nil || !w.Since.Equal(leftAt) || !w.OnlyAway {
		t.Fatalf("no rebalance is in progress, yet since %v cause %+v only away %v", w.Since, w.Cause, w.OnlyAway)
	}
	// A join while s2 is away: a rebalance of the others, s2 still away.
	h.cgJoin("c", "t")
	doc, _ = h.s.HistoryDoc("cg", -1, h.now)
	w = doc.Waiting
	if w == nil || w.Cause == nil || w.Cause.MemberID != "c" || !w.Since.Equal(h.now) || w.OnlyAway {
		t.Fatalf("rebalance while away: %+v", w)
	}
	var away, others int
	for _, m := range w.Members {
		if m.Phase == "away" {
			away++
			if m.MemberID != "s2" {
				t.Fatalf("away %+v", m)
			}
		} else {
			others++
		}
	}
	if away != 1 || others == 0 {
		t.Fatalf("members %+v", w.Members)
	}
}

// The on-call case: a member (slowC, rebalance timeout 10 s) never revokes
// what a join takes from it and is fenced at its deadline; the target at the
// eviction's epoch is computed at the next heartbeat, 2.2 s later. The event
// must say that its 12.2 s before that target were spent waiting for slowC to
// revoke (10 s, then evicted) and then for a heartbeat (2.2 s), not computing
// an assignment: slowC is in waited_for and earlier_target_ms is the 10 s
// the replaced target was in force. Before, waited_for held only the joiner
// and nothing told the 12.2 s of join_ms apart.
func TestHistoryCGRevokeWaitBeforeEviction(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4})
	h.cg(hb{member: "slowC", names: []string{"t"}, owned: tpset{}, rebalance: 10000})
	n := len(h.s.History("cg"))
	start := h.now
	h.cgJoin("vP3y", "t")
	h.cgBeat("slowC", h.cgOwned("slowC")) // told to revoke two
	if h.cmember("cg", "slowC").state != mUnrevoked {
		t.Fatalf("slowC state %v", h.cmember("cg", "slowC").state)
	}
	h.advance(10 * time.Second) // slowC's rebalance timeout fences it
	if h.cmember("cg", "slowC") != nil {
		t.Fatal("slowC not fenced")
	}
	h.advance(2200 * time.Millisecond)
	h.cgBeat("vP3y", tpset{}) // computes the target at the eviction's epoch, and takes the whole topic
	ev := h.events("cg", n+1)[n]
	checkCEvent(t, ev, CauseMemberJoined, "vP3y", 1, 3, "stable")
	if !ev.Start.Equal(start) || ev.DurationMs != 12200 || ev.JoinMs != 12200 || ev.SyncMs != 0 {
		t.Fatalf("duration %d join %d sync %d (start %v, want %v)", ev.DurationMs, ev.JoinMs, ev.SyncMs, ev.Start, start)
	}
	if ev.EarlierTargetMs != 10000 {
		t.Fatalf("earlier_target_ms %d, want 10000 (the replaced target was in force 10 s)", ev.EarlierTargetMs)
	}
	want := []Wait{{MemberID: "slowC", Phase: "revoke", WaitedMs: 10000, Evicted: true}, {MemberID: "vP3y", Phase: "assign"}}
	if !slices.Equal(ev.WaitedFor, want) {
		t.Fatalf("waited for %+v, want %+v", ev.WaitedFor, want)
	}
	if !slices.Equal(ev.Evicted, []string{"slowC"}) {
		t.Fatalf("evicted %v", ev.Evicted)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// A member fenced during an event and rejoining with the same member id
// before the event ends is listed once in waited_for (and once in evicted):
// the entry of its fencing, which is the wait that held the rebalance up;
// its reconciliation after the rejoin is not a second entry.
func TestHistoryCGFencedRejoinWaitedOnce(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4})
	h.cg(hb{member: "slowC", names: []string{"t"}, owned: tpset{}, rebalance: 10000})
	n := len(h.s.History("cg"))
	h.cgJoin("vP3y", "t")
	h.cgBeat("slowC", h.cgOwned("slowC")) // told to revoke two
	h.advance(10 * time.Second)           // slowC's rebalance timeout fences it
	if h.cmember("cg", "slowC") != nil {
		t.Fatal("slowC not fenced")
	}
	h.advance(time.Second)
	// slowC's client rejoins with the id it chose (KIP-848: epoch 0): a
	// bump the event in progress takes in.
	if r := h.cg(hb{member: "slowC", names: []string{"t"}, owned: tpset{}, rebalance: 10000}); r.ErrorCode != 0 {
		t.Fatalf("rejoin: error %d", r.ErrorCode)
	}
	h.advance(500 * time.Millisecond)
	h.cgSettle("vP3y", "slowC")
	evs := h.events("cg", n+1)
	ev := evs[len(evs)-1]
	if ev.Outcome != "stable" || ev.Cause.Kind != CauseMemberJoined || ev.Cause.MemberID != "vP3y" {
		b, _ := json.Marshal(ev)
		t.Fatalf("not the join's event: %s", b)
	}
	count := map[string]int{}
	for _, w := range ev.WaitedFor {
		count[w.MemberID]++
	}
	if count["slowC"] != 1 || count["vP3y"] != 1 {
		t.Fatalf("waited_for lists a member more than once: %+v", ev.WaitedFor)
	}
	i := slices.IndexFunc(ev.WaitedFor, func(w Wait) bool { return w.MemberID == "slowC" })
	if w := ev.WaitedFor[i]; !w.Evicted || w.Phase != "revoke" || w.WaitedMs != 10000 {
		t.Fatalf("slowC's entry %+v, want its fencing's (revoke, 10000 ms, evicted)", w)
	}
	if !slices.Equal(ev.Evicted, []string{"slowC"}) {
		t.Fatalf("evicted %v", ev.Evicted)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}
