package group

import (
	"cmp"
	"slices"
	"sort"
)

// offsetTable holds a group's committed offsets: its topics sorted by name,
// each with its offsets sorted by partition in a slice without pointers.
//
// It replaced a map keyed by topic and partition, which took 92 bytes per
// offset (72-byte slots at a load factor near 7/8), all of them scanned by
// the garbage collector: here an offset takes 24 bytes the collector never
// scans, plus, only for the offsets that have them, its metadata string and
// explicit expiry in a map beside the topic's slice (most commits carry
// neither). Loading a large store after a restart is mostly the cost of the
// memory the loaded state takes (fresh pages, faulted in one at a time, and
// the collector's work on them); an idle group with one offset no longer
// carries a map's eight-slot group either. Iteration is in (topic,
// partition) order, which is what fetching all offsets and expiring them
// want. The zero value is empty.
type offsetTable []topicOffsets

// topicOffsets is one topic's offsets.
type topicOffsets struct {
	topic string
	parts []storedOffset // sorted by partition
	// extra holds the metadata and explicit expiry of the partitions
	// whose commit had either; nil if none has.
	extra map[int32]offsetExtra
}

// storedOffset is an offset as the table keeps it.
type storedOffset struct {
	offset      int64
	commitMs    int64
	leaderEpoch int32
	partition   int32
}

// offsetExtra is what few offsets carry besides a storedOffset.
type offsetExtra struct {
	metadata string
	expireMs int64
}

func toStored(p int32, o *offset) storedOffset {
	return storedOffset{offset: o.offset, commitMs: o.commitMs, leaderEpoch: o.leaderEpoch, partition: p}
}

// set puts p's offset into to, keeping parts sorted.
func (to *topicOffsets) set(o *offset, p int32) {
	so := toStored(p, o)
	if pi, ok := partIndex(to.parts, p); ok {
		to.parts[pi] = so
	} else {
		to.parts = slices.Insert(to.parts, pi, so)
	}
	to.setExtra(o, p)
}

// setExtra records o's metadata and expiry for p, or forgets p's.
func (to *topicOffsets) setExtra(o *offset, p int32) {
	if o.metadata != "" || o.expireMs != 0 {
		if to.extra == nil {
			to.extra = make(map[int32]offsetExtra)
		}
		to.extra[p] = offsetExtra{metadata: o.metadata, expireMs: o.expireMs}
	} else if to.extra != nil {
		delete(to.extra, p)
		if len(to.extra) == 0 {
			to.extra = nil
		}
	}
}

// offset returns the full offset of so, a partition of to.
func (to *topicOffsets) offset(so *storedOffset) offset {
	o := offset{offset: so.offset, leaderEpoch: so.leaderEpoch, commitMs: so.commitMs}
	if to.extra != nil {
		if ex, ok := to.extra[so.partition]; ok {
			o.metadata, o.expireMs = ex.metadata, ex.expireMs
		}
	}
	return o
}

// topicIndex is the position of topic in t, and whether it is there.
func (t offsetTable) topicIndex(topic string) (int, bool) {
	return sort.Find(len(t), func(i int) int { return cmp.Compare(topic, t[i].topic) })
}

// partIndex is the position of partition p in parts, and whether it is
// there. Partitions committed from 0 up sit at their own index, which is
// tried first.
func partIndex(parts []storedOffset, p int32) (int, bool) {
	if p >= 0 && int(p) < len(parts) && parts[p].partition == p {
		return int(p), true
	}
	return sort.Find(len(parts), func(i int) int { return cmp.Compare(p, parts[i].partition) })
}

// len is the number of offsets held.
func (t offsetTable) len() int {
	n := 0
	for i := range t {
		n += len(t[i].parts)
	}
	return n
}

// get returns the offset committed for tp.
func (t offsetTable) get(tp topicPartition) (offset, bool) {
	if ti, ok := t.topicIndex(tp.topic); ok {
		to := &t[ti]
		if pi, ok := partIndex(to.parts, tp.partition); ok {
			return to.offset(&to.parts[pi]), true
		}
	}
	return offset{}, false
}

