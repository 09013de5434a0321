package assign

import (
	"slices"
	"strconv"
	"strings"
)

// Range's rack-aware variant, the one Kafka's RangeAssignor (3.5+, KIP-881)
// switches to when members and partition replicas report racks. What it
// keeps from plain range: per topic, each subscriber gets its share (the
// partition count divided by the subscribers, the first remainder's worth
// one more), and topics with the same subscribers and partition count keep
// partition p of each on one member. What it adds: before the plain ranges
// are dealt, partitions go to subscribers in a rack holding one of their
// replicas, as far as the shares allow. The steps, as Kafka takes them:
//
//  1. It applies only if, for some topic, a subscriber's rack is among the
//     replicas' racks and the partitions do not all have the same racks
//     (then every member is as local as any other).
//  2. Topics with the same subscribers and partition count are matched
//     together: partition by partition, the first subscriber (in member
//     order) still under its share of every one of them and rack-local
//     for that partition of every one of them takes it in all of them. A
//     topic alone in its class is matched alone: each subscriber in member
//     order takes, up to its share, the lowest unassigned partitions it is
//     rack-local for (a member without a rack counts as local everywhere).
//  3. Then every topic's still unassigned partitions are dealt as plain
//     range deals them, each subscriber in member order taking the lowest
//     ones up to what its share leaves.
//
// Per topic every subscriber still ends with the partition count divided by
// the subscribers, or one more (each step respects the shares), though which
// subscribers get the one more can differ from plain range; and topics with
// the same subscribers and partition count still have partition p on one
// member (step 2 gives p of all of them at once, and step 3 then deals the
// same free partitions of each to the same subscribers).

// rangeState is one topic's progress.
type rangeState struct {
	topic      string
	subs       []int      // subscribers, in member order
	racks      [][]string // racks of each partition's replicas; nil when no subscriber has a rack
	taken      []bool     // per partition: assigned already
	next       int32      // no partition below next is free
	got        []int      // per subscriber (position in subs): partitions of this topic given so far
	per, extra int        // the share: per, plus one for the next extra members to pass per
	local      bool       // step 1 applies to this topic
}

func newRangeState(topic string, n int32, subs []int, ms []Member, replicaRacks [][]string) *rangeState {
	st := &rangeState{topic: topic, subs: subs, got: make([]int, len(subs))}
	st.taken = make([]bool, n)
	st.per, st.extra = int(n)/len(subs), int(n)%len(subs)
	var memberRacks []string
	for _, m := range subs {
		if r := ms[m].Rack; r != "" && !slices.Contains(memberRacks, r) {
			memberRacks = append(memberRacks, r)
		}
	}
	if len(memberRacks) == 0 {
		return st
	}
	st.racks = make([][]string, n)
	var all []string
	for p := range st.racks {
		if p < len(replicaRacks) {
			for _, r := range replicaRacks[p] {
				if r != "" && !slices.Contains(st.racks[p], r) {
					st.racks[p] = append(st.racks[p], r)
					if !slices.Contains(all, r) {
						all = append(all, r)
					}
				}
			}
		}
	}
	shared := slices.ContainsFunc(memberRacks, func(r string) bool { return slices.Contains(all, r) })
	uniform := true
	for _, rs := range st.racks {
		if len(rs) != len(all) { // each rs holds distinct racks of all
			uniform = false
			break
		}
	}
	st.local = shared && !uniform
	return st
}

// room is how many more partitions of the topic subscriber k may take.
func (st *rangeState) room(k int) int {
	n := st.per - st.got[k]
	if st.extra > 0 {
		n++
	}
	return max(0, n)
}

// give hands partitions ps (ascending, all free) to subscriber k.
func (st *rangeState) give(pl plan, k int, ps []int32) {
	pl.add(st.subs[k], st.topic, ps...)
	st.got[k] += len(ps)
	if st.got[k] > st.per {
		st.extra--
	}
	for _, p := range ps {
		st.taken[p] = true
	}
	for int(st.next) < len(st.taken) && st.taken[st.next] {
		st.next++
	}
}

// deal is step 3: each subscriber in member order takes the lowest free
// partitions, up to its room.
func (st *rangeState) deal(pl plan) {
	var take []int32
	for k := range st.subs {
		take = st.lowestFree(take[:0], st.room(k))
		if len(take) > 0 {
			st.give(pl, k, take)
		}
	}
}

