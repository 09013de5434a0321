package assign

import (
	"fmt"
	"slices"
	"strings"
)

// Copartition returns the co-partitioning assignor ("copartition"), for
// consumers that join topics keyed the same way: for every configured set of
// co-partitioned topics, partition p of every topic in the set goes to the
// same member. Sets that share a topic are merged (co-partitioning is
// transitive). Topics in no set are assigned as Range assigns them.
//
// Rules, applied per set to the set's topics that exist and have at least
// one subscriber:
//   - all of them must have the same partition count, or Assign fails with
//     an error naming each topic and its count (the remedy: make the counts
//     equal, or list the topics in different sets if their partitions need
//     not go together);
//   - the set is assigned among the members subscribed to all of them (a
//     member subscribed to only part of a set gets none of the set's
//     partitions, since it could not consume the partner partitions); if no
//     member subscribes to all of them, Assign fails;
//   - partition indexes are split among those members in range fashion
//     (Kafka member order, consecutive blocks).
//
// With no sets configured it assigns exactly like Range.
//
// Like Range it is eager (Cooperative is false) and not sticky: each
// rebalance revokes every partition of every member, and the new blocks
// follow the member order alone, so a member that joins or leaves can move
// partitions between members that stay.
func Copartition(sets ...[]string) Assignor {
	return copartition{simple: simple{CopartitionName}, sets: mergeSets(sets)}
}

type copartition struct {
	simple
	sets [][]string // disjoint, each sorted, ordered by first topic
}

// mergeSets unions overlapping sets (union-find over topic names) and drops
// empty ones.
func mergeSets(sets [][]string) [][]string {
	parent := map[string]string{}
	var find func(string) string
	find = func(t string) string {
		if parent[t] == t {
			return t
		}
		r := find(parent[t])
		parent[t] = r
		return r
	}
	for _, set := range sets {
		for _, t := range set {
			if _, ok := parent[t]; !ok {
				parent[t] = t
			}
		}
		for _, t := range set[min(1, len(set)):] {
			if a, b := find(set[0]), find(t); a != b {
				parent[b] = a
			}
		}
	}
	groups := map[string][]string{}
	for t := range parent {
		r := find(t)
		groups[r] = append(groups[r], t)
	}
	out := make([][]string, 0, len(groups))
	for _, g := range groups {
		slices.Sort(g)
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

func (a copartition) Assign(members []Member, topics map[string]Topic) (map[string]Assignment, error) {
	ms, names, subs, err := subscribers(a.name, members, topics)
	if err != nil {
		return nil, err
	}
	p := newPlan(len(ms))
	inSet := map[string]bool{}
	for _, set := range a.sets {
		var active []string
		for _, t := range set {
			if _, ok := subs[t]; ok {
				active = append(active, t)
				inSet[t] = true
			}
		}
		if len(active) == 0 {
			continue
		}
		n := topics[active[0]].Partitions
		for _, t := range active[1:] {
			if topics[t].Partitions != n {
				counts := make([]string, len(active))
				for i, t := range active {
					counts[i] = fmt.Sprintf("%s=%d", t, topics[t].Partitions)
				}
				return nil, fmt.Errorf("%s: co-partitioned topics have different partition counts: %s; give them the same partition count, or put them in separate co-partitioned sets", a.name, strings.Join(counts, " "))
			}
		}
		// Members subscribed to every active topic of the set, in order.
		var eligible []int
		for _, m := range subs[active[0]] {
			all := true
			for _, t := range active[1:] {
				if !slices.Contains(subs[t], m) {
					all = false
					break
				}
			}
			if all {
				eligible = append(eligible, m)
			}
		}
		if len(eligible) == 0 {
			return nil, fmt.Errorf("%s: no member subscribes to all co-partitioned topics %v; subscribe the members that "+
				"join these topics to every one of them, or leave the topics out of the co-partitioned set", a.name, active)
		}
		for k, m := range eligible {
			start, count := rangeSplit(int(n), len(eligible), k)
			for _, t := range active {
				for i := 0; i < count; i++ {
					p.add(m, t, int32(start+i))
				}
			}
		}
	}
	for _, t := range names {
		if !inSet[t] {
			rangeTopic(p, t, topics[t].Partitions, subs[t])
		}
	}
	return p.result(ms), nil
}
