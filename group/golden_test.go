package group

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/golden"
)

// TestStoredRecordsGolden holds, under testdata/golden/, the stored bytes of
// one record of every kind the shard writes, and checks that this version
// decodes each to the values it was written from and encodes those values
// to the same bytes again. It fails when a field's encoding changes: the
// records on users' disks and in etcd were written by the earlier encoding,
// and a new version must keep reading them (a new value version, read
// beside the old one, with a fixture of its own). A new record kind gets
// a case here; running the test once with COHORT_TEST_WRITE_GOLDEN=1 writes
// its fixture (package internal/golden). The fixtures named "*-0275013"
// are records as cohort 0275013 (2026-12-02) wrote them, before later
// versions appended fields or changed the value version: captured from a
// store that version wrote, never rewritten.
func TestStoredRecordsGolden(t *testing.T) {
	at := time.UnixMilli(1764988800123) // 2025-12-06T02:40:00.123Z
	ev := &RebalanceEvent{Seq: 4, Group: "cg-848", Type: "consumer", ProtocolType: "consumer",
		FromGeneration: 6, Generation: 7, Start: at.UTC(), End: at.Add(1500 * time.Millisecond).UTC(), Outcome: "stable",
		Cause:      Cause{Kind: CauseMemberJoined, At: at.UTC(), MemberID: "m-1", InstanceID: "i-1", ClientID: "c", ClientHost: "10.0.0.1", Reason: "r"},
		MoreCauses: []Cause{{Kind: CauseMemberLeft, At: at.Add(time.Second).UTC(), MemberID: "m-2"}},
		DurationMs: 1500, SyncMs: 1500,
		WaitedFor: []Wait{{MemberID: "m-1", InstanceID: "i-1", Phase: "revoke", WaitedMs: 900}},
		Evicted:   []string{"m-3"},
		Members: []MemberChange{{MemberID: "m-1", InstanceID: "i-1", ClientID: "c", ClientHost: "10.0.0.1", Decoded: true, Partitions: 2,
			Added: []TopicPartitions{{Topic: "orders", Partitions: []int32{1, 2}}}, Removed: []TopicPartitions{{Topic: "events.a", Partitions: []int32{0}}}, Changed: true, New: true}},
		Omitted: &Omitted{Evicted: 2},
	}
	cases := []struct {
		name, about string
		r           rec
	}{
		{"classic-group", "classic group metadata (key 0x01, value version 0): a static and a dynamic member",
			rec{kind: keyGroup, group: "classic-g", img: &groupImage{protocolType: "consumer", generation: 3, protocol: "range",
				leader: "m-a", stateTime: time.UnixMilli(1764988800123), members: []memberImage{
					{id: "m-a", clientID: "client-a", clientHost: "127.0.0.1", session: 45 * time.Second, rebalance: time.Minute,
						metadata: []byte("meta-a"), assignment: []byte("assign-a")},
					{id: "i-b-uuid", instanceID: "i-b", clientID: "client-b", clientHost: "10.1.2.3", session: 10 * time.Second,
						rebalance: 30 * time.Second, metadata: []byte("meta-b")},
				}}}},
		{"offset", "committed offset (key 0x02, value version 0)",
			rec{kind: keyOffset, group: "classic-g", tp: topicPartition{"orders", 2},
				off: offset{offset: 1234567, leaderEpoch: 5, metadata: "m", commitMs: 1764988800123, expireMs: 1765593600123}}},
		{"consumer-group", "consumer group metadata (key 0x03, value version 0): group epoch and metadata hash",
			rec{kind: keyCGroup, group: "cg-848", c: &crec{epoch: 7, hash: 0x0123456789abcdef}}},
		{"consumer-member", "consumer group member metadata (key 0x05, value version 0, with the principal appended)",
			rec{kind: keyCMember, group: "cg-848", c: &crec{member: "Fz0JD6q43vlmWtc0gNinJw", meta: &cmeta{
				instanceID: "static-cg", rack: "r1", clientID: "compat", clientHost: "127.0.0.1", rebalanceTimeout: 30 * time.Second,
				names: []string{"events.b", "orders"}, regex: `events\..*`, assignor: "uniform", principal: "User:alice"}}}},
		{"consumer-member-classic", "consumer group member metadata (key 0x05) of a classic member in a consumer group",
			rec{kind: keyCMember, group: "cg-848", c: &crec{member: "classic-m", meta: &cmeta{
				clientID: "old", clientHost: "127.0.0.1", rebalanceTimeout: -time.Second, names: []string{"orders"},
				classic: &classicMeta{session: 45 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{
					{Name: "range", Metadata: []byte("r")}, {Name: "cooperative-sticky", Metadata: []byte("cs")}}},
				principal: "User:bob"}}}},
		{"consumer-target-metadata", "consumer group target assignment metadata (key 0x06, value version 0)",
			rec{kind: keyCTMeta, group: "cg-848", c: &crec{assignEpoch: 7}}},
		{"consumer-target", "a member's target assignment (key 0x07, value version 0)",
			rec{kind: keyCTarget, group: "cg-848", c: &crec{member: "Fz0JD6q43vlmWtc0gNinJw",
				target: tpset{"orders": {0, 2}, "events.a": {1}}}}},
		{"consumer-current", "a member's current assignment (key 0x08, value version 0): epochs, state, assigned and pending partitions with their epochs",
			rec{kind: keyCCurrent, group: "cg-848", c: &crec{member: "Fz0JD6q43vlmWtc0gNinJw", cur: &ccurrent{
				epoch: 7, prevEpoch: 6, state: mUnrevoked,
				assigned:   tpset{"orders": {0, 2}},
				pending:    tpset{"events.a": {1}},
				assignedAt: map[topicPartition]int32{{"orders", 0}: 6, {"orders", 2}: 7, {"events.a", 1}: 7}}}}},
		{"history", "a rebalance history event (key 0x09, value version 1: the event's JSON as one S2 block)",
			rec{kind: keyHistory, group: "cg-848", seq: 4, ev: ev}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur := c.r.encode()
			key, value := golden.Record(t, c.name, c.about, cur.Key, cur.Value)
			got, ok, err := decode(key, value)
			if err != nil || !ok {
				t.Fatalf("decode: ok %v, %v", ok, err)
			}
			if c.r.kind == keyHistory {
				checkHistoryGolden(t, got, value, ev)
				return
			}
			if !reflect.DeepEqual(got, c.r) {
				t.Errorf("decoded\n%s\nwant\n%s", describeRec(got), describeRec(c.r))
			}
			again := got.encode()
			if !bytes.Equal(again.Key, key) || !bytes.Equal(again.Value, value) {
				t.Errorf("encoding changed:\nstored  %x %x\nencoded %x %x", key, value, again.Key, again.Value)
			}
			if c.r.kind == keyOffset {
				checkLoadedOffset(t, key, value, c.r)
			}
		})
	}

	// Records of cohort 0275013 (2026-12-02).
	t.Run("consumer-member-0275013", func(t *testing.T) {
		// Before the principal was appended: it reads as "" (not known yet).
		key, value := golden.Load(t, "consumer-member-0275013")
		got, ok, err := decode(key, value)
		if err != nil || !ok {
			t.Fatalf("decode: ok %v, %v", ok, err)
		}
		want := rec{kind: keyCMember, group: "cg-848", c: &crec{member: "Fz0JD6q43vlmWtc0gNinJw", meta: &cmeta{
			instanceID: "static-cg", rack: "r1", clientID: "compat-admin", clientHost: "127.0.0.1", rebalanceTimeout: 30 * time.Second,
			regex: `events\..*`, assignor: "uniform"}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decoded\n%s\nwant\n%s", describeRec(got), describeRec(want))
		}
	})
	t.Run("history-json-0275013", func(t *testing.T) {
		// Value version 0: the event's JSON as is, before compression.
		key, value := golden.Load(t, "history-json-0275013")
		got, ok, err := decode(key, value)
		if err != nil || !ok {
			t.Fatalf("decode: ok %v, %v", ok, err)
		}
		e, err := got.event()
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != 2 || e.Group != "classic-g" || e.Type != "classic" || e.Generation != 2 || e.FromGeneration != 1 ||
			e.Cause.Kind != CauseMemberJoined || e.Cause.InstanceID != "static-1" || e.DurationMs != 295 ||
			!e.Start.Equal(time.Date(2026, 12, 6, 15, 20, 27, 610022063, time.UTC)) || len(e.WaitedFor) != 4 || len(e.Members) != 2 ||
			!reflect.DeepEqual(e.Members[1].Added, []TopicPartitions{{Topic: "orders", Partitions: []int32{2}}}) || !e.Members[1].New {
			t.Errorf("decoded %+v", e)
		}
	})
}

