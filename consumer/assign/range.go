package assign

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
// It matches Kafka's RangeAssignor when no rack information is in play
// (Kafka 3.5+ switches to a rack-aware variant when both consumers and
// brokers report racks; use RackAware for that).
func Range() Assignor { return rangeAssignor{simple{RangeName}} }

type rangeAssignor struct{ simple }

func (a rangeAssignor) Assign(members []Member, topics map[string]Topic) (map[string]Assignment, error) {
	ms, names, subs, err := subscribers(a.name, members, topics)
	if err != nil {
		return nil, err
	}
	p := newPlan(len(ms))
	for _, t := range names {
		rangeTopic(p, t, topics[t].Partitions, subs[t])
	}
	return p.result(ms), nil
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
