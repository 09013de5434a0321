package assign

import "slices"

// Protocol names of the assignors in this package.
const (
	RangeName       = "range"
	RoundRobinName  = "roundrobin"
	CopartitionName = "copartition"
	RedundantName   = "redundant"
	RackAwareName   = "rack-aware"
)

// Range returns Kafka's range assignor ("range"): for each topic
// separately, the subscribers in Kafka's member order (static members by
// instance id, then dynamic members by member id) get consecutive blocks of
// partitions, the first partitions%subscribers members one partition more.
// Partition p of every topic with the same subscribers and partition count
// therefore lands on the same member, which is why range is Kafka's default.
//
// It matches Kafka's RangeAssignor, including the rack-aware variant Kafka
// 3.5+ (KIP-881) switches to when members report racks (Member.Rack) and
// partition replicas sit on some racks but not all (Topic.Racks): the same
// per-topic counts, partitions placed on rack-local members as far as those
// counts and co-partitioning allow (rangeracks.go). RackAware trades
// co-partitioning for more locality.
func Range() Assignor { return rangeAssignor{simple{RangeName}} }

type rangeAssignor struct{ simple }

func (a rangeAssignor) Assign(members []Member, topics map[string]Topic) (map[string]Assignment, error) {
	ms, names, subs, err := subscribers(a.name, members, topics)
	if err != nil {
		return nil, err
	}
	p := newPlan(len(ms))
	if !racksInPlay(ms, names, topics) || !rangeWithRacks(p, ms, names, subs, topics) {
		for _, t := range names {
			rangeTopic(p, t, topics[t].Partitions, subs[t])
		}
	}
	return p.result(ms), nil
}

// racksInPlay reports whether some member has a rack and some subscribed
// topic has replica racks: the cheap test before range looks further.
func racksInPlay(ms []Member, names []string, topics map[string]Topic) bool {
	if !slices.ContainsFunc(ms, func(m Member) bool { return m.Rack != "" }) {
		return false
	}
	return slices.ContainsFunc(names, func(t string) bool { return topics[t].Racks != nil })
}

func rangeTopic(p plan, topic string, partitions int32, subs []int) {
	for k, m := range subs {
		start, count := rangeSplit(int(partitions), len(subs), k)
		for i := 0; i < count; i++ {
			p.add(m, topic, int32(start+i))
		}
	}
}

// RoundRobin returns Kafka's round-robin assignor ("roundrobin"): all
// partitions of subscribed topics, ordered by topic name then partition, are
// dealt to the members in Kafka's member order, skipping members not
// subscribed to the partition's topic. It matches Kafka's RoundRobinAssignor.
func RoundRobin() Assignor { return roundRobin{simple{RoundRobinName}} }

type roundRobin struct{ simple }

func (a roundRobin) Assign(members []Member, topics map[string]Topic) (map[string]Assignment, error) {
	ms, names, subs, err := subscribers(a.name, members, topics)
	if err != nil {
		return nil, err
	}
	p := newPlan(len(ms))
	next := 0 // the circular iterator over members
	for _, t := range names {
		subscribed := make([]bool, len(ms))
		for _, m := range subs[t] {
			subscribed[m] = true
		}
		for part := int32(0); part < topics[t].Partitions; part++ {
			for !subscribed[next] {
				next = (next + 1) % len(ms)
			}
			p.add(next, t, part)
			next = (next + 1) % len(ms)
		}
	}
	return p.result(ms), nil
}