// lowestFree appends to take the lowest n free partitions.
func (st *rangeState) lowestFree(take []int32, n int) []int32 {
	for p := st.next; int(p) < len(st.taken) && len(take) < n; p++ {
		if !st.taken[p] {
			take = append(take, p)
		}
	}
	return take
}

// dealLocal is step 2 for a topic alone in its class: each subscriber in
// member order takes the lowest free partitions it is rack-local for, up to
// its room. A member with a rack looks only at the partitions with a replica
// there (indexed per rack, each list walked from the first partition not yet
// taken), so a rack holding few replicas costs its members little.
func (st *rangeState) dealLocal(pl plan, ms []Member) {
	onRack := map[string][]int32{}
	for p, rs := range st.racks {
		for _, r := range rs {
			onRack[r] = append(onRack[r], int32(p))
		}
	}
	from := map[string]int{}
	var take []int32
	for k, m := range st.subs {
		room := st.room(k)
		if room == 0 {
			continue
		}
		take = take[:0]
		if r := ms[m].Rack; r == "" {
			take = st.lowestFree(take, room) // local everywhere
		} else {
			list, i := onRack[r], from[r]
			for i < len(list) && st.taken[list[i]] {
				i++
			}
			from[r] = i
			for ; i < len(list) && len(take) < room; i++ {
				if !st.taken[list[i]] {
					take = append(take, list[i])
				}
			}
		}
		if len(take) > 0 {
			st.give(pl, k, take)
		}
	}
}

// rangeWithRacks is Range's assignment when racks are in play (see the
// steps above); it reports false, having assigned nothing, when step 1
// applies to no topic.
func rangeWithRacks(pl plan, ms []Member, names []string, subs map[string][]int, topics map[string]Topic) bool {
	var states []*rangeState
	applies := false
	for _, t := range names {
		if n := topics[t].Partitions; n > 0 {
			st := newRangeState(t, n, subs[t], ms, topics[t].Racks)
			states = append(states, st)
			applies = applies || st.local
		}
	}
	if !applies {
		return false
	}
	// Step 2: classes of topics with the same subscribers and the same
	// number of partitions with known racks (none when no subscriber has
	// a rack), in topic order.
	class := map[string][]*rangeState{}
	var keys []string
	for _, st := range states {
		var b strings.Builder
		for _, m := range st.subs {
			b.WriteString(strconv.Itoa(m))
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(len(st.racks)))
		k := b.String()
		if _, ok := class[k]; !ok {
			keys = append(keys, k)
		}
		class[k] = append(class[k], st)
	}
	for _, k := range keys {
		cs := class[k]
		if len(cs) == 1 {
			if st := cs[0]; st.local {
				st.dealLocal(pl, ms)
			}
			continue
		}
		matchTogether(pl, ms, cs)
	}
	// Step 3.
	for _, st := range states {
		st.deal(pl)
	}
	return true
}

// matchTogether is step 2 for topics with the same subscribers and
// partition count: partition p of all of them goes to the first subscriber
// (in member order) with room in each and rack-local for p in each. The
// topics share their subscribers (position k is the same member in each)
// and, since p goes to one member in all of them at once, each subscriber
// has the same room in all of them. Subscribers are kept in one queue per
// rack (and one for those without a rack, local everywhere), in member
// order, a subscriber leaving its queue once it has no room left (room
// never grows back); partition p looks at the heads of the queues of the
// racks holding p in every topic.
func matchTogether(pl plan, ms []Member, cs []*rangeState) {
	first := cs[0]
	queue := map[string][]int{}
	for k, m := range first.subs {
		r := ms[m].Rack
		queue[r] = append(queue[r], k)
	}
	head := func(r string) int {
		q := queue[r]
		for len(q) > 0 && first.room(q[0]) == 0 {
			q = q[1:]
		}
		queue[r] = q
		if len(q) == 0 {
			return -1
		}
		return q[0]
	}
	for p := range int32(len(first.racks)) {
		best := head("")
		for _, r := range first.racks[p] {
			inAll := true
			for _, st := range cs[1:] {
				inAll = inAll && slices.Contains(st.racks[p], r)
			}
			if !inAll {
				continue
			}
			if k := head(r); k >= 0 && (best < 0 || k < best) {
				best = k
			}
		}
		if best < 0 {
			continue
		}
		for _, st := range cs {
			st.give(pl, best, []int32{p})
		}
	}
}
