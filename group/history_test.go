package group

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// events returns g's stored history, failing when it does not have n events.
func (h *h) events(group string, n int) []RebalanceEvent {
	h.t.Helper()
	evs := h.s.History(group)
	if len(evs) != n {
		b, _ := json.MarshalIndent(evs, "", " ")
		h.t.Fatalf("%d events, want %d: %s", len(evs), n, b)
	}
	return evs
}

// rejoinAndSync has the listed members rejoin (the first is expected to
// lead) and sync the generation.
func (h *h) rejoinAndSync(group string, ids ...string) int32 {
	h.t.Helper()
	var ts []Ticket
	for _, id := range ids {
		ts = append(ts, h.join(group, jo{member: id}))
	}
	r := h.joinResp(ts[0])
	if r.ErrorCode != 0 {
		h.t.Fatalf("rejoin: %d", r.ErrorCode)
	}
	h.syncAll(group, r.LeaderID, ids, r.Generation)
	return r.Generation
}

// The group's first generation is one event started by the first member's
// join; the second member's join is one more cause of the same event. Every
// member is new, and each is named with its client id.
func TestHistoryNewMembers(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	ev := h.events("g", 1)[0]
	if ev.Cause.Kind != CauseMemberJoined || ev.Cause.ClientID != "cli" || ev.Cause.ClientHost != "127.0.0.1" {
		t.Fatalf("cause %+v", ev.Cause)
	}
	if len(ev.MoreCauses) != 1 || ev.MoreCauses[0].Kind != CauseMemberJoined {
		t.Fatalf("more causes %+v", ev.MoreCauses)
	}
	if ev.Outcome != "stable" || ev.Generation != gen || ev.FromGeneration != 0 || ev.Leader != ids[0] || ev.Protocol != "range" || ev.Seq != 1 {
		t.Fatalf("event %+v", ev)
	}
	if len(ev.Members) != 2 || !ev.Members[0].New || !ev.Members[1].New || !ev.Members[0].Changed {
		t.Fatalf("members %+v", ev.Members)
	}
	if ev.JoinMs+ev.SyncMs != ev.DurationMs || ev.JoinMs <= 0 {
		t.Fatalf("durations join %d sync %d total %d", ev.JoinMs, ev.SyncMs, ev.DurationMs)
	}
}

// A LeaveGroup starts one event naming the member and its KIP-800 reason;
// the join phase lasts until the remaining member rejoined, and the wait
// for it is recorded.
func TestHistoryLeave(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	m := lm(ids[1])
	reason := "shutting down"
	m.Reason = &reason
	h.leave("g", m)
	h.advance(2 * time.Second)
	h.rejoinAndSync("g", ids[0])
	ev := h.events("g", 2)[1]
	if ev.Cause.Kind != CauseMemberLeft || ev.Cause.MemberID != ids[1] || ev.Cause.Reason != reason || len(ev.MoreCauses) != 0 {
		t.Fatalf("cause %+v more %+v", ev.Cause, ev.MoreCauses)
	}
	if ev.JoinMs != 2000 || ev.SyncMs != 0 || ev.DurationMs != 2000 {
		t.Fatalf("join %d sync %d total %d", ev.JoinMs, ev.SyncMs, ev.DurationMs)
	}
	if len(ev.WaitedFor) != 2 || ev.WaitedFor[0].MemberID != ids[0] || ev.WaitedFor[0].Phase != "join" || ev.WaitedFor[0].WaitedMs != 2000 {
		t.Fatalf("waited %+v", ev.WaitedFor)
	}
	if len(ev.Members) != 1 || ev.Members[0].New || ev.Members[0].Changed {
		t.Fatalf("members %+v", ev.Members) // syncAll gives the same bytes again
	}
}

