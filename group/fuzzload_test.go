package group

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzShardLoad feeds arbitrary stored records to Shard.Load, as a damaged
// or foreign store would: input is a sequence of uint16 key length, key,
// uint16 value length (0xffff: a tombstone), value. The shard must never
// panic, whether it refuses a record or takes it, and what it took must
// serve: FinishLoad, every group's offsets, describe and history. Each
// input is loaded twice, with history kept and with history off, which
// must load the same groups, offsets and writes (history records aside).
func FuzzShardLoad(f *testing.F) {
	var seed []byte
	add := func(r Record) {
		seed = binary.BigEndian.AppendUint16(seed, uint16(len(r.Key)))
		seed = append(seed, r.Key...)
		if r.Value == nil {
			seed = binary.BigEndian.AppendUint16(seed, 0xffff)
			return
		}
		seed = binary.BigEndian.AppendUint16(seed, uint16(len(r.Value)))
		seed = append(seed, r.Value...)
	}
	img := &groupImage{protocolType: "consumer", generation: 3, protocol: "range", leader: "m1",
		stateTime: time.UnixMilli(1_700_000_000_000), members: []memberImage{
			{id: "m1", clientID: "c", session: 10 * time.Second, rebalance: time.Minute, metadata: []byte("md"), assignment: []byte("as")},
			{id: "m2", instanceID: "i2", clientID: "c", session: 10 * time.Second, metadata: []byte("md2")}}}
	add(Record{Key: groupKey("g"), Value: encodeGroupImage(img)})
	for p, meta := range []string{"", "meta", ""} {
		r, _ := appendOffsetRecord(nil, "g", topicPartition{"t", int32(p)}, &offset{offset: int64(p), leaderEpoch: 1, metadata: meta, commitMs: 5})
		add(r)
	}
	r, _ := appendOffsetRecord(nil, "g", topicPartition{"t", 1}, &offset{})
	add(Record{Key: r.Key}) // a tombstone
	r, _ = appendOffsetRecord(nil, "simple", topicPartition{"u", 0}, &offset{offset: 9, expireMs: 99})
	add(r)
	hr := rec{kind: keyHistory, group: "g", ev: &RebalanceEvent{Seq: 1, Group: "g", Type: "classic", Generation: 3}}
	add(hr.encodeHistory())
	// A consumer-protocol (KIP-848) group: its group, member, target and
	// current-assignment records, one member migrated from the classic
	// protocol.
	set := tpset{"t": {0, 1}, "u": {2}}
	at := map[topicPartition]int32{{"t", 0}: 4, {"t", 1}: 4, {"u", 2}: 5}
	for _, c := range []rec{
		{kind: keyCGroup, group: "cg", c: &crec{epoch: 5, hash: 42}},
		{kind: keyCTMeta, group: "cg", c: &crec{assignEpoch: 5}},
		{kind: keyCMember, group: "cg", c: &crec{member: "a", meta: &cmeta{clientID: "c", rebalanceTimeout: time.Minute, names: []string{"t", "u"}, assignor: "uniform"}}},
		{kind: keyCMember, group: "cg", c: &crec{member: "b", meta: &cmeta{instanceID: "i", rack: "r", regex: "t.*",
			classic: &classicMeta{session: 10 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}}}}},
		{kind: keyCTarget, group: "cg", c: &crec{member: "a", target: set}},
		{kind: keyCCurrent, group: "cg", c: &crec{member: "a", cur: &ccurrent{epoch: 5, prevEpoch: 4, assigned: set, pending: tpset{}, assignedAt: at}}},
		{kind: keyCCurrent, group: "cg", c: &crec{member: "b"}, del: true},
	} {
		add(c.encodeConsumer())
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, in []byte) {
		on := loadFuzzed(t, in, Defaults())
		// History off changes nothing but the kept history: the same
		// groups, described alike, with the same offsets, and the
		// load writes the same records but for history records.
		cfg := Defaults()
		cfg.HistorySize = -1
		cfg.OnRebalance = func(RebalanceEvent) {}
		if off := loadFuzzed(t, in, cfg); off != on {
			t.Fatalf("history off loads otherwise:\nhistory on:\n%s\nhistory off:\n%s", on, off)
		}
	})
}

// loadFuzzed loads the records of in (FuzzShardLoad's layout) into a shard
// of cfg, checks what it serves, and returns a text of it: its groups, each
// described (DescribeGroups v5) with its offsets, and the records its load
// wrote but for history records.
func loadFuzzed(t *testing.T, in []byte, cfg Config) string {
	s := NewShard(cfg, seededReader{})
	s.Logf = func(string, ...any) {}
	next := func() ([]byte, bool) {
		if len(in) < 2 {
			return nil, false
		}
		n := int(binary.BigEndian.Uint16(in))
		in = in[2:]
		if n == 0xffff {
			return nil, true
		}
		n = min(n, len(in))
		b := in[:n:n]
		in = in[n:]
		return b, true
	}
	for len(in) > 0 {
		k, ok := next()
		if !ok {
			break
		}
		v, _ := next()
		_ = s.Load(k, v) // refusing a record is fine; panicking is not
	}
	var out Output
	s.FinishLoad(time.UnixMilli(1_700_000_000_000), &out)
	var b strings.Builder
	for _, id := range s.GroupIDs() {
		g := s.Group(id)
		d := s.DescribeGroup(id, 5, false)
		r := kmsg.NewPtrDescribeGroupsResponse()
		r.Version = 5
		r.Groups = append(r.Groups, d)
		fmt.Fprintf(&b, "group %q %x\n", id, r.AppendTo(nil))
		g.offsets.each(func(tp topicPartition, o offset) {
			if got, ok := g.offsets.get(tp); !ok || got != o {
				t.Fatalf("group %q: %v listed but get gives %+v %v", id, tp, got, ok)
			}
			fmt.Fprintf(&b, "  offset %v %+v\n", tp, o)
		})
		_ = s.History(id)
		_ = g.MemberIDs()
	}
	for _, w := range out.Writes {
		for _, r := range w.Records {
			if len(r.Key) > 0 && r.Key[0] == keyHistory {
				continue
			}
			fmt.Fprintf(&b, "wrote %x = %x\n", r.Key, r.Value)
		}
	}
	return b.String()
}
