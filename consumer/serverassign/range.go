package serverassign

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/cohort-dev/cohort/internal/javastr"
)

// Range returns the "range" assignor: the semantics of Kafka's server-side
// RangeAssignor as of Kafka 3.9 (KAFKA-16944), which is not sticky (3.7 and
// 3.8 kept members' previous partitions; 3.9 dropped that).
//
// Members are ordered static first, by instance id, then dynamic ones by
// member id; ordering static members by instance id keeps their ranges when
// they restart under a new member id. For every topic, its subscribers in
// that order receive contiguous ranges of its P partitions: with n
// subscribers, the first P mod n get ⌈P/n⌉ partitions and the others
// ⌊P/n⌋. Topics with the same partition count and the same subscribers are
// therefore split identically (co-partitioned): a member gets the same
// partition numbers of each.
//
// It ignores prev: the plan depends only on members and topics. Movement
// after a membership change is whatever the new ranges imply; incremental
// reconciliation in the coordinator revokes only what moved. Racks are
// ignored, as by Kafka's server-side range from 3.8 on (its rack matching
// inside range is in the classic client-side assignor only).
func Range() Assignor { return rangeAssignor{} }

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return RangeName }

func (rangeAssignor) Assign(members []Member, topics map[string]Topic, _ Plan) (Plan, error) {
	if err := checkMembers(RangeName, members); err != nil {
		return nil, err
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return kafkaOrder(&members[i], &members[j]) })

	// Every existing, non-empty topic some member subscribes to, by name
	// (C50: the others give no error and no assignment), with its
	// subscribers in member order. Members with the same list share one
	// resolution of it, adjacent in that order or not (a group changing
	// its subscription has members on two long lists, interleaved), and
	// resolving a list costs one pass over it: the time is linear in the
	// members' topic entries, as in Kafka.
	index := map[string]int{}
	var names []string
	var added []int // added[x]: 1 + the position whose resolution last took topic x
	byList := map[string]int{}
	var key []byte
	resolved := make([][]int, len(order)) // per position in order
	for k, i := range order {
		list := members[i].Topics
		if k > 0 && slices.Equal(list, members[order[k-1]].Topics) {
			resolved[k] = resolved[k-1]
			continue
		}
		key = key[:0]
		for _, t := range list {
			key = binary.AppendUvarint(key, uint64(len(t)))
			key = append(key, t...)
		}
		if first, ok := byList[string(key)]; ok {
			resolved[k] = resolved[first]
			continue
		}
		byList[string(key)] = k
		var ts []int
		for _, t := range list {
			if md, ok := topics[t]; !ok || md.Partitions <= 0 {
				continue
			}
			x, ok := index[t]
			if !ok {
				x = len(names)
				index[t] = x
				names = append(names, t)
				added = append(added, 0)
			}
			if added[x] != k+1 { // a name listed twice counts once
				added[x] = k + 1
				ts = append(ts, x)
			}
		}
		resolved[k] = ts
	}
	nsubs := make([]int, len(names))
	for _, ts := range resolved {
		for _, x := range ts {
			nsubs[x]++
		}
	}
	// gets[k] counts the topics the member at position k receives
	// partitions of, to size its map once.
	gets := make([]int, len(order))
	seen := make([]int, len(names))
	parts := make([]int, len(names))
	total := 0
	for x, t := range names {
		parts[x] = int(topics[t].Partitions)
		total += parts[x]
	}
	for k, ts := range resolved {
		for _, x := range ts {
			if seen[x] < parts[x] {
				gets[k]++
			}
			seen[x]++
		}
	}
	plan := make(Plan, len(members))
	byPos := make([]map[string][]int32, len(order))
	for k, i := range order {
		byPos[k] = make(map[string][]int32, gets[k])
		plan[members[i].ID] = byPos[k]
	}
	// Contiguous ranges: subscriber j of n gets [start, start+size).
	clear(seen)
	buf := make([]int32, total)
	off := 0
	base := make([]int, len(names))
	for x := range names {
		base[x] = off
		for p := range parts[x] {
			buf[off+p] = int32(p)
		}
		off += parts[x]
	}
	for k, ts := range resolved {
		for _, x := range ts {
			j, n, p := seen[x], nsubs[x], parts[x]
			seen[x]++
			per, extra := p/n, p%n
			start, size := per*j+min(j, extra), per
			if j < extra {
				size++
			}
			if size > 0 {
				lo := base[x] + start
				byPos[k][names[x]] = buf[lo : lo+size : lo+size]
			}
		}
	}
	return plan, nil
}

// kafkaOrder is the member order of Kafka's range assignor: members with an
// instance id first, by instance id, then the others by member id, ids
// compared as Java's String.compareTo (UTF-16 code units, javastr.Compare).
func kafkaOrder(a, b *Member) int {
	dynamic := func(m *Member) int {
		if m.InstanceID == "" {
			return 1
		}
		return 0
	}
	return cmp.Or(dynamic(a)-dynamic(b), javastr.Compare(a.InstanceID, b.InstanceID), javastr.Compare(a.ID, b.ID))
}