// A member that stops heartbeating starts one event of cause session
// timeout, with its last heartbeat.
func TestHistorySessionTimeout(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	hb := h.now
	for i := 0; i < 4; i++ { // the leader heartbeats, the follower does not
		h.advance(3 * time.Second)
		h.heartbeat("g", ids[0], gen)
	}
	if h.s.Group("g").State() != PreparingRebalance {
		t.Fatalf("state %v", h.s.Group("g").State())
	}
	h.rejoinAndSync("g", ids[0])
	ev := h.events("g", 2)[1]
	if ev.Cause.Kind != CauseSessionTimeout || ev.Cause.MemberID != ids[1] || ev.Cause.LastHeartbeat == nil || !ev.Cause.LastHeartbeat.Equal(hb) {
		t.Fatalf("cause %+v (last heartbeat %v, want %v)", ev.Cause, ev.Cause.LastHeartbeat, hb)
	}
}

// A member that does not rejoin within the rebalance timeout is evicted:
// one more cause of the event in progress, listed as evicted and as the
// slowest wait.
func TestHistoryRebalanceTimeout(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	tk := h.join("g", jo{member: ids[0]}) // the leader rejoins: a rebalance
	for i := 0; i < 7; i++ {              // the follower heartbeats but never rejoins
		h.advance(5 * time.Second)
		h.heartbeat("g", ids[1], gen)
	}
	r := h.joinResp(tk)
	if r.ErrorCode != 0 {
		t.Fatalf("join %d", r.ErrorCode)
	}
	h.syncAll("g", ids[0], ids[:1], r.Generation)
	ev := h.events("g", 2)[1]
	if ev.Cause.Kind != CauseMetadataChanged || ev.Cause.MemberID != ids[0] || ev.Cause.Detail == "" {
		t.Fatalf("cause %+v", ev.Cause)
	}
	if len(ev.MoreCauses) != 1 || ev.MoreCauses[0].Kind != CauseRebalanceTimeout || ev.MoreCauses[0].MemberID != ids[1] {
		t.Fatalf("more causes %+v", ev.MoreCauses)
	}
	if len(ev.Evicted) != 1 || ev.Evicted[0] != ids[1] {
		t.Fatalf("evicted %v", ev.Evicted)
	}
	if w := ev.WaitedFor[0]; w.MemberID != ids[1] || !w.Evicted || w.WaitedMs != 30_000 || ev.JoinMs != 30_000 {
		t.Fatalf("waited %+v join %d", ev.WaitedFor, ev.JoinMs)
	}
}

// A follower that never sends SyncGroup is removed by the sync timeout: the
// generation was already Stable (the leader synced), so it is a new event.
// A leader that never syncs is recorded as such.
func TestHistorySyncTimeouts(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	a, b := h.join("g", jo{member: ids[0]}), h.join("g", jo{member: ids[1]})
	gen := h.joinResp(a).Generation
	_ = h.joinResp(b)
	h.sync("g", ids[0], gen, map[string]string{ids[0]: "x", ids[1]: "y"})
	for i := 0; i < 7; i++ {
		h.advance(5 * time.Second)
		h.heartbeat("g", ids[0], gen)
		h.heartbeat("g", ids[1], gen)
	}
	h.rejoinAndSync("g", ids[0])
	evs := h.events("g", 3)
	if evs[1].Outcome != "stable" || evs[2].Cause.Kind != CauseSyncTimeout || evs[2].Cause.MemberID != ids[1] {
		t.Fatalf("events %+v / %+v", evs[1], evs[2].Cause)
	}

	// The leader never syncs: every member is removed in the same event.
	h2 := newH(t)
	h2.session = 60_000 // the sync timeout (30 s) comes first
	ids, _ = h2.stableGroup("g", 2)
	a, b = h2.join("g", jo{member: ids[0]}), h2.join("g", jo{member: ids[1]})
	_, _ = h2.joinResp(a), h2.joinResp(b)
	h2.sync("g", ids[1], h2.joinResp(a).Generation, nil)
	h2.advance(31 * time.Second)
	h2.rejoinAndSync("g", ids[1])
	ev := h2.events("g", 2)[1]
	if ev.Outcome != "stable" || ev.Evicted[0] != ids[0] || len(ev.MoreCauses) != 1 || ev.MoreCauses[0].Kind != CauseLeaderNotSynced || ev.MoreCauses[0].MemberID != ids[0] {
		t.Fatalf("event %+v", ev)
	}
}

