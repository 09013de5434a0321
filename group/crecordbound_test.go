package group

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A consumer-protocol member whose metadata record (its subscription, or a
// classic member's protocols) would be larger than the store takes
// (Config.MaxRecordBytes: etcd's request limit in cluster mode, 16 MiB on
// disk) is refused UNKNOWN_SERVER_ERROR before anything changes, as Kafka
// answers a write too large for its log (after which its runtime drops the
// change). cohort applied the member first and wrote it after: the store
// refused the record, the heartbeat got a retriable error, and the whole
// coordinator partition (every group on it) was reloaded from the store,
// again at each retry of the client.
func TestConsumerMemberRecordOverStoreLimit(t *testing.T) {
	const most = 4096
	h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.MaxRecordBytes = most })
	h.refuseOver = most // the store refuses more, as etcd past its request limit
	expectCode(t, "n1 join", h.cgJoin("n1", "a").ErrorCode, ErrNone)
	big := []string{"a", strings.Repeat("x", 3000), strings.Repeat("y", 3000)}
	check := func(what string, code int16) {
		t.Helper()
		expectCode(t, what, code, ErrUnknownServer)
		if h.refused > 0 || h.s.NeedsReload() {
			t.Fatalf("%s: %d writes refused by the store, partition needs a reload: %v", what, h.refused, h.s.NeedsReload())
		}
		if d := h.checkReload(); d != "" {
			t.Fatalf("%s: %s", what, d)
		}
	}

	r := h.cg(hb{member: "n2", names: big, owned: tpset{}})
	check("a join subscribing to 6 KB of names", r.ErrorCode)
	if h.cmember("cg", "n2") != nil {
		t.Fatal("the refused join created its member")
	}

	n1 := h.cmember("cg", "n1")
	r = h.cg(hb{member: "n1", epoch: n1.epoch, names: big})
	check("a member growing its subscription to 6 KB", r.ErrorCode)
	if n1 = h.cmember("cg", "n1"); !slices.Equal(n1.names, []string{"a"}) {
		t.Fatalf("the refused heartbeat changed the subscription to %d names", len(n1.names))
	}
	re := strings.Repeat("(a|b)", 1000)
	r = h.cg(hb{member: "n1", epoch: n1.epoch, regex: &re})
	check("a 5 KB regex", r.ErrorCode)

	// A classic member joining the consumer group with protocol metadata
	// over the limit.
	meta := string(subscription(tpset{}, "a", strings.Repeat("z", 5000)))
	check("a classic join with 5 KB of metadata", h.joinResp(h.newMember("cg", jo{client: "c", protos: protos("range", meta)})).ErrorCode)

	// Under the limit, all is as before.
	r = h.cg(hb{member: "n1", epoch: n1.epoch, names: []string{"a", strings.Repeat("x", 1000)}})
	expectCode(t, "a subscription under the limit", r.ErrorCode, ErrNone)
}

// A classic group becomes a consumer group by writing a member record for
// each of its members: one with protocols over the store's limit makes the
// joiner that would convert it UNKNOWN_SERVER_ERROR, and the group stays
// classic and untouched (Kafka writes the conversion with the heartbeat's
// records, and drops both when the write is too large).
func TestUpgradeOverStoreLimitRefused(t *testing.T) {
	const most = 4096
	h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.MaxRecordBytes = most })
	h.refuseOver = most
	meta := string(subscription(tpset{}, "a", strings.Repeat("z", 5000)))
	jr := h.joinResp(h.newMember("cg", jo{client: "c", protos: protos("range", meta)}))
	expectCode(t, "classic join", jr.ErrorCode, ErrNone)
	r := h.cg(hb{member: "n1", names: []string{"a"}, owned: tpset{}})
	expectCode(t, "the join that would convert the group", r.ErrorCode, ErrUnknownServer)
	if h.refused > 0 || h.s.NeedsReload() {
		t.Fatalf("%d writes refused by the store, partition needs a reload: %v", h.refused, h.s.NeedsReload())
	}
	if g := h.s.Group("cg"); g == nil || g.cg != nil || len(g.members) != 1 {
		t.Fatal("the refused conversion changed the classic group")
	}
}

// memberRecordBytes is the size of the record encodeConsumer writes.
func TestMemberRecordBytes(t *testing.T) {
	long := strings.Repeat("n", 200) // lengths past one varint byte
	for i, m := range []*cmember{
		{id: "m"},
		{id: long, instanceID: "i", rack: long, clientID: "c", clientHost: "h", principal: "User:x",
			names: []string{"a", long}, regex: long, assignor: "range"},
		{id: "m", names: []string{}, classic: &classicMeta{protocols: protos("range", long, "sticky", "")}},
	} {
		r := cMemberRec("g"+long, m)
		rec := r.encode()
		if got, want := memberRecordBytes("g"+long, len(m.id), m), len(rec.Key)+len(rec.Value); got != want {
			t.Errorf("member %d: %d bytes counted, %d encoded", i, got, want)
		}
	}
}