// has reports whether an offset is committed for tp.
func (t offsetTable) has(tp topicPartition) bool {
	if ti, ok := t.topicIndex(tp.topic); ok {
		_, ok := partIndex(t[ti].parts, tp.partition)
		return ok
	}
	return false
}

// put sets tp's offset.
func (t *offsetTable) put(tp topicPartition, o offset) {
	ti, ok := t.topicIndex(tp.topic)
	if !ok {
		*t = slices.Insert(*t, ti, topicOffsets{topic: tp.topic})
	}
	(*t)[ti].set(&o, tp.partition)
}

// drop removes tp's offset, and the topic with its last offset. An empty
// table is nil again.
func (t *offsetTable) drop(tp topicPartition) {
	ti, ok := t.topicIndex(tp.topic)
	if !ok {
		return
	}
	to := &(*t)[ti]
	pi, ok := partIndex(to.parts, tp.partition)
	if !ok {
		return
	}
	to.parts = slices.Delete(to.parts, pi, pi+1)
	to.setExtra(&offset{}, tp.partition)
	if len(to.parts) == 0 {
		*t = slices.Delete(*t, ti, ti+1)
	}
	if len(*t) == 0 {
		*t = nil
	}
}

// each calls fn for every offset, in topic and partition order. fn must not
// change the table.
func (t offsetTable) each(fn func(tp topicPartition, o offset)) {
	for i := range t {
		to := &t[i]
		for j := range to.parts {
			fn(topicPartition{to.topic, to.parts[j].partition}, to.offset(&to.parts[j]))
		}
	}
}

// merge adds offsets read in a row while loading (in the order they were
// read: later ones win) to the table, each topic's slice made at its final
// size. The store hands a group's offsets out in key order: each topic's
// together, partitions as unsigned numbers, topics by the length of their
// name first; they are sorted here when needed.
func (t *offsetTable) merge(offs []loadedOffset) {
	if len(*t) != 0 {
		for i := range offs {
			t.put(offs[i].tp, offs[i].off)
		}
		return
	}
	sorted := true
	for i := 0; i < len(offs); {
		j := i + 1
		for j < len(offs) && offs[j].tp.topic == offs[i].tp.topic {
			j++
		}
		to := topicOffsets{topic: offs[i].tp.topic, parts: make([]storedOffset, j-i)}
		ordered := true
		for k := i; k < j; k++ {
			p := offs[k].tp.partition
			to.parts[k-i] = toStored(p, &offs[k].off)
			if k > i && p <= to.parts[k-i-1].partition {
				ordered = false
			}
			if to.extra != nil || offs[k].off.metadata != "" || offs[k].off.expireMs != 0 {
				to.setExtra(&offs[k].off, p)
			}
		}
		if !ordered {
			to.parts = sortParts(to.parts)
		}
		if n := len(*t); n > 0 && (*t)[n-1].topic >= to.topic {
			sorted = false
		}
		*t = append(*t, to)
		i = j
	}
	if !sorted {
		t.sortTopics()
	}
}

// sortParts sorts parts by partition, the last of equal partitions winning.
func sortParts(parts []storedOffset) []storedOffset {
	slices.SortStableFunc(parts, func(a, b storedOffset) int { return cmp.Compare(a.partition, b.partition) })
	out := parts[:0]
	for i := range parts {
		if i+1 < len(parts) && parts[i+1].partition == parts[i].partition {
			continue
		}
		out = append(out, parts[i])
	}
	return slices.Clip(out)
}

// sortTopics sorts the topics by name, joining runs of the same topic (the
// later run's offsets winning).
func (t *offsetTable) sortTopics() {
	slices.SortStableFunc(*t, func(a, b topicOffsets) int { return cmp.Compare(a.topic, b.topic) })
	out := (*t)[:0]
	for i := range *t {
		to := (*t)[i]
		if n := len(out); n > 0 && out[n-1].topic == to.topic {
			for j := range to.parts {
				o := to.offset(&to.parts[j])
				out[n-1].set(&o, to.parts[j].partition)
			}
			continue
		}
		out = append(out, to)
	}
	*t = out
}
