package sticky

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// TestMaxLocalIsMaximum compares maxLocal's flow value with a unit-level
// bipartite matching (Kuhn's augmenting paths, one node per partition and
// per unit of rack capacity), and checks the flow respects every bound.
func TestMaxLocalIsMaximum(t *testing.T) {
	for seed := uint64(0); seed < 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		nr := 1 + r.IntN(4)
		var mask []uint64
		var count []int
		for g := 0; g < 1+r.IntN(6); g++ {
			mask = append(mask, 1+r.Uint64N(1<<nr-1))
			count = append(count, r.IntN(5))
		}
		capacity := make([]int, nr)
		for i := range capacity {
			capacity[i] = r.IntN(6)
		}
		flow := maxLocal(mask, count, capacity)
		value := 0
		used := make([]int, nr)
		for g := range mask {
			sent := 0
			for rk := 0; rk < nr; rk++ {
				f := flow[g*nr+rk]
				if f < 0 || f > 0 && mask[g]&(1<<rk) == 0 {
					t.Fatalf("seed %d: bad flow %d from group %d to rack %d", seed, f, g, rk)
				}
				sent += f
				used[rk] += f
			}
			if sent > count[g] {
				t.Fatalf("seed %d: group %d sends %d of %d", seed, g, sent, count[g])
			}
			value += sent
		}
		for rk := range used {
			if used[rk] > capacity[rk] {
				t.Fatalf("seed %d: rack %d takes %d of %d", seed, rk, used[rk], capacity[rk])
			}
		}
		if want := unitMatching(mask, count, capacity); value != want {
			t.Fatalf("seed %d: flow %d, maximum matching %d", seed, value, want)
		}
	}
}

func unitMatching(mask []uint64, count, capacity []int) int {
	var left []uint64 // one per partition: its mask
	for g := range mask {
		for i := 0; i < count[g]; i++ {
			left = append(left, mask[g])
		}
	}
	var slotRack []int // one per unit of capacity
	for rk, c := range capacity {
		for i := 0; i < c; i++ {
			slotRack = append(slotRack, rk)
		}
	}
	match := make([]int, len(slotRack))
	for i := range match {
		match[i] = -1
	}
	var try func(u int, seen []bool) bool
	try = func(u int, seen []bool) bool {
		for s, rk := range slotRack {
			if left[u]&(1<<rk) == 0 || seen[s] {
				continue
			}
			seen[s] = true
			if match[s] < 0 || try(match[s], seen) {
				match[s] = u
				return true
			}
		}
		return false
	}
	n := 0
	for u := range left {
		if try(u, make([]bool, len(slotRack))) {
			n++
		}
	}
	return n
}

// TestAssignRacksSameCountsAndMovement: AssignRacks gives every member the
// count New().Assign gives it and keeps as many previously owned
// partitions, with at least as many rack-local placements.
func TestAssignRacksSameCountsAndMovement(t *testing.T) {
	racks := []string{"r0", "r1", "r2"}
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 8))
		topics := map[string]assign.Topic{}
		var names []string
		for i := 0; i < 1+r.IntN(4); i++ {
			n := fmt.Sprintf("t%d", i)
			names = append(names, n)
			tp := assign.Topic{Name: n, Partitions: int32(r.IntN(15))}
			for p := int32(0); p < tp.Partitions; p++ {
				tp.Racks = append(tp.Racks, []string{racks[r.IntN(3)]})
			}
			topics[n] = tp
		}
		var members []assign.Member
		for i := 0; i < 1+r.IntN(6); i++ {
			m := assign.Member{ID: fmt.Sprintf("m%d", i), Rack: racks[r.IntN(3)], Generation: 1}
			for _, n := range names {
				if r.IntN(3) > 0 {
					m.Topics = append(m.Topics, n)
				}
			}
			members = append(members, m)
		}
		// Each partition has at most one previous owner (tied claims
		// would cancel, and "kept" below could not tell).
		for _, n := range names {
			for p := int32(0); p < topics[n].Partitions; p++ {
				if k := r.IntN(len(members) + 1); k < len(members) {
					m := &members[k]
					if i := len(m.Owned) - 1; i >= 0 && m.Owned[i].Topic == n {
						m.Owned[i].Partitions = append(m.Owned[i].Partitions, p)
					} else {
						m.Owned = append(m.Owned, assign.TopicPartitions{Topic: n, Partitions: []int32{p}})
					}
				}
			}
		}
		blind, err := New().Assign(members, topics)
		if err != nil {
			t.Fatal(err)
		}
		aware, err := AssignRacks(members, topics)
		if err != nil {
			t.Fatal(err)
		}
		stats := func(out map[string]assign.Assignment) (counts []int, kept, local int) {
			for _, m := range members {
				n := 0
				for _, tp := range out[m.ID].Partitions {
					for _, p := range tp.Partitions {
						n++
						if slices.Contains(topics[tp.Topic].Racks[p], m.Rack) {
							local++
						}
						for _, o := range m.Owned {
							if o.Topic == tp.Topic && slices.Contains(o.Partitions, p) {
								kept++
							}
						}
					}
				}
				counts = append(counts, n)
			}
			return
		}
		bc, bk, bl := stats(blind)
		ac, ak, al := stats(aware)
		if !slices.Equal(bc, ac) || bk != ak || al < bl {
			t.Fatalf("seed %d: blind counts %v kept %d local %d; rack-aware %v %d %d", seed, bc, bk, bl, ac, ak, al)
		}
	}
}