// A classic group's member becomes, in the conversion, a member whose
// current assignment is the one its leader gave it, stored with an epoch per
// partition: twice its size in the classic group's record, which the store
// took. One that would be over the store's limit makes the conversion
// UNKNOWN_SERVER_ERROR, as a member record over it does, and the group stays
// classic (it was written, refused by the store, and the partition reloaded).
func TestUpgradeAssignmentOverStoreLimitRefused(t *testing.T) {
	const most = 4096
	h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.MaxRecordBytes = most })
	h.refuseOver = most
	jr := h.joinResp(h.newMember("cg", jo{client: "c", protos: protos("range", string(subscription(tpset{}, "a")))}))
	expectCode(t, "classic join", jr.ErrorCode, ErrNone)
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic = "a"
	for p := range int32(600) {
		at.Partitions = append(at.Partitions, p)
	}
	a.Topics = append(a.Topics, at)
	h.wantCode(h.sync("cg", jr.MemberID, jr.Generation, map[string]string{jr.MemberID: string(a.AppendTo(nil))}), ErrNone)
	if h.refused > 0 {
		t.Fatal("setup: the classic group's record was refused")
	}
	r := h.cg(hb{member: "n1", names: []string{"a"}, owned: tpset{}})
	expectCode(t, "the join that would convert the group", r.ErrorCode, ErrUnknownServer)
	if h.refused > 0 || h.s.NeedsReload() {
		t.Fatalf("%d writes refused by the store, partition needs a reload: %v", h.refused, h.s.NeedsReload())
	}
	if g := h.s.Group("cg"); g == nil || g.cg != nil || g.State() != Stable {
		t.Fatal("the refused conversion changed the classic group")
	}
}

// currentRecordBytes is the size of the record encodeConsumer writes.
func TestCurrentRecordBytes(t *testing.T) {
	long := strings.Repeat("t", 200)
	for i, set := range []tpset{{}, set("a", 0, 1, 2), {long: make([]int32, 300), "b": {7}}} {
		at := map[topicPartition]int32{}
		r := cCurrentRec("g"+long, "m"+long, &ccurrent{assigned: set, pending: tpset{}, assignedAt: at})
		rec := r.encode()
		if got, want := currentRecordBytes("g"+long, 1+len(long), set), len(rec.Key)+len(rec.Value); got != want {
			t.Errorf("set %d: %d bytes counted, %d encoded", i, got, want)
		}
	}
}

// A request refused for a record over the store's limit is logged at most
// once a minute, the next line counting those left out: a client retrying
// logged a line (quoting a group id of up to 32 KB) at every request.
func TestRecordRefusalLogBounded(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.MaxRecordBytes = 4096 })
	var lines []string
	h.s.Logf = func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	big := []string{strings.Repeat("x", 5000)}
	for range 4 {
		expectCode(t, "join", h.cg(hb{member: "n1", names: big, owned: tpset{}}).ErrorCode, ErrUnknownServer)
	}
	if len(lines) != 1 {
		t.Fatalf("%d lines logged for 4 refusals in the same minute: %q", len(lines), lines)
	}
	h.advance(time.Minute)
	expectCode(t, "join", h.cg(hb{member: "n1", names: big, owned: tpset{}}).ErrorCode, ErrUnknownServer)
	if len(lines) != 2 || !strings.Contains(lines[1], "(3 more refused since the last such line)") {
		t.Fatalf("after a minute: %q", lines)
	}
}

// So is a classic group's metadata record over the limit, which a member
// can make its group try to write at every rebalance.
func TestClassicRecordRefusalLogBounded(t *testing.T) {
	h := newH(t, func(c *Config) { c.MaxRecordBytes = 400 })
	var lines []string
	h.s.Logf = func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	meta := protos("range", strings.Repeat("m", 500))
	jr := h.joinResp(h.newMember("big", jo{protos: meta}))
	for range 3 {
		expectCode(t, "join", jr.ErrorCode, ErrNone)
		h.wantCode(h.sync("big", jr.MemberID, jr.Generation, map[string]string{jr.MemberID: "a"}), ErrUnknownServer)
		jr = h.joinResp(h.join("big", jo{member: jr.MemberID, protos: meta}))
	}
	if len(lines) != 1 {
		t.Fatalf("%d lines logged for 3 refusals in the same minute: %q", len(lines), lines)
	}
}
