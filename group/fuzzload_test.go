package group

import (
	"encoding/binary"
	"testing"
	"time"
)

// FuzzShardLoad feeds arbitrary stored records to Shard.Load, as a damaged
// or foreign store would: input is a sequence of uint16 key length, key,
// uint16 value length (0xffff: a tombstone), value. The shard must never
// panic, whether it refuses a record or takes it, and what it took must
// serve: FinishLoad, every group's offsets, describe and history.
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
	f.Add(seed)
	f.Fuzz(func(t *testing.T, in []byte) {
		s := NewShard(Defaults(), seededReader{})
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
		for _, id := range s.GroupIDs() {
			g := s.Group(id)
			g.offsets.each(func(tp topicPartition, o offset) {
				if got, ok := g.offsets.get(tp); !ok || got != o {
					t.Fatalf("group %q: %v listed but get gives %+v %v", id, tp, got, ok)
				}
			})
			_ = s.History(id)
			_ = g.MemberIDs()
		}
	})
}
