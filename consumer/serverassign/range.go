package serverassign

import (
	"cmp"
	"slices"
)

// Range returns the "range" assignor: Kafka's server-side range semantics.
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
// ignored.
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

	// Subscribers of every existing, non-empty topic, in member order.
	subs := make(map[string][]int)
	for _, i := range order {
		for _, t := range members[i].Topics {
			if md, ok := topics[t]; !ok || md.Partitions <= 0 {
				continue // C50: no error, no assignment
			}
			if s := subs[t]; len(s) == 0 || s[len(s)-1] != i {
				subs[t] = append(s, i)
			}
		}
	}
	names := make([]string, 0, len(subs))
	total := 0
	for t := range subs {
		names = append(names, t)
		total += int(topics[t].Partitions)
	}
	slices.Sort(names)

	plan := make(Plan, len(members))
	for _, m := range members {
		plan[m.ID] = map[string][]int32{}
	}
	buf := make([]int32, 0, total)
	for _, t := range names {
		p, list := int(topics[t].Partitions), subs[t]
		n := len(list)
		per, extra := p/n, p%n
		next := int32(0)
		for k, i := range list {
			size := per
			if k < extra {
				size++
			}
			if size == 0 {
				continue
			}
			start := len(buf)
			for j := 0; j < size; j++ {
				buf = append(buf, next)
				next++
			}
			plan[members[i].ID][t] = buf[start:len(buf):len(buf)]
		}
	}
	return plan, nil
}

// kafkaOrder is the member order of Kafka's range assignor: members with an
// instance id first, by instance id, then the others by member id.
func kafkaOrder(a, b *Member) int {
	dynamic := func(m *Member) int {
		if m.InstanceID == "" {
			return 1
		}
		return 0
	}
	return cmp.Or(dynamic(a)-dynamic(b), cmp.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.ID, b.ID))
}