// A static member replaced by a new process with other metadata starts one
// event naming the new member id and the old; an admin removal by instance
// id is an admin cause.
func TestHistoryStaticReplaceAndAdmin(t *testing.T) {
	h := newH(t)
	j1 := h.join("g", jo{instance: "i1"})
	h.advance(0)
	r := h.joinResp(j1)
	h.syncAll("g", r.LeaderID, []string{r.MemberID}, r.Generation)
	h.join("g", jo{member: r.MemberID, instance: "i1"}) // the leader rejoins: CompletingRebalance
	j2 := h.join("g", jo{instance: "i1", protos: protos("range", "other")})
	r2 := h.joinResp(j2)
	if r2.ErrorCode != 0 {
		t.Fatalf("replacement join %d", r2.ErrorCode)
	}
	h.syncAll("g", r2.LeaderID, []string{r2.MemberID}, r2.Generation)
	ev := h.events("g", 2)[1]
	if ev.Cause.Kind != CauseMetadataChanged || len(ev.MoreCauses) != 1 {
		t.Fatalf("cause %+v more %+v", ev.Cause, ev.MoreCauses)
	}
	if c := ev.MoreCauses[0]; c.Kind != CauseStaticReplaced || c.MemberID != r2.MemberID || c.InstanceID != "i1" || c.Detail != "replaced member "+r.MemberID {
		t.Fatalf("more cause %+v", c)
	}
	if len(ev.Members) != 1 || ev.Members[0].New { // the same instance: not a new member
		t.Fatalf("members %+v", ev.Members)
	}
	h.leave("g", kmsg.LeaveGroupRequestMember{InstanceID: kmsg.StringPtr("i1")})
	ev = h.events("g", 3)[2]
	if ev.Cause.Kind != CauseAdmin || ev.Cause.Detail != "remove_members" || ev.Outcome != "empty" {
		t.Fatalf("event %+v", ev)
	}
}

// consumerAssignment encodes a classic consumer protocol assignment.
func consumerAssignment(topic string, ps ...int32) string {
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: topic, Partitions: ps})
	return string(a.AppendTo(nil))
}

// For protocol type consumer the assignments are decoded: each member's
// partitions added and removed.
func TestHistoryConsumerAssignmentDiff(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	a, b := h.join("g", jo{member: ids[0]}), h.join("g", jo{member: ids[1]})
	gen := h.joinResp(a).Generation
	_ = h.joinResp(b)
	// First a known assignment, then move partition 1.
	h.sync("g", ids[1], gen, nil)
	h.sync("g", ids[0], gen, map[string]string{ids[0]: consumerAssignment("t", 0, 1), ids[1]: consumerAssignment("t", 2)})
	a, b = h.join("g", jo{member: ids[0]}), h.join("g", jo{member: ids[1]})
	gen = h.joinResp(a).Generation
	_ = h.joinResp(b)
	h.sync("g", ids[1], gen, nil)
	h.sync("g", ids[0], gen, map[string]string{ids[0]: consumerAssignment("t", 0), ids[1]: consumerAssignment("t", 1, 2)})
	ev := h.events("g", 3)[2]
	byID := map[string]MemberChange{}
	for _, m := range ev.Members {
		byID[m.MemberID] = m
	}
	l, f := byID[ids[0]], byID[ids[1]]
	if !l.Decoded || l.Partitions != 1 || len(l.Removed) != 1 || l.Removed[0].Topic != "t" || len(l.Removed[0].Partitions) != 1 || l.Removed[0].Partitions[0] != 1 || len(l.Added) != 0 {
		t.Fatalf("leader %+v", l)
	}
	if !f.Decoded || f.Partitions != 2 || len(f.Added) != 1 || f.Added[0].Partitions[0] != 1 || len(f.Removed) != 0 || !f.Changed {
		t.Fatalf("follower %+v", f)
	}
}

