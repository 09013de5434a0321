package serverassign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

const seeds = 300

// TestUniformHomogeneousProperties: balanced within one, every partition
// once, deterministic; after one member joins or leaves, exactly the
// minimum number of partitions changes owner.
func TestUniformHomogeneousProperties(t *testing.T) {
	for seed := uint64(0); seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		g := randomGroup(r, 4, 30, 8, true, seed%2 == 0)
		p := run(t, Uniform(), g, nil)
		checkSpread(t, g, p)

		// One member joins.
		join := g
		join.members = append(slices.Clone(g.members), Member{ID: "m99", Topics: g.members[0].Topics})
		next := run(t, Uniform(), join, p)
		checkSpread(t, join, next)
		if got, want := moved(p, next), minMovedHomogeneous(join, p); got != want {
			t.Fatalf("seed %d join: moved %d, minimum %d", seed, got, want)
		}

		// One member leaves (when there is one to spare).
		if len(g.members) < 2 {
			continue
		}
		leave := g
		k := r.IntN(len(g.members))
		leave.members = slices.Delete(slices.Clone(g.members), k, k+1)
		next = run(t, Uniform(), leave, p)
		checkSpread(t, leave, next)
		if got, want := moved(p, next), minMovedHomogeneous(leave, p); got != want {
			t.Fatalf("seed %d leave: moved %d, minimum %d", seed, got, want)
		}
	}
}

// checkSpread asserts member counts differ by at most one (homogeneous).
func checkSpread(t *testing.T, g group, p Plan) {
	t.Helper()
	var counts []int
	for _, m := range g.members {
		counts = append(counts, count(p, m.ID))
	}
	if slices.Max(counts)-slices.Min(counts) > 1 {
		t.Fatalf("counts %v differ by more than one", counts)
	}
}

// TestUniformHeterogeneousOptimal compares uniform with an exhaustive
// search on tiny groups with arbitrary subscriptions and a random previous
// target: its plan must have the smallest sum of squared member counts
// (the most even balance) and, among those, the most partitions kept with
// their previous owner.
func TestUniformHeterogeneousOptimal(t *testing.T) {
	checked := 0
	defer func() {
		if checked < seeds/2 {
			t.Errorf("only %d of %d seeds small enough to search", checked, seeds)
		}
	}()
	for seed := uint64(0); seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 2))
		g := randomGroup(r, 3, 3, 3, false, false)
		var parts []tp
		for _, name := range sortedTopics(g) {
			for x := int32(0); x < g.topics[name].Partitions; x++ {
				parts = append(parts, tp{name, x})
			}
		}
		if len(parts) > 7 {
			continue // keep the search small
		}
		checked++
		prev := randomPrev(r, g, parts)
		p := run(t, Uniform(), g, prev)
		gotSq, gotKept := score(g, p, prev)
		bestSq, bestKept := exhaustive(g, parts, prev)
		if gotSq != bestSq || gotKept != bestKept {
			t.Fatalf("seed %d: uniform has squares %d kept %d; best is %d, %d\ngroup %+v\nprev %v\nplan %v",
				seed, gotSq, gotKept, bestSq, bestKept, g.members, prev, p)
		}
	}
}

