package assign_test

import (
	"fmt"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// benchGroup: members spread over 3 racks, all subscribed to 10 topics of
// parts partitions whose replicas sit in one rack each.
func benchGroup(members, parts int) ([]assign.Member, map[string]assign.Topic) {
	racks := []string{"r0", "r1", "r2"}
	topics := map[string]assign.Topic{}
	var names []string
	for i := 0; i < 10; i++ {
		n := fmt.Sprintf("topic-%d", i)
		names = append(names, n)
		tp := assign.Topic{Name: n, Partitions: int32(parts)}
		for p := 0; p < parts; p++ {
			tp.Racks = append(tp.Racks, []string{racks[(p+i)%3]})
		}
		topics[n] = tp
	}
	var ms []assign.Member
	for i := 0; i < members; i++ {
		ms = append(ms, assign.Member{ID: fmt.Sprintf("member-%04d", i), Topics: names, Rack: racks[i%3], Generation: -1})
	}
	return ms, topics
}

// Run bounded, e.g. go test -run '^$' -bench Assignors -benchtime 5x; the
// figures are meant as ratios against range measured in the same run.
func BenchmarkAssignors(b *testing.B) {
	for _, size := range []struct{ members, parts int }{{10, 10}, {50, 50}} {
		ms, topics := benchGroup(size.members, size.parts)
		for _, a := range []assign.Assignor{assign.Range(), assign.RoundRobin(), assign.RackAware(), assign.Redundant(2, quiet())} {
			b.Run(fmt.Sprintf("%s/members=%d/partitions=%d", a.Name(), size.members, 10*size.parts), func(b *testing.B) {
				for b.Loop() {
					if _, err := a.Assign(ms, topics); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// skewedRackGroup: one topic of parts partitions, every replica in rack r0;
// of members members only the first is in r0, the others in r1, so at most
// a member's share of the partitions can be rack-local.
func skewedRackGroup(members, parts int) ([]assign.Member, map[string]assign.Topic) {
	tp := assign.Topic{Name: "t", Partitions: int32(parts)}
	for range parts {
		tp.Racks = append(tp.Racks, []string{"r0"})
	}
	var ms []assign.Member
	for i := range members {
		r := "r1"
		if i == 0 {
			r = "r0"
		}
		ms = append(ms, assign.Member{ID: fmt.Sprintf("m%04d", i), Topics: []string{"t"}, Rack: r, Generation: -1})
	}
	return ms, map[string]assign.Topic{"t": tp}
}

// doubledGroup: members members over 3 racks on one topic of parts
// partitions, of which the first half owned every partition twice at
// generation 7 (member i partitions p with p ≡ i or p+1 ≡ i mod half): the
// group has just doubled in size, as redundant(2) sees it.
func doubledGroup(members, parts int) ([]assign.Member, map[string]assign.Topic) {
	racks := []string{"r0", "r1", "r2"}
	tp := assign.Topic{Name: "t", Partitions: int32(parts)}
	for p := range parts {
		tp.Racks = append(tp.Racks, []string{racks[(p*7)%3]})
	}
	half := members / 2
	var ms []assign.Member
	for i := range members {
		m := assign.Member{ID: fmt.Sprintf("m%04d", i), Topics: []string{"t"}, Rack: racks[(i*5)%3], Generation: 7}
		if i < half {
			var ps []int32
			for p := range parts {
				if p%half == i || (p+1)%half == i {
					ps = append(ps, int32(p))
				}
			}
			m.Owned = []assign.TopicPartitions{{Topic: "t", Partitions: ps}}
		}
		ms = append(ms, m)
	}
	return ms, map[string]assign.Topic{"t": tp}
}

// BenchmarkPreferenceEngine: the rack-aware and redundant assignors on the
// inputs where their shared engine (balance.go) used to scan every unit
// against every other: skewed racks, and a redundant group that doubled.
// Run bounded: go test -run '^$' -bench PreferenceEngine -benchtime 1x.
func BenchmarkPreferenceEngine(b *testing.B) {
	for _, c := range []struct {
		name     string
		a        assign.Assignor
		group    func(int, int) ([]assign.Member, map[string]assign.Topic)
		mem, par int
	}{
		{"rack-aware/skewed/members=10/partitions=4000", assign.RackAware(), skewedRackGroup, 10, 4000},
		{"rack-aware/skewed/members=10/partitions=16000", assign.RackAware(), skewedRackGroup, 10, 16000},
		{"redundant/doubled/members=60/partitions=6400", assign.Redundant(2, quiet()), doubledGroup, 60, 6400},
		{"rack-aware/skewed/members=100/partitions=100000", assign.RackAware(), skewedRackGroup, 100, 100000},
		{"redundant/doubled/members=100/partitions=100000", assign.Redundant(2, quiet()), doubledGroup, 100, 100000},
	} {
		ms, topics := c.group(c.mem, c.par)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.a.Assign(ms, topics); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// replicatedRackGroup: members over 3 racks, all subscribed to topicsN
// topics of parts partitions each, every partition with rf replicas in
// consecutive racks (rf 3: a replica in every rack, so every member is
// rack-local for every partition).
func replicatedRackGroup(members, topicsN, parts, rf int) ([]assign.Member, map[string]assign.Topic) {
	racks := []string{"r0", "r1", "r2"}
	topics := map[string]assign.Topic{}
	var names []string
	for i := range topicsN {
		n := fmt.Sprintf("topic-%03d", i)
		names = append(names, n)
		tp := assign.Topic{Name: n, Partitions: int32(parts)}
		for p := range parts {
			rs := make([]string, rf)
			for k := range rf {
				rs[k] = racks[(p+i+k)%3]
			}
			tp.Racks = append(tp.Racks, rs)
		}
		topics[n] = tp
	}
	var ms []assign.Member
	for i := range members {
		ms = append(ms, assign.Member{ID: fmt.Sprintf("member-%04d", i), Topics: names, Rack: racks[i%3], Generation: -1})
	}
	return ms, topics
}

// BenchmarkRackAwareAtScale: rack-aware over 1,000 members, where a unit's
// preferred members are a third of the group (one replica rack) or all of
// it (three). Run bounded: go test -run '^$' -bench RackAwareAtScale
// -benchtime 1x.
func BenchmarkRackAwareAtScale(b *testing.B) {
	for _, c := range []struct{ topics, parts, rf int }{{10, 10000, 1}, {10, 10000, 3}, {100, 10000, 1}, {100, 10000, 3}} {
		ms, topics := replicatedRackGroup(1000, c.topics, c.parts, c.rf)
		b.Run(fmt.Sprintf("members=1000/partitions=%d/replicas=%d", c.topics*c.parts, c.rf), func(b *testing.B) {
			for b.Loop() {
				if _, err := assign.RackAware().Assign(ms, topics); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRedundantAtScale: redundant(2) over 1,000 members, a fresh group
// (no claims: every owner comes from the filling phase) and one that just
// doubled (doubledGroup: half the members claim every partition twice).
// Run bounded: go test -run '^$' -bench RedundantAtScale -benchtime 1x.
func BenchmarkRedundantAtScale(b *testing.B) {
	for _, parts := range []int{100000, 1000000} {
		fresh, freshTopics := replicatedRackGroup(1000, 10, parts/10, 1)
		doubled, doubledTopics := doubledGroup(1000, parts)
		for _, c := range []struct {
			name   string
			ms     []assign.Member
			topics map[string]assign.Topic
		}{{"fresh", fresh, freshTopics}, {"doubled", doubled, doubledTopics}} {
			b.Run(fmt.Sprintf("%s/members=1000/partitions=%d", c.name, parts), func(b *testing.B) {
				for b.Loop() {
					if _, err := assign.Redundant(2, quiet()).Assign(c.ms, c.topics); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRangeRacks: range over 1,000 members in 3 racks, with each
// partition's replica in one rack (the rack-aware form of KIP-881) and the
// same group without replica racks (plain range), in the same run.
// Run bounded: go test -run '^$' -bench RangeRacks -benchtime 3x.
func BenchmarkRangeRacks(b *testing.B) {
	for _, c := range []struct{ topics, parts int }{{1, 100000}, {10, 10000}, {100, 10000}} {
		ms, racked := replicatedRackGroup(1000, c.topics, c.parts, 1)
		plain := map[string]assign.Topic{}
		for n, t := range racked {
			t.Racks = nil
			plain[n] = t
		}
		for _, v := range []struct {
			name   string
			topics map[string]assign.Topic
		}{{"racks", racked}, {"plain", plain}} {
			b.Run(fmt.Sprintf("%s/topics=%d/partitions=%d", v.name, c.topics, c.topics*c.parts), func(b *testing.B) {
				for b.Loop() {
					if _, err := assign.Range().Assign(ms, v.topics); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
