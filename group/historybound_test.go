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

// The stored bound of the rebalance history (historybound.go,
// docs/history.md "Stored bound").

// assignOne is a consumer-protocol assignment of one partition of topic.
func assignOne(topic string, p int32) string {
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = topic, []int32{p}
	a.Topics = append(a.Topics, at)
	return string(a.AppendTo(nil))
}

// storedEvent returns the stored record of group's event seq (key and
// value) and the event's JSON as stored.
func (h *h) storedEvent(group string, seq uint64) (recBytes int, js []byte) {
	h.t.Helper()
	k := historyKey(group, seq)
	v, ok := h.store[string(k)]
	if !ok {
		h.t.Fatalf("event %d of %q is not stored", seq, group)
	}
	r, err := decodeHistory(k, v)
	if err != nil {
		h.t.Fatal(err)
	}
	ev, err := r.event()
	if err != nil {
		h.t.Fatal(err)
	}
	js, _ = json.Marshal(ev)
	return len(k) + len(v), js
}

// joinMany has n new members join group (which must be Empty) at once,
// within an initial rebalance delay of 100ms, and returns their ids (in
// join order), the leader and the generation.
func (h *h) joinMany(group string, n int, meta []kmsg.JoinGroupRequestProtocol) (ids []string, leader string, gen int32) {
	h.t.Helper()
	h.s.cfg.InitialRebalanceDelay = 100 * time.Millisecond
	var joins []Ticket
	for range n {
		joins = append(joins, h.newMember(group, jo{protos: meta}))
	}
	for i := 0; i < 100 && !h.answered(joins[0]); i++ {
		h.advance(100 * time.Millisecond)
	}
	for _, tk := range joins {
		r := h.joinResp(tk)
		if r.ErrorCode != 0 {
			h.t.Fatalf("join: %d", r.ErrorCode)
		}
		ids, leader, gen = append(ids, r.MemberID), r.LeaderID, r.Generation
	}
	return ids, leader, gen
}