// checkHistoryGolden checks a stored history event: it decodes to want, and
// its compressed JSON is what this version marshals (the compressed bytes
// themselves may differ with the compression library's version).
func checkHistoryGolden(t *testing.T, got rec, value []byte, want *RebalanceEvent) {
	t.Helper()
	e, err := got.event()
	if err != nil {
		t.Fatal(err)
	}
	if got.seq != want.Seq || !reflect.DeepEqual(e, want) {
		t.Errorf("decoded (seq %d)\n%+v\nwant\n%+v", got.seq, e, want)
	}
	if v := binary.BigEndian.Uint16(value); v != historyValueS2 {
		t.Fatalf("value version %d, want %d", v, historyValueS2)
	}
	body, err := s2.Decode(nil, value[2:])
	if err != nil {
		t.Fatal(err)
	}
	if mine, _ := json.Marshal(want); !bytes.Equal(body, mine) {
		t.Errorf("stored JSON\n%s\nthis version marshals\n%s", body, mine)
	}
}

// checkLoadedOffset checks the partition load's own offset decoder
// (Shard.Load), which is not decode.
func checkLoadedOffset(t *testing.T, key, value []byte, want rec) {
	t.Helper()
	s := NewShard(Defaults(), nil)
	if err := s.Load(key, value); err != nil {
		t.Fatal(err)
	}
	s.FinishLoad(time.UnixMilli(1764988800123), &Output{})
	g := s.Group(want.group)
	if g == nil {
		t.Fatalf("group %q not loaded", want.group)
	}
	if o, ok := g.offsets.get(want.tp); !ok || o != want.off {
		t.Errorf("loaded offset %+v (%v), want %+v", o, ok, want.off)
	}
}

// describeRec shows a record's fields, pointers followed.
func describeRec(r rec) string {
	s := fmt.Sprintf("%+v", r)
	if r.img != nil {
		s += fmt.Sprintf("\nimg: %+v", *r.img)
	}
	if r.c != nil {
		s += fmt.Sprintf("\nc: %+v", *r.c)
		if r.c.meta != nil {
			s += fmt.Sprintf("\nmeta: %+v", *r.c.meta)
			if r.c.meta.classic != nil {
				s += fmt.Sprintf("\nclassic: %+v", *r.c.meta.classic)
			}
		}
		if r.c.cur != nil {
			s += fmt.Sprintf("\ncur: %+v", *r.c.cur)
		}
	}
	return s
}
