package assign

import (
	"cmp"
	"fmt"
	"slices"
)

// kafkaCompare orders members the way Kafka's AbstractPartitionAssignor
// (MemberInfo.compareTo) does: static members (with a group instance id)
// first, ordered by instance id, then dynamic members ordered by member id.
// Ordering static members by instance id keeps their partitions stable
// across restarts, when their member ids change.
func kafkaCompare(a, b *Member) int {
	switch {
	case a.InstanceID != "" && b.InstanceID != "":
		if c := cmp.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
	case a.InstanceID != "":
		return -1
	case b.InstanceID != "":
		return 1
	}
	return cmp.Compare(a.ID, b.ID)
}

// sortedMembers returns a copy of members in Kafka's order and rejects input
// no coordinator would produce (empty or duplicate member ids).
func sortedMembers(name string, members []Member) ([]Member, error) {
	out := slices.Clone(members)
	seen := make(map[string]bool, len(out))
	for i := range out {
		id := out[i].ID
		if id == "" {
			return nil, fmt.Errorf("%s: member %d has an empty member id", name, i)
		}
		if seen[id] {
			return nil, fmt.Errorf("%s: member id %q appears twice", name, id)
		}
		seen[id] = true
	}
	slices.SortFunc(out, func(a, b Member) int { return kafkaCompare(&a, &b) })
	return out, nil
}

// subscribers is every assignor's opening: the members in Kafka's order
// (sortedMembers) and the subscribed topics with their subscribers
// (subscribedTopics).
func subscribers(name string, members []Member, topics map[string]Topic) ([]Member, []string, map[string][]int, error) {
	ms, err := sortedMembers(name, members)
	if err != nil {
		return nil, nil, nil, err
	}
	names, subs, err := subscribedTopics(name, ms, topics)
	if err != nil {
		return nil, nil, nil, err
	}
	return ms, names, subs, nil
}

// subscribedTopics returns, in name order, every topic that at least one
// member subscribes to and that has metadata, with the indexes (into the
// sorted members) of its subscribers in member order. A topic a member lists
// twice counts once. Topics without metadata are skipped, as Kafka does.
func subscribedTopics(name string, members []Member, topics map[string]Topic) ([]string, map[string][]int, error) {
	subs := make(map[string][]int)
	for i := range members {
		for _, t := range members[i].Topics {
			md, ok := topics[t]
			if !ok {
				continue
			}
			if md.Partitions < 0 {
				return nil, nil, fmt.Errorf("%s: topic %q has a negative partition count %d", name, t, md.Partitions)
			}
			if slices.Contains(subs[t], i) {
				continue
			}
			subs[t] = append(subs[t], i)
		}
	}
	names := make([]string, 0, len(subs))
	for t := range subs {
		names = append(names, t)
	}
	slices.Sort(names)
	return names, subs, nil
}

// plan collects partitions per member index and topic.
type plan []map[string][]int32

func newPlan(n int) plan {
	p := make(plan, n)
	for i := range p {
		p[i] = make(map[string][]int32)
	}
	return p
}

func (p plan) add(member int, topic string, partitions ...int32) {
	p[member][topic] = append(p[member][topic], partitions...)
}

// result turns the plan into the Assignor result: every member present,
// topics and partitions sorted so that the output (and its encoding) is
// deterministic.
func (p plan) result(members []Member) map[string]Assignment {
	out := make(map[string]Assignment, len(members))
	for i := range members {
		var a Assignment
		names := make([]string, 0, len(p[i]))
		for t := range p[i] {
			names = append(names, t)
		}
		slices.Sort(names)
		for _, t := range names {
			parts := slices.Clone(p[i][t])
			slices.Sort(parts)
			a.Partitions = append(a.Partitions, TopicPartitions{Topic: t, Partitions: parts})
		}
		out[members[i].ID] = a
	}
	return out
}

// rangeSplit gives subscriber k of n its share [start, start+count) of
// units items: the first units%n subscribers get one extra, as in Kafka's
// RangeAssignor.
func rangeSplit(units, n, k int) (start, count int) {
	per, extra := units/n, units%n
	start = per*k + min(k, extra)
	count = per
	if k < extra {
		count++
	}
	return start, count
}

// simple holds what the parameterless assignors share.
type simple struct{ name string }

func (s simple) Name() string                           { return s.name }
func (simple) Cooperative() bool                        { return false }
func (simple) UserData([]TopicPartitions, int32) []byte { return nil }
