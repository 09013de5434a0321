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
