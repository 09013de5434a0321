package assign

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cohort-dev/cohort/internal/javastr"
)

// kafkaCompare orders members the way Kafka's AbstractPartitionAssignor
// (MemberInfo.compareTo) does: static members (with a group instance id)
// first, ordered by instance id, then dynamic members ordered by member id.
// Ordering static members by instance id keeps their partitions stable
// across restarts, when their member ids change. Ids compare as Java's
// String.compareTo does (UTF-16 code units, javastr.Compare), not by bytes:
// the two differ for characters beyond U+FFFF against U+E000–U+FFFF.
func kafkaCompare(a, b *Member) int {
	switch {
	case a.InstanceID != "" && b.InstanceID != "":
		if c := javastr.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
	case a.InstanceID != "":
		return -1
	case b.InstanceID != "":
		return 1
	}
	return javastr.Compare(a.ID, b.ID)
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
			// Members are visited in order: a topic this member listed
			// before has it last among its subscribers.
			if s := subs[t]; len(s) > 0 && s[len(s)-1] == i {
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

// plan collects partitions per member index, as topic runs in the order
// they were added. The assignors add a member's partitions topic by topic
// in name order and each topic's in ascending order, so the runs usually
// are the result already; result sorts and merges only a member whose
// additions came in another order. (A map per member, sorted at the end,
// made range and roundrobin slower than sarama's.)
type plan [][]TopicPartitions

func newPlan(n int) plan { return make(plan, n) }

func (p plan) add(member int, topic string, partitions ...int32) {
	runs := p[member]
	if n := len(runs); n > 0 && runs[n-1].Topic == topic {
		runs[n-1].Partitions = append(runs[n-1].Partitions, partitions...)
		return
	}
	p[member] = append(runs, TopicPartitions{Topic: topic, Partitions: append([]int32(nil), partitions...)})
}

// result turns the plan into the Assignor result: every member present,
// topics and partitions sorted so that the output (and its encoding) is
// deterministic.
func (p plan) result(members []Member) map[string]Assignment {
	out := make(map[string]Assignment, len(members))
	for i := range members {
		out[members[i].ID] = Assignment{Partitions: sortRuns(p[i])}
	}
	return out
}

// sortRuns orders runs by topic, merging runs of the same topic, with each
// topic's partitions sorted; in place when they already are.
func sortRuns(runs []TopicPartitions) []TopicPartitions {
	sorted := true
	for k := range runs {
		if k > 0 && runs[k-1].Topic >= runs[k].Topic {
			sorted = false
		}
		if !slices.IsSorted(runs[k].Partitions) {
			slices.Sort(runs[k].Partitions)
		}
	}
	if sorted {
		return runs
	}
	slices.SortStableFunc(runs, func(a, b TopicPartitions) int { return cmp.Compare(a.Topic, b.Topic) })
	merged := runs[:0]
	for _, r := range runs {
		if n := len(merged); n > 0 && merged[n-1].Topic == r.Topic {
			merged[n-1].Partitions = append(merged[n-1].Partitions, r.Partitions...)
			slices.Sort(merged[n-1].Partitions)
			continue
		}
		merged = append(merged, r)
	}
	return merged
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