func sortedTopics(g group) []string {
	var names []string
	for n := range g.topics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// randomPrev gives each partition a random previous owner among the
// members, a departed member, or none; some to a member that no longer
// subscribes to its topic, and some partitions that no longer exist.
func randomPrev(r *rand.Rand, g group, parts []tp) Plan {
	prev := Plan{}
	add := func(id string, x tp) {
		if prev[id] == nil {
			prev[id] = map[string][]int32{}
		}
		prev[id][x.topic] = append(prev[id][x.topic], x.part)
	}
	for _, x := range parts {
		switch k := r.IntN(len(g.members) + 2); {
		case k < len(g.members):
			add(g.members[k].ID, x)
		case k == len(g.members):
			add("gone", x)
		}
	}
	add(g.members[0].ID, tp{"t0", 1000})
	add(g.members[0].ID, tp{"deleted", 0})
	return prev
}

// score is the balance (sum of squared counts) and the kept partitions.
func score(g group, p, prev Plan) (int, int) {
	sq := 0
	for _, m := range g.members {
		c := count(p, m.ID)
		sq += c * c
	}
	return sq, len(owner(p)) - moved(prev, p)
}

// exhaustive tries every assignment of parts to subscribers.
func exhaustive(g group, parts []tp, prev Plan) (bestSq, bestKept int) {
	before := owners(prev)
	subs := make([][]int, len(parts))
	for i, x := range parts {
		for mi, m := range g.members {
			if slices.Contains(m.Topics, x.topic) {
				subs[i] = append(subs[i], mi)
			}
		}
	}
	load := make([]int, len(g.members))
	bestSq = -1
	var rec func(i, kept int)
	rec = func(i, kept int) {
		if i == len(parts) {
			sq := 0
			for _, l := range load {
				sq += l * l
			}
			if bestSq < 0 || sq < bestSq || sq == bestSq && kept > bestKept {
				bestSq, bestKept = sq, kept
			}
			return
		}
		if len(subs[i]) == 0 {
			rec(i+1, kept)
			return
		}
		for _, mi := range subs[i] {
			k := 0
			if b := before[parts[i]]; len(b) == 1 && b[0] == g.members[mi].ID {
				k = 1
			}
			load[mi]++
			rec(i+1, kept+k)
			load[mi]--
		}
	}
	rec(0, 0)
	return bestSq, bestKept
}

// TestUniformRacksNeverCostBalanceOrMovement: with racks, every member gets
// the same count and the same number of partitions is kept as without
// them, and at least as many partitions are rack-local.
func TestUniformRacksNeverCostBalanceOrMovement(t *testing.T) {
	for seed := uint64(0); seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		g := randomGroup(r, 4, 20, 6, seed%3 == 0, true)
		var parts []tp
		for _, name := range sortedTopics(g) {
			for x := int32(0); x < g.topics[name].Partitions; x++ {
				parts = append(parts, tp{name, x})
			}
		}
		prev := randomPrev(r, g, parts)
		withRacks := run(t, Uniform(), g, prev)
		blind := g
		blind.members = slices.Clone(g.members)
		for i := range blind.members {
			blind.members[i].Rack = ""
		}
		without := run(t, Uniform(), blind, prev)
		for _, m := range g.members {
			if a, b := count(withRacks, m.ID), count(without, m.ID); a != b {
				t.Fatalf("seed %d: %s has %d with racks, %d without", seed, m.ID, a, b)
			}
		}
		if a, b := moved(prev, withRacks), moved(prev, without); a != b {
			t.Fatalf("seed %d: moved %d with racks, %d without", seed, a, b)
		}
		if a, b := local(g, withRacks), local(g, without); a < b {
			t.Fatalf("seed %d: %d rack-local with racks, %d without", seed, a, b)
		}
	}
}

// local counts the partitions placed on a member in one of their racks.
func local(g group, p Plan) int {
	n := 0
	for _, m := range g.members {
		for name, parts := range p[m.ID] {
			for _, x := range parts {
				if rs := g.topics[name].Racks; int(x) < len(rs) && slices.Contains(rs[x], m.Rack) {
					n++
				}
			}
		}
	}
	return n
}

// TestRangeProperties: the plan matches the formula for every topic
// (sorted subscribers, contiguous ranges, the first P mod n one larger)
// and equal-size topics with equal subscribers are co-partitioned.
func TestRangeProperties(t *testing.T) {
	for seed := uint64(0); seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 4))
		g := randomGroup(r, 5, 12, 7, seed%2 == 0, false)
		p := run(t, Range(), g, nil)
		order := slices.Clone(g.members)
		slices.SortFunc(order, func(a, b Member) int { return kafkaOrder(&a, &b) })
		subsOf := map[string]string{}
		for _, name := range sortedTopics(g) {
			P := int(g.topics[name].Partitions)
			var subs []string
			for _, m := range order {
				if slices.Contains(m.Topics, name) {
					subs = append(subs, m.ID)
				}
			}
			subsOf[name] = fmt.Sprint(P, subs)
			next := int32(0)
			for k, id := range subs {
				size := P / len(subs)
				if k < P%len(subs) {
					size++
				}
				var want []int32
				for i := 0; i < size; i++ {
					want = append(want, next)
					next++
				}
				if got := p[id][name]; !slices.Equal(got, want) {
					t.Fatalf("seed %d: %s/%s got %v want %v", seed, id, name, got, want)
				}
			}
		}
		for a := range g.topics {
			for b := range g.topics {
				if a != b && subsOf[a] == subsOf[b] {
					for _, m := range g.members {
						if !slices.Equal(p[m.ID][a], p[m.ID][b]) {
							t.Fatalf("seed %d: %s not co-partitioned on %s and %s", seed, m.ID, a, b)
						}
					}
				}
			}
		}
	}
}