// A rebalance of a classic group of 1,000 members stores an event of at
// most storedListMax entries per list, counting the rest in omitted, far
// below any store's limit; the storm detector still counts every cause,
// and a reload gives back the same history. Unbounded, the event of the
// members' first rebalance was 404 KB of JSON and 65 KB stored (10,000
// members: 4 MB and 1.2 MB; 100,000: 40 MB and 12 MB, encoded in 1-2 s on
// the shard's goroutine, holding the partition).
func TestHistoryStoredBoundBigClassicGroup(t *testing.T) {
	const n = 1000
	h := newH(t)
	var logs []string
	h.s.Logf = func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
	meta := protos("range", consumerMeta("t"))
	ids, leader, gen := h.joinMany("g", n, meta)
	sorted := slices.Sorted(slices.Values(ids))
	// sync gives the i-th member (by id) the partition part(i).
	sync := func(part func(i int) int32) {
		t.Helper()
		assign := map[string]string{}
		for i, id := range sorted {
			assign[id] = assignOne("t", part(i))
		}
		var ts []Ticket
		for _, id := range ids {
			if id != leader {
				ts = append(ts, h.sync("g", id, gen, nil))
			}
		}
		// The event travels in the assignment's write: one write, the
		// group's record and the event's (and no other record of size).
		h.hold = true
		ts = append(ts, h.sync("g", leader, gen, assign))
		if len(h.held) != 1 {
			t.Fatalf("the leader's sync made %d writes, want 1", len(h.held))
		}
		sizes := map[byte]int{}
		for _, r := range h.held[0].Records {
			if r.Value != nil {
				sizes[r.Key[0]] += len(r.Key) + len(r.Value)
			}
		}
		t.Logf("assignment write: group record %d bytes, event record %d bytes", sizes[keyGroup], sizes[keyHistory])
		if len(sizes) != 2 || sizes[keyGroup] == 0 || sizes[keyHistory] == 0 || sizes[keyHistory] > 32<<10 {
			t.Fatalf("assignment write holds %v (bytes by record kind), want the group's and the event's, at most 32 KiB", sizes)
		}
		h.release()
		for _, tk := range ts {
			if c := h.syncResp(tk).ErrorCode; c != 0 {
				t.Fatalf("sync: error %d", c)
			}
		}
	}
	rejoin := func() {
		t.Helper()
		var ts []Ticket
		for _, id := range ids {
			ts = append(ts, h.join("g", jo{member: id, protos: meta}))
		}
		r := h.joinResp(ts[0])
		if r.ErrorCode != 0 {
			t.Fatalf("rejoin: %d", r.ErrorCode)
		}
		leader, gen = r.LeaderID, r.Generation
	}
	check := func(seq uint64, members int, omitted Omitted) RebalanceEvent {
		t.Helper()
		evs := h.s.History("g")
		if len(evs) != int(seq) {
			t.Fatalf("%d events, want %d (log: %q)", len(evs), seq, logs)
		}
		ev := evs[seq-1]
		size, js := h.storedEvent("g", seq)
		t.Logf("event %d: %d members listed, omitted %+v: %d bytes of JSON, %d stored", seq, len(ev.Members), ev.Omitted, len(js), size)
		if len(js) > storedEventBytes || size > 32<<10 {
			t.Errorf("event %d: %d bytes of JSON (bound %d), %d bytes stored (want at most 32 KiB)", seq, len(js), storedEventBytes, size)
		}
		if len(ev.Members) != members || len(ev.WaitedFor) != storedListMax || ev.Omitted == nil || *ev.Omitted != omitted {
			t.Errorf("event %d: %d members, %d waits, omitted %+v; want %d members, %d waits, omitted %+v",
				seq, len(ev.Members), len(ev.WaitedFor), ev.Omitted, members, storedListMax, omitted)
		}
		if !slices.IsSortedFunc(ev.Members, func(a, b MemberChange) int { return strings.Compare(a.MemberID, b.MemberID) }) {
			t.Errorf("event %d: members not sorted by id", seq)
		}
		return ev
	}

	sync(func(i int) int32 { return int32(i) })
	ev := check(1, storedListMax, Omitted{WaitedFor: 2*n - storedListMax, Members: n - storedListMax})
	if ev.Cause.Kind != CauseMemberJoined || len(ev.MoreCauses) != 64 {
		t.Errorf("cause %s with %d more causes, want member_joined and 64", ev.Cause.Kind, len(ev.MoreCauses))
	}
	for _, m := range ev.Members {
		if !m.New || !m.Decoded || m.Partitions != 1 {
			t.Fatalf("member %+v: want new with one partition", m)
		}
	}
	if st := h.s.storm("g", h.now); st.Count != 1 || st.Causes[CauseMemberJoined] != 65 || st.StartedBy[CauseMemberJoined] != 1 {
		t.Errorf("storm view %+v: want 1 rebalance, 65 member_joined causes", st)
	}

	// Ten members swap partitions: they are listed first, the others fill
	// the list, uncounted.
	rejoin()
	sync(func(i int) int32 {
		if i < 10 {
			return int32(i ^ 1)
		}
		return int32(i)
	})
	ev = check(2, storedListMax, Omitted{WaitedFor: 2*n - storedListMax})
	moved := 0
	for _, m := range ev.Members {
		if len(m.Added) > 0 {
			moved++
		}
	}
	if moved != 10 {
		t.Errorf("%d members listed with partitions added, want the 10 that moved", moved)
	}

	// Every member moves: the first 200 are listed, 800 counted.
	rejoin()
	sync(func(i int) int32 { return int32((i + 2) % n) })
	check(3, storedListMax, Omitted{WaitedFor: 2*n - storedListMax, Members: n - storedListMax})

	if len(logs) > 0 {
		t.Errorf("log %q", logs)
	}
	if d := h.checkReload(); d != "" {
		t.Error(d)
	}
}

