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
		if err := checkRangeFormula(g, p); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// checkRangeFormula checks a range plan against the formula for every
// topic (subscribers in Kafka's member order, contiguous ranges, the first
// P mod n one larger) and that equal-size topics with equal subscribers are
// co-partitioned.
func checkRangeFormula(g group, p Plan) error {
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
				return fmt.Errorf("%s/%s got %v want %v", id, name, got, want)
			}
		}
	}
	for a := range g.topics {
		for b := range g.topics {
			if a != b && subsOf[a] == subsOf[b] {
				for _, m := range g.members {
					if !slices.Equal(p[m.ID][a], p[m.ID][b]) {
						return fmt.Errorf("%s not co-partitioned on %s and %s", m.ID, a, b)
					}
				}
			}
		}
	}
	return nil
}

// TestUniformHeterogeneousCertificate checks uniform on larger groups than
// an exhaustive search can handle: up to 40 members each subscribed to a
// few of up to 12 topics, with no previous target (a cold start) or a
// random one. Optimality is checked on the plan itself, partition by
// partition, with the conditions that characterise the optimum of this
// convex min-cost flow (see certify).
func TestUniformHeterogeneousCertificate(t *testing.T) {
	n := uint64(seeds)
	if testing.Short() {
		n /= 5
	}
	for seed := uint64(0); seed < n; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		g := group{topics: map[string]Topic{}}
		nt := 1 + r.IntN(12)
		var parts []tp
		for i := 0; i < nt; i++ {
			name := fmt.Sprintf("t%02d", i)
			g.topics[name] = Topic{Name: name, Partitions: int32(r.IntN(31))}
			for x := int32(0); x < g.topics[name].Partitions; x++ {
				parts = append(parts, tp{name, x})
			}
		}
		for i := 0; i < 1+r.IntN(40); i++ {
			m := Member{ID: fmt.Sprintf("m%02d", i)}
			k := 1 + r.IntN(min(nt, 4))
			for _, ti := range r.Perm(nt)[:k] {
				m.Topics = append(m.Topics, fmt.Sprintf("t%02d", ti))
			}
			slices.Sort(m.Topics)
			g.members = append(g.members, m)
		}
		var prev Plan
		if seed%2 == 1 {
			prev = randomPrev(r, g, parts)
		}
		p := run(t, Uniform(), g, prev)
		if err := certify(g, p, prev); err != nil {
			t.Fatalf("seed %d: %v\ngroup %+v\nprev %v\nplan %v", seed, err, g.members, prev, p)
		}
	}
}

// certify checks that no change of plan p improves it: in the graph where
// a member leads to each partition it holds and a partition to each other
// subscriber of its topic (moving units along a path from member a to
// member b takes one partition from a and gives one to b), there is
//
//  1. no path from a member to one whose count is two or more lower (the
//     balance could improve),
//  2. no cycle, and no path from a member to one whose count is one lower,
//     with a negative cost, where giving up a partition of prev costs 1
//     and taking back one's own partition of prev costs -1 (more
//     partitions could stay with their previous owner at the same balance).
//
// These are the optimality conditions of the min-cost flow whose balance
// costs dominate; the test computes them on partitions, independently of
// the solver's per-class counts.
func certify(g group, p, prev Plan) error {
	before := owners(prev)
	idx := map[string]int{}
	for i, m := range g.members {
		idx[m.ID] = i
	}
	nm := len(g.members)
	type arc struct{ to, cost int }
	var adj [][]arc
	load := make([]int, nm)
	adj = make([][]arc, nm)
	for k, id := range owner(p) {
		holder := idx[id]
		load[holder]++
		prevOwner := -1
		if b := before[k]; len(b) == 1 {
			if i, ok := idx[b[0]]; ok {
				prevOwner = i
			}
		}
		v := len(adj)
		c := 0
		if prevOwner == holder {
			c = 1
		}
		adj[holder] = append(adj[holder], arc{v, c})
		var out []arc
		for i, m := range g.members {
			if i != holder && slices.Contains(m.Topics, k.topic) {
				c := 0
				if prevOwner == i {
					c = -1
				}
				out = append(out, arc{i, c})
			}
		}
		adj = append(adj, out)
	}
	// Bellman-Ford from every member at once finds negative cycles.
	dist := make([]int, len(adj))
	for it := 0; ; it++ {
		changed := false
		for v := range adj {
			for _, a := range adj[v] {
				if dist[v]+a.cost < dist[a.to] {
					dist[a.to] = dist[v] + a.cost
					changed = true
				}
			}
		}
		if !changed {
			break
		}
		if it > len(adj) {
			return fmt.Errorf("negative cycle: more partitions could be kept")
		}
	}
	const inf = 1 << 30
	for a := 0; a < nm; a++ {
		for i := range dist {
			dist[i] = inf
		}
		dist[a] = 0
		q := []int{a}
		in := make([]bool, len(adj))
		for len(q) > 0 {
			v := q[0]
			q = q[1:]
			in[v] = false
			for _, e := range adj[v] {
				if d := dist[v] + e.cost; d < dist[e.to] {
					dist[e.to] = d
					if !in[e.to] {
						in[e.to] = true
						q = append(q, e.to)
					}
				}
			}
		}
		for b := 0; b < nm; b++ {
			switch {
			case dist[b] == inf || b == a:
			case load[a] >= load[b]+2:
				return fmt.Errorf("%s (%d partitions) can pass one to %s (%d)", g.members[a].ID, load[a], g.members[b].ID, load[b])
			case load[a] == load[b]+1 && dist[b] < 0:
				return fmt.Errorf("%s (%d) and %s (%d) can trade to keep %d more", g.members[a].ID, load[a], g.members[b].ID, load[b], -dist[b])
			}
		}
	}
	return nil
}
