package group

import (
	"errors"
	"testing"
)

// Load holds a group's offsets until the group's last one is read and makes
// its map once; the result must be what applying every record in order
// gives, however the records of groups, kinds and tombstones interleave.
func TestLoadHoldsAGroupsOffsets(t *testing.T) {
	h := newH(t)
	rec := func(group, topic string, p int32, off int64, meta string) Record {
		r, _ := appendOffsetRecord(nil, group, topicPartition{topic, p}, &offset{offset: off, leaderEpoch: 3, metadata: meta, commitMs: 1, expireMs: -1})
		return r
	}
	load := func(key, value []byte) {
		t.Helper()
		if err := h.s.Load(key, value); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []Record{
		rec("g1", "t", 0, 10, "m"), rec("g1", "t", 1, 11, ""), rec("g1", "u", 0, 12, ""),
		rec("g2", "t", 0, 20, ""), // another group: g1's run is applied
		rec("g1", "t", 2, 13, ""), // g1 again: added to its map, not replacing it
		rec("g1", "t", 1, 14, ""), // the same key again: the later value wins
		rec("g1", "u", 1, 15, ""), // held, then deleted below
	} {
		load(r.Key, r.Value)
	}
	// A tombstone after held offsets deletes what they set, whether it was
	// applied already (u/0, before g2) or is still held (u/1).
	for _, p := range []int32{0, 1} {
		del := rec("g1", "u", p, 0, "")
		load(del.Key, nil)
	}
	last := rec("g3", "v", 7, 30, "") // held until FinishLoad
	load(last.Key, last.Value)
	h.do(func(_ Ticket, out *Output) { h.s.FinishLoad(h.now, out) })

	for _, c := range []struct {
		group, topic string
		p            int32
		want         int64
	}{
		{"g1", "t", 0, 10}, {"g1", "t", 1, 14}, {"g1", "t", 2, 13}, {"g1", "u", 0, -1}, {"g1", "u", 1, -1},
		{"g2", "t", 0, 20}, {"g3", "v", 7, 30},
	} {
		if got, code := h.fetch(c.group, c.topic, c.p); got != c.want || code != ErrNone {
			t.Errorf("%s %s/%d: offset %d (code %d), want %d", c.group, c.topic, c.p, got, code, c.want)
		}
	}
	if m := func() string { o, _ := h.s.Group("g1").offsets.get(topicPartition{"t", 0}); return o.metadata }(); m != "m" {
		t.Errorf("metadata %q", m)
	}
	if n := h.s.Group("g1").offsets.len(); n != 3 {
		t.Errorf("g1 holds %d offsets, want 3", n)
	}

	// A damaged offset key or value is an error naming the damage.
	bad := rec("g4", "t", 0, 1, "")
	if err := newH(t).s.Load(bad.Key[:len(bad.Key)-2], bad.Value); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("truncated key: %v", err)
	}
	if err := newH(t).s.Load(bad.Key, bad.Value[:5]); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("truncated value: %v", err)
	}
}