// A group rebalancing more than the threshold within the window is flagged
// (OnStorm), with its causes counted, and unflagged when the window slides
// past; OnRebalance sees every event.
func TestHistoryStorm(t *testing.T) {
	var storms []StormStatus
	var seen []RebalanceEvent
	h := newH(t, func(c *Config) {
		c.StormThreshold, c.StormWindow = 2, time.Minute
		c.OnStorm = func(s StormStatus) { storms = append(storms, s) }
		c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) }
	})
	ids, _ := h.stableGroup("g", 1)
	h.advance(time.Second)
	h.rejoinAndSync("g", ids[0])
	if len(storms) != 0 {
		t.Fatalf("flagged after 2: %+v", storms)
	}
	h.advance(time.Second)
	h.rejoinAndSync("g", ids[0])
	if len(storms) != 1 || !storms[0].Flagged || storms[0].Count != 3 || storms[0].Causes[CauseMetadataChanged] != 2 || storms[0].Causes[CauseMemberJoined] != 1 {
		t.Fatalf("storms %+v", storms)
	}
	// No event had more causes: what started them is every cause.
	if !maps.Equal(storms[0].StartedBy, storms[0].Causes) {
		t.Fatalf("started by %v, causes %v", storms[0].StartedBy, storms[0].Causes)
	}
	doc, ok := h.s.HistoryDoc("g", -1, h.now)
	if !ok || !doc.Storm.Flagged || doc.Storm.Since == nil || len(doc.History) != 3 || doc.Waiting != nil {
		t.Fatalf("doc %+v", doc)
	}
	for i := 0; i < 20; i++ {
		h.advance(5 * time.Second)
		h.heartbeat("g", ids[0], 3)
	}
	if len(storms) != 2 || storms[1].Flagged {
		t.Fatalf("storms %+v", storms)
	}
	if len(seen) != 3 || seen[2].Seq != 3 {
		t.Fatalf("OnRebalance saw %d events", len(seen))
	}
}