// A consumer-protocol group's event is written with the request that
// completes it: over the store's limit (etcd's request limit in cluster
// mode), that request failed, and the partition had to be reloaded (the
// shard had applied the records), which every group of the partition
// sees as COORDINATOR_LOAD_IN_PROGRESS; the loaded group then started a
// new event as large, and failed again at its end. Bounded, every
// heartbeat succeeds and the event is stored.
func TestHistoryStoredBoundBigConsumerGroup(t *testing.T) {
	const n = 2000
	h, _ := newCH(t, map[string]int32{"t": n}, func(c *Config) {
		c.ConsumerAssignmentInterval = time.Second
		c.ConsumerAssignmentDelayPerMember = 20 * time.Microsecond
		c.MaxRecordBytes = 64 << 10 // what node sets from the store (etcd: MaxTxnBytes)
	})
	h.refuseOver = 64 << 10 // and the store refuses more, as etcd past its request limit
	ids := make([]string, n)
	failed := 0
	for i := range ids {
		ids[i] = memberUUID(i)
		if r := h.cg(hb{member: ids[i], names: []string{"t"}, owned: tpset{}}); r.ErrorCode != 0 {
			failed++
		}
	}
	for round := 0; round < 10 && h.cgroup("cg").state() != "Stable"; round++ {
		h.advance(2 * time.Second)
		for _, id := range ids {
			m := h.cmember("cg", id)
			if r := h.cg(hb{member: id, epoch: m.epoch, owned: m.assigned.clone()}); r.ErrorCode != 0 {
				failed++
			}
		}
	}
	if failed > 0 || h.refused > 0 || h.s.NeedsReload() {
		t.Fatalf("%d heartbeats failed, %d writes refused, partition needs a reload: %v", failed, h.refused, h.s.NeedsReload())
	}
	evs := h.s.History("cg")
	ev := evs[len(evs)-1]
	size, js := h.storedEvent("cg", ev.Seq)
	t.Logf("last event: %d members listed, omitted %+v: %d bytes of JSON, %d stored", len(ev.Members), ev.Omitted, len(js), size)
	if ev.Outcome != "stable" || ev.Omitted == nil || len(ev.Members)+ev.Omitted.Members != n || len(ev.WaitedFor)+ev.Omitted.WaitedFor != n {
		t.Errorf("last event %s, %d members + %+v omitted; want stable, %d members in all", ev.Outcome, len(ev.Members), ev.Omitted, n)
	}
	if len(js) > h.s.historyEventBudget() || size > 16<<10 {
		t.Errorf("%d bytes of JSON (budget %d), %d stored", len(js), h.s.historyEventBudget(), size)
	}
	if d := h.checkReload(); d != "" {
		t.Error(d)
	}
}

// memberUUID is a KIP-848 member id as clients make them (22 characters
// of base64 of a random UUID), derived from i.
func memberUUID(i int) string {
	const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	x := uint64(i)*0x9E3779B97F4A7C15 + 12345
	b := make([]byte, 22)
	for j := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[j] = a[x%64]
	}
	return string(b)
}

