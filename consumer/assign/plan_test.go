package assign

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// TestPlanResult checks the plan's result against a map of topics per
// member sorted at the end (what it replaced), for additions in order (as
// range and roundrobin make them) and in random order.
func TestPlanResult(t *testing.T) {
	for seed := range 300 {
		rng := rand.New(rand.NewSource(int64(seed)))
		nm, nt := 1+rng.Intn(5), 1+rng.Intn(6)
		p := newPlan(nm)
		want := make([]map[string][]int32, nm)
		for i := range want {
			want[i] = map[string][]int32{}
		}
		ordered := seed%2 == 0
		for k := range 1 + rng.Intn(40) {
			m := rng.Intn(nm)
			topic := fmt.Sprintf("t%d", rng.Intn(nt))
			parts := []int32{int32(rng.Intn(50)), int32(rng.Intn(50))}
			if ordered {
				topic = fmt.Sprintf("t%02d", k/4)
				parts = []int32{int32(2 * k), int32(2*k + 1)}
			}
			p.add(m, topic, parts...)
			want[m][topic] = append(want[m][topic], parts...)
		}
		members := make([]Member, nm)
		for i := range members {
			members[i].ID = fmt.Sprintf("m%d", i)
		}
		got := p.result(members)
		for i, m := range members {
			var w []TopicPartitions
			for _, topic := range slices.Sorted(func(yield func(string) bool) {
				for k := range want[i] {
					if !yield(k) {
						return
					}
				}
			}) {
				ps := slices.Clone(want[i][topic])
				slices.Sort(ps)
				w = append(w, TopicPartitions{Topic: topic, Partitions: ps})
			}
			if !reflect.DeepEqual(got[m.ID].Partitions, w) {
				t.Fatalf("seed %d member %d: %v, want %v", seed, i, got[m.ID].Partitions, w)
			}
		}
	}
}