// The history keeps the last HistorySize events, in the shard and in the
// store, and a reloaded shard has the same history.
func TestHistoryBoundedAndReloaded(t *testing.T) {
	h := newH(t, func(c *Config) { c.HistorySize = 3 })
	ids, _ := h.stableGroup("g", 1)
	for i := 0; i < 4; i++ {
		h.advance(time.Second)
		h.rejoinAndSync("g", ids[0])
	}
	evs := h.events("g", 3)
	if evs[0].Seq != 3 || evs[2].Seq != 5 {
		t.Fatalf("seqs %d..%d", evs[0].Seq, evs[2].Seq)
	}
	n := 0
	for k := range h.store {
		if k[0] == keyHistory {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d history records stored", n)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
	re := h.reload()
	a, _ := json.Marshal(h.s.History("g"))
	b, _ := json.Marshal(re.History("g"))
	if !bytes.Equal(a, b) {
		t.Fatalf("live %s\nreloaded %s", a, b)
	}
	// The next event after a reload continues the numbering.
	h.s = re
	h.advance(time.Second)
	h.rejoinAndSync("g", ids[0])
	if evs := h.events("g", 3); evs[2].Seq != 6 || evs[2].Cause.Kind != CauseLoaded {
		t.Fatalf("after reload: seq %d cause %+v", evs[2].Seq, evs[2].Cause)
	}
	// Deleting the group deletes its history.
	h.leave("g", lm(ids[0]))
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = []string{"g"}
	h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
	for k := range h.store {
		if k[0] == keyHistory {
			t.Fatalf("history record %x left after delete", k)
		}
	}
	if h.s.History("g") != nil {
		t.Fatal("history left after delete")
	}
}

// The "now" view names the members a rebalance waits for, and when they are
// evicted: here (a session longer than the rebalance timeout) when the join
// barrier closes.
func TestHistoryWaiting(t *testing.T) {
	h := newH(t)
	h.session = 60_000
	ids, _ := h.stableGroup("g", 2)
	start := h.now
	tk := h.join("g", jo{member: ids[0]})
	h.advance(time.Second)
	doc, _ := h.s.HistoryDoc("g", 0, h.now)
	w := doc.Waiting
	if w == nil || w.State != "PreparingRebalance" || !w.Since.Equal(start) || w.Cause == nil || len(w.Members) != 1 {
		t.Fatalf("waiting %+v", w)
	}
	if m := w.Members[0]; m.MemberID != ids[1] || m.Phase != "join" || m.Deadline == nil || !m.Deadline.Equal(start.Add(30*time.Second)) {
		t.Fatalf("member %+v", m)
	}
	b := h.join("g", jo{member: ids[1]})
	gen := h.joinResp(tk).Generation
	_ = h.joinResp(b)
	h.sync("g", ids[1], gen, nil)
	doc, _ = h.s.HistoryDoc("g", 0, h.now)
	if w := doc.Waiting; w == nil || w.State != "CompletingRebalance" || len(w.Members) != 1 || w.Members[0].MemberID != ids[0] || w.Members[0].Phase != "sync" || w.Members[0].Deadline == nil {
		t.Fatalf("waiting %+v", doc.Waiting)
	}
	if len(doc.History) != 0 {
		t.Fatalf("asked for 0 events, got %d", len(doc.History))
	}
}

// The history travels in tag 10001 of DescribeGroups v5+ only when asked
// for, survives kmsg's encoding, and older versions or clients that do not
// ask see exactly the answer they saw before.
func TestHistoryTag(t *testing.T) {
	h := newH(t)
	h.stableGroup("g", 2)
	serve := func(v int16, n int32, ask bool) *kmsg.DescribeGroupsResponse {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = v
		req.Groups = []string{"g", "missing"}
		if ask {
			RequestHistory(req, n)
		}
		// The request as a client sends it.
		back := kmsg.NewPtrDescribeGroupsRequest()
		back.Version = v
		if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		tk := h.do(func(t Ticket, out *Output) { h.s.Handle(h.now, t, Client{}, back, out) })
		resp := h.resp(tk).(*kmsg.DescribeGroupsResponse)
		dec := kmsg.NewPtrDescribeGroupsResponse()
		dec.Version = v
		if err := dec.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		return dec
	}
	plain := serve(5, 0, false)
	if _, ok := HistoryTagOf(&plain.Groups[0]); ok {
		t.Fatal("history without asking")
	}
	asked := serve(5, 10, true)
	doc, ok := HistoryTagOf(&asked.Groups[0])
	if !ok || doc.Version != HistoryDocVersion || doc.Group != "g" || doc.Type != "classic" || doc.State != "Stable" || len(doc.History) != 1 {
		t.Fatalf("doc %+v", doc)
	}
	if _, ok := HistoryTagOf(&asked.Groups[1]); ok {
		t.Fatal("a missing group carries history")
	}
	// Everything else is what a client that does not ask sees.
	asked.Groups[0].UnknownTags = plain.Groups[0].UnknownTags
	if !bytes.Equal(asked.AppendTo(nil), plain.AppendTo(nil)) {
		t.Fatal("asking changed the rest of the answer")
	}
	old := serve(4, 10, true) // no tagged fields before v5
	if _, ok := HistoryTagOf(&old.Groups[0]); ok {
		t.Fatal("history in v4")
	}
	// A value that is not JSON is not trusted.
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.UnknownTags.Set(HistoryTag, []byte("{"))
	if _, ok := HistoryTagOf(&d); ok {
		t.Fatal("garbage decoded")
	}
}

// A group deleted while flagged as storming is reported unflagged (metrics
// count storming groups from OnStorm).
func TestHistoryStormGroupDeleted(t *testing.T) {
	var storms []StormStatus
	h := newH(t, func(c *Config) {
		c.StormThreshold, c.StormWindow = 1, time.Minute
		c.OnStorm = func(s StormStatus) { storms = append(storms, s) }
	})
	ids, _ := h.stableGroup("g", 1)
	h.advance(time.Second)
	h.rejoinAndSync("g", ids[0])
	if len(storms) != 1 || !storms[0].Flagged {
		t.Fatalf("storms %+v", storms)
	}
	h.leave("g", lm(ids[0]))
	if r := h.deleteGroups("g"); r.Groups[0].ErrorCode != ErrNone {
		t.Fatalf("delete: %d", r.Groups[0].ErrorCode)
	}
	if len(storms) != 2 || storms[1].Flagged || storms[1].Group != "g" {
		t.Fatalf("after the delete: %+v", storms)
	}
}

// TestHistoryLoadedLazily: a loaded history is decoded when first read, so a
// damaged event record does not keep the partition from loading; it is left
// out (and said) when the history is read, the others are served, and the
// numbering continues after the highest stored event.
func TestHistoryLoadedLazily(t *testing.T) {
	h, live := rebalanced(t, 2)
	damaged := live[1].Seq
	h.store[string(historyKey("g", damaged))] = append([]byte{0, 0}, "{not json"...)
	s, logged := reloadLogged(t, h)
	got := s.History("g")
	if len(got) != len(live)-1 {
		t.Fatalf("%d events after the reload, want %d", len(got), len(live)-1)
	}
	for _, e := range got {
		if e.Seq == damaged {
			t.Fatalf("the damaged event %d was served", damaged)
		}
	}
	if said := *logged; len(said) != 1 || !strings.Contains(said[0], "history event") {
		t.Fatalf("said %q", said)
	}
	if s.hist["g"].nextSeq != live[len(live)-1].Seq {
		t.Fatalf("next seq %d, want %d", s.hist["g"].nextSeq, live[len(live)-1].Seq)
	}
}

// History values are written compressed (version 1, S2); values of version
// 0 (plain JSON, as written before) still load; an unknown version or a
// damaged compressed value drops that event, logged.
func TestHistoryValueVersions(t *testing.T) {
	h, live := rebalanced(t, 3)
	stored, plainSize := 0, 0
	for _, e := range live {
		v := h.store[string(historyKey("g", e.Seq))]
		if binary.BigEndian.Uint16(v) != historyValueS2 {
			t.Fatalf("event %d stored as version %d", e.Seq, binary.BigEndian.Uint16(v))
		}
		js, _ := json.Marshal(e)
		stored, plainSize = stored+len(v), plainSize+len(js)
	}
	if stored >= plainSize {
		t.Fatalf("%d bytes stored for %d of JSON", stored, plainSize)
	}
	t.Logf("%d events: %d bytes stored for %d of JSON", len(live), stored, plainSize)
	plain, unknown, damaged := live[0].Seq, live[1].Seq, live[2].Seq
	js, _ := json.Marshal(live[0])
	h.store[string(historyKey("g", plain))] = append([]byte{0, 0}, js...)
	h.store[string(historyKey("g", unknown))][1] = 7
	dv := h.store[string(historyKey("g", damaged))]
	h.store[string(historyKey("g", damaged))] = append(dv[:2:2], 0xff, 0xff, 0xff)

	s, logged := reloadLogged(t, h)
	got := s.History("g")
	want := slices.DeleteFunc(slices.Clone(live), func(e RebalanceEvent) bool { return e.Seq == unknown || e.Seq == damaged })
	if len(got) != len(want) {
		t.Fatalf("%d events after the reload, want %d", len(got), len(want))
	}
	for i := range got {
		gj, _ := json.Marshal(got[i])
		wj, _ := json.Marshal(want[i])
		if string(gj) != string(wj) {
			t.Fatalf("event %d reloaded as\n%s\nwant\n%s", want[i].Seq, gj, wj)
		}
	}
	if said := *logged; len(said) != 2 || !strings.Contains(strings.Join(said, "\n"), "unknown value version 7") {
		t.Fatalf("said %q", said)
	}
}

// reloadLogged loads h's store into a fresh shard and returns it with what
// the shard logs (loaded history is decoded, and damage said, when read).
func reloadLogged(t *testing.T, h *h) (*Shard, *[]string) {
	t.Helper()
	said := new([]string)
	s := NewShard(h.s.cfg, seededReader{})
	s.Logf = func(f string, a ...any) { *said = append(*said, fmt.Sprintf(f, a...)) }
	for k, v := range h.store {
		if err := s.Load([]byte(k), v); err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	var out Output
	s.FinishLoad(h.now, &out)
	return s, said
}

// rebalanced forms group "g" of one member and has it rebalance n more
// times; it returns the harness and the group's history (n+1 events).
func rebalanced(t *testing.T, n int) (*h, []RebalanceEvent) {
	t.Helper()
	h := newH(t)
	ids, _ := h.stableGroup("g", 1)
	for range n {
		h.advance(time.Second)
		h.rejoinAndSync("g", ids[0])
	}
	live := h.s.History("g")
	if len(live) != n+1 {
		t.Fatalf("%d events, want %d", len(live), n+1)
	}
	return h, live
}

// A member the join phase waits for is evicted by whichever fires first, its
// session or the join barrier's end: with a session shorter than the
// rebalance timeout, the "now" view gives the session's expiry (it gave the
// barrier's end, later than the eviction).
func TestHistoryWaitingSessionFirst(t *testing.T) {
	h := newH(t)
	h.session = 10_000
	ids, _ := h.stableGroup("g", 2)
	start := h.now
	h.join("g", jo{member: ids[0]})
	h.advance(time.Second)
	doc, _ := h.s.HistoryDoc("g", 0, h.now)
	w := doc.Waiting
	if w == nil || len(w.Members) != 1 {
		t.Fatalf("waiting %+v", w)
	}
	if m := w.Members[0]; m.MemberID != ids[1] || m.Phase != "join" || m.Deadline == nil || !m.Deadline.Equal(start.Add(10*time.Second)) {
		t.Fatalf("member %+v; want its session's end %v", m, start.Add(10*time.Second))
	}
	h.advance(9 * time.Second) // the session ends: evicted, as the view said
	if g := h.s.Group("g"); g == nil || len(g.members) != 1 {
		t.Fatalf("after the deadline the group has %d members, want 1", len(g.members))
	}
}

// A rebalance whose join phase began with the initial delay (a group that
// was Empty) says so, so that "why" can tell the delay from slow members; a
// later rebalance of the Stable group does not.
func TestHistoryInitialDelay(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 1) // with a 100 ms initial delay
	h.advance(time.Second)
	h.rejoinAndSync("g", ids[0])
	evs := h.s.History("g")
	if len(evs) != 2 || !evs[0].InitialDelay || evs[1].InitialDelay {
		t.Fatalf("events %+v", evs)
	}
}

// TestLoweredHistoryBoundCleansStoredRecords: after a restart with a lower
// --group-history, the stored events past the bound are deleted with the
// group's next event, or with the group: a deletion that left them let the
// deleted group's history (and its numbering) come back at the next load.
func TestLoweredHistoryBoundCleansStoredRecords(t *testing.T) {
	stored := func(h *h) int {
		n := 0
		for k := range h.store {
			if k[0] == keyHistory {
				n++
			}
		}
		return n
	}
	for _, next := range []string{"event", "delete"} {
		t.Run(next, func(t *testing.T) {
			h := newH(t, func(c *Config) { c.HistorySize = 6 })
			ids, _ := h.stableGroup("g", 1)
			for i := 0; i < 5; i++ {
				h.advance(time.Second)
				h.rejoinAndSync("g", ids[0])
			}
			if n := stored(h); n != 6 {
				t.Fatalf("%d history records stored, want 6", n)
			}
			h.s.cfg.HistorySize = 3
			h.s = h.reload()
			if evs := h.events("g", 3); evs[0].Seq != 4 {
				t.Fatalf("served from seq %d, want 4", evs[0].Seq)
			}
			switch next {
			case "event":
				h.advance(time.Second)
				h.rejoinAndSync("g", ids[0])
				if n := stored(h); n != 3 {
					t.Fatalf("%d history records stored after the next event, want 3", n)
				}
			case "delete":
				h.leave("g", lm(ids[0]))
				req := kmsg.NewPtrDeleteGroupsRequest()
				req.Version = 2
				req.Groups = []string{"g"}
				h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
				if n := stored(h); n != 0 {
					t.Fatalf("%d history records left after the delete", n)
				}
				h.s.cfg.HistorySize = 100
				if doc, _ := h.reload().HistoryDoc("g", 0, h.now); doc != nil && len(doc.History) > 0 {
					t.Fatalf("the deleted group's history came back: %d events", len(doc.History))
				}
			}
		})
	}
}

// TestHistoryPhasesAddUp: join_ms + sync_ms = duration_ms, also when the
// phases last fractions of a millisecond (each was rounded down on its own,
// so the sum fell short of the whole by up to a millisecond per phase).
func TestHistoryPhasesAddUp(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	h.advance(time.Second)
	t0 := h.join("g", jo{member: ids[0]})
	h.advance(455600 * time.Microsecond)
	h.join("g", jo{member: ids[1]})
	r := h.joinResp(t0)
	h.advance(600 * time.Microsecond)
	h.syncAll("g", r.LeaderID, ids, r.Generation)
	ev := h.events("g", 2)[1]
	if ev.DurationMs != 456 || ev.JoinMs+ev.SyncMs != ev.DurationMs || ev.JoinMs != 455 {
		t.Fatalf("duration %d ms, join %d + sync %d; want 456 = 455 + 1", ev.DurationMs, ev.JoinMs, ev.SyncMs)
	}
}

// TestDeleteWithHistoryEventInFlight: a group deleted while its last
// rebalance event (the "empty" one its last member's leave wrote) is still
// being written: the deletion tombstones that event too, so the deleted
// group's history does not come back at the next load.
func TestDeleteWithHistoryEventInFlight(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 1)
	h.hold = true
	h.leave("g", lm(ids[0]))
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = []string{"g"}
	tk := h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
	h.release()
	if c := h.resp(tk).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; c != 0 {
		t.Fatalf("delete: %d", c)
	}
	for k := range h.store {
		if k[0] == keyHistory {
			t.Fatalf("history record %x left after the delete", k)
		}
	}
	if h.s.History("g") != nil {
		t.Fatal("history left in the shard after the delete")
	}
}

// A member whose session expires during the sync phase (the leader stopped
// before sending the assignment; the follower's SyncGroup is parked) is
// listed in waited_for with phase session, evicted, waited from the sync
// phase's start, when that sync phase is the event's last: here the
// follower's session then ends too, in the join phase the expiry started,
// and the group is Empty. Before, the leader's wait was put with the join
// phase's, which the new join phase cleared: it was only in evicted.
func TestHistoryClassicSessionExpiresInSyncPhase(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	leader, follower := ids[0], ids[1]
	h.advance(time.Second)
	tl, tf := h.join("g", jo{member: leader}), h.join("g", jo{member: follower})
	r := h.joinResp(tl)
	if r.ErrorCode != 0 || r.LeaderID != leader {
		t.Fatalf("rejoin: %d, leader %s", r.ErrorCode, r.LeaderID)
	}
	h.joinResp(tf)
	gen := r.Generation
	h.sync("g", follower, gen, nil) // parked: the leader sends no assignment
	for range 3 {
		h.advance(3 * time.Second)
		h.heartbeat("g", leader, gen)
	}
	h.advance(10 * time.Second) // the leader's session (10 s) ends, 19 s into the sync phase
	if h.s.groups["g"].memberByID(leader) != nil {
		t.Fatal("the leader was not evicted")
	}
	h.advance(11 * time.Second) // the follower, told to rejoin, does not: Empty
	ev := h.events("g", 2)[1]
	if ev.Outcome != "empty" || !slices.Equal(ev.Evicted, []string{leader, follower}) {
		t.Fatalf("outcome %s, evicted %v, want empty, the leader then the follower", ev.Outcome, ev.Evicted)
	}
	i := slices.IndexFunc(ev.WaitedFor, func(w Wait) bool { return w.MemberID == leader })
	if i < 0 {
		t.Fatalf("the evicted leader is not in waited_for: %+v", ev.WaitedFor)
	}
	if w := ev.WaitedFor[i]; w.Phase != "session" || !w.Evicted || w.WaitedMs != 19000 {
		t.Fatalf("the leader's wait %+v, want session, evicted, 19000 ms", w)
	}
}