// The byte budget: members with many partitions each halve the lists
// until the event fits; causes of huge details keep only kind and time
// (every one of them: the storm detector counts them); a small event is
// stored as it is.
func TestHistoryStoredBoundBytes(t *testing.T) {
	const budget = 64 << 10
	ev := RebalanceEvent{Seq: 1, Group: "g", Type: "consumer", Cause: Cause{Kind: CauseMemberJoined}}
	for i := range 300 {
		ps := make([]int32, 1000)
		for j := range ps {
			ps[j] = int32(i*1000 + j)
		}
		ev.Members = append(ev.Members, MemberChange{MemberID: fmt.Sprintf("m%03d", i), Decoded: true, Partitions: 1000,
			Added: []TopicPartitions{{Topic: "t", Partitions: ps}}, Changed: true})
		ev.WaitedFor = append(ev.WaitedFor, Wait{MemberID: fmt.Sprintf("m%03d", i), Phase: "join", WaitedMs: int64(300 - i)})
	}
	js := boundStored(&ev, budget)
	if len(js) > budget || len(ev.Members) == 0 || len(ev.Members) >= storedListMax || ev.Omitted == nil ||
		len(ev.Members)+ev.Omitted.Members != 300 || ev.Omitted.CauseDetails {
		t.Errorf("many partitions: %d bytes, %d members listed, omitted %+v", len(js), len(ev.Members), ev.Omitted)
	}
	// The moves are cut first: whom the rebalance waited for (short
	// entries, slowest first) keeps its stored bound.
	if len(ev.WaitedFor) != storedListMax || ev.WaitedFor[0].WaitedMs != 300 || ev.Omitted.WaitedFor != 300-storedListMax {
		t.Errorf("many partitions: %d waits kept (first %+v), omitted %+v", len(ev.WaitedFor), ev.WaitedFor[0], ev.Omitted)
	}

	big := strings.Repeat("x", 20<<10)
	ev = RebalanceEvent{Seq: 2, Group: "g", Type: "classic", Cause: Cause{Kind: CauseMemberJoined, ClientID: big, Detail: big}, Leader: big}
	for i := range 64 {
		ev.MoreCauses = append(ev.MoreCauses, Cause{Kind: []CauseKind{CauseMemberLeft, CauseSessionTimeout}[i%2], At: time.UnixMilli(int64(i)), ClientID: big})
	}
	js = boundStored(&ev, budget)
	if len(js) > budget || len(ev.MoreCauses) != 64 || ev.Omitted == nil || !ev.Omitted.CauseDetails || ev.Leader != "" || ev.Cause.ClientID != "" {
		t.Errorf("huge causes: %d bytes, %d more causes, omitted %+v", len(js), len(ev.MoreCauses), ev.Omitted)
	}
	if ev.MoreCauses[1].Kind != CauseSessionTimeout || !ev.MoreCauses[1].At.Equal(time.UnixMilli(1)) {
		t.Errorf("a more cause lost its kind or time: %+v", ev.MoreCauses[1])
	}

	ev = RebalanceEvent{Seq: 3, Group: "g", Type: "classic", Cause: Cause{Kind: CauseMemberLeft, MemberID: "a"},
		WaitedFor: []Wait{{MemberID: "b", Phase: "join", WaitedMs: 5}}, Members: []MemberChange{{MemberID: "b"}}}
	want, _ := json.Marshal(ev)
	if js := boundStored(&ev, budget); string(js) != string(want) || ev.Omitted != nil {
		t.Errorf("a small event changed: %s, want %s", js, want)
	}
}

// The read bound (HistoryListsTag) adds what it leaves out to what the
// stored bound left out.
func TestHistoryBoundListsKeepsStoredOmitted(t *testing.T) {
	ev := RebalanceEvent{Seq: 1, WaitedFor: []Wait{{MemberID: "a"}, {MemberID: "b"}},
		Members: []MemberChange{{MemberID: "a", New: true}, {MemberID: "b", Changed: true}}, Omitted: &Omitted{WaitedFor: 300, Members: 800}}
	doc := &HistoryDoc{History: []RebalanceEvent{ev}}
	doc.BoundLists(1)
	if o := doc.History[0].Omitted; o == nil || *o != (Omitted{WaitedFor: 301, Members: 801}) {
		t.Errorf("omitted %+v, want 301 waits and 801 members", o)
	}
	doc = &HistoryDoc{History: []RebalanceEvent{ev}}
	doc.BoundLists(5)
	if o := doc.History[0].Omitted; o == nil || *o != (Omitted{WaitedFor: 300, Members: 800}) {
		t.Errorf("omitted %+v, want the stored 300 waits and 800 members", o)
	}
}
