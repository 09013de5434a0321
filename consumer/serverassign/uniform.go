package serverassign

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
)

// Uniform returns the "uniform" assignor.
//
// Balance comes first: the sorted list of per-member partition counts is
// the most even one the subscriptions allow, which means counts differing by
// at most one when everyone subscribes to the same topics, and for members
// with identical subscriptions in any group. Among the plans with that
// balance, it keeps the largest number of partitions with their owner in
// prev, so a member joining or leaving moves exactly as many partitions as
// the new balance needs and no more. Both goals are met exactly, by the
// min-cost-flow solver of consumer/assign/sticky (the same one the classic
// "sticky" and "cooperative-sticky" assignors use), fed with prev as every
// member's previous ownership at a single generation. A partition that prev
// gives to two members has no previous owner; partitions, topics or members
// of prev that no longer exist, and partitions of topics their previous
// owner no longer subscribes to, are ignored.
//
// Racks, third: when some member has a rack and some topic lists replica
// racks, then among the plans with the same per-member counts and the same
// movement it prefers those placing partitions on members whose rack holds
// a replica (see sticky.AssignRacks for what is and is not optimised).
// Racks never cost balance or stickiness.
func Uniform() Assignor { return uniform{} }

type uniform struct{}

func (uniform) Name() string { return UniformName }

func (uniform) Assign(members []Member, topics map[string]Topic, prev Plan) (Plan, error) {
	if err := checkMembers(UniformName, members); err != nil {
		return nil, err
	}
	in := make([]assign.Member, len(members))
	racks := false
	for i, m := range members {
		var owned []assign.TopicPartitions
		if held := prev[m.ID]; len(held) > 0 {
			owned = make([]assign.TopicPartitions, 0, len(held))
			for t, parts := range held {
				owned = append(owned, assign.TopicPartitions{Topic: t, Partitions: parts})
			}
		}
		// One generation for all: prev is a single consistent target.
		in[i] = assign.Member{ID: m.ID, InstanceID: m.InstanceID, Rack: m.Rack, Topics: m.Topics, Owned: owned, Generation: 1}
		racks = racks || m.Rack != ""
	}
	md := make(map[string]assign.Topic, len(topics))
	for name, t := range topics {
		md[name] = assign.Topic{Name: name, Partitions: t.Partitions, Racks: t.Racks}
	}
	var out map[string]assign.Assignment
	var err error
	if racks {
		out, err = sticky.AssignRacks(in, md)
	} else {
		out, err = sticky.New().Assign(in, md)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", UniformName, err)
	}
	plan := make(Plan, len(members))
	for _, m := range members {
		tps := out[m.ID].Partitions
		byTopic := make(map[string][]int32, len(tps))
		for _, tp := range tps {
			byTopic[tp.Topic] = tp.Partitions
		}
		plan[m.ID] = byTopic
	}
	return plan, nil
}

// checkMembers rejects input no coordinator produces: an empty member id or
// one member id twice.
func checkMembers(name string, members []Member) error {
	sorted := slices.IsSortedFunc(members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	var seen map[string]bool
	if !sorted {
		seen = make(map[string]bool, len(members))
	}
	for i, m := range members {
		if m.ID == "" {
			return fmt.Errorf("%s: member %d has an empty member id", name, i)
		}
		dup := sorted && i > 0 && members[i-1].ID == m.ID
		if !sorted {
			dup = seen[m.ID]
			seen[m.ID] = true
		}
		if dup {
			return fmt.Errorf("%s: member id %q appears twice", name, m.ID)
		}
	}
	return nil
}
