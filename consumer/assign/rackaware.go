package assign

import "slices"

// RackAware returns the rack-aware assignor ("rack-aware"): each partition
// goes to one member, preferring members whose rack (subscription version 3,
// Member.Rack) is among the racks of the partition's replicas
// (Topic.Racks), so that consumers fetch from a replica in their own rack
// (KIP-392 follower fetching) and cross-rack traffic drops.
//
// Balance comes first: per-member partition counts stay within one where
// subscriptions allow (the same guarantee as without racks); within that,
// as many partitions as possible are placed rack-locally. When racks are
// unknown (no member rack or no replica racks) it is a plain balanced
// assignment, deterministic for the input.
func RackAware() Assignor { return rackAware{simple{RackAwareName}} }

type rackAware struct{ simple }

func (a rackAware) Assign(members []Member, topics map[string]Topic) (map[string]Assignment, error) {
	ms, names, subs, err := subscribers(a.name, members, topics)
	if err != nil {
		return nil, err
	}
	e := newEngine(ms, names, subs, topics, 1)
	e.rank = func(u *unit, m int) int {
		rack := ms[m].Rack
		racks := topics[u.topic].Racks
		if rack == "" || int(u.part) >= len(racks) || !slices.Contains(racks[u.part], rack) {
			return -1
		}
		return 0
	}
	e.run()
	return e.plan().result(ms), nil
}
