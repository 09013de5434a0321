package sticky

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type tp struct {
	topic string
	part  int32
}

// group is one randomized test input.
type group struct {
	members []assign.Member
	topics  map[string]assign.Topic
}

type genOpts struct {
	maxMembers, maxTopics, maxParts int
	mixed                           bool // members subscribe to different topics
	history                         bool // members claim previous ownership
	conflicts                       bool // stale and tied claims, malformed user data
}

// genGroup builds a random group. History is written the way real clients
// write it: owned partitions with a generation (subscription v2), or only
// sticky user data (v0 subscriptions, eager members).
func genGroup(rng *rand.Rand, o genOpts) group {
	nt := 1 + rng.Intn(o.maxTopics)
	topics := make(map[string]assign.Topic, nt)
	var names []string
	for i := 0; i < nt; i++ {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		topics[name] = assign.Topic{Name: name, Partitions: int32(rng.Intn(o.maxParts + 1))}
	}
	nm := 1 + rng.Intn(o.maxMembers)
	g := group{topics: topics}
	for i := 0; i < nm; i++ {
		m := assign.Member{ID: fmt.Sprintf("m%02d", i), Generation: -1}
		if o.mixed && rng.Intn(3) > 0 {
			for _, n := range names {
				if rng.Intn(2) == 0 {
					m.Topics = append(m.Topics, n)
				}
			}
			if rng.Intn(8) == 0 {
				m.Topics = append(m.Topics, "missing-topic")
			}
		} else {
			m.Topics = slices.Clone(names)
		}
		g.members = append(g.members, m)
	}
	if !o.history {
		return g
	}
	const gen = 7
	owned := make([]map[string][]int32, nm)
	gens := make([]int32, nm)
	for i := range owned {
		owned[i] = map[string][]int32{}
		gens[i] = gen
		if o.conflicts && rng.Intn(5) == 0 {
			gens[i] = gen - 1 - int32(rng.Intn(2)) // stale member
		}
	}
	for _, n := range names {
		for p := int32(0); p < topics[n].Partitions; p++ {
			if rng.Intn(4) == 0 {
				continue // nobody owned it
			}
			w := rng.Intn(nm + 1) // nm: a member that left
			if w < nm {
				owned[w][n] = append(owned[w][n], p)
			}
			if o.conflicts && rng.Intn(6) == 0 {
				v := rng.Intn(nm)
				owned[v][n] = append(owned[v][n], p) // second claim
			}
		}
	}
	for i := range g.members {
		m := &g.members[i]
		var list []assign.TopicPartitions
		for _, n := range names {
			if ps := owned[i][n]; len(ps) > 0 {
				list = append(list, assign.TopicPartitions{Topic: n, Partitions: ps})
			}
		}
		if o.conflicts && rng.Intn(10) == 0 {
			list = append(list, assign.TopicPartitions{Topic: names[0], Partitions: []int32{-1, 1 << 20}})
		}
		switch r := rng.Intn(4); {
		case o.conflicts && r == 0 && rng.Intn(3) == 0:
			m.UserData = []byte{0, 0, 0, 9, 1} // malformed
		case r == 0:
			m.UserData = encodeUserData(list, gens[i]) // v0 subscription
		default:
			m.Owned, m.Generation = list, gens[i]
			m.UserData = encodeUserData(list, gens[i])
		}
	}
	return g
}

// refClaims is the test's own reading of who owned what: the claims of
// each member and the resolved previous owner of each partition (highest
// generation wins, a tie at the highest generation cancels).
func refClaims(members []assign.Member) (claimsOf map[string]map[tp]int32, prev map[tp]string) {
	claimsOf = map[string]map[tp]int32{}
	type best struct {
		gen int32
		ids []string
	}
	top := map[tp]*best{}
	for _, m := range members {
		list, gen := m.Owned, m.Generation
		if len(list) == 0 {
			var meta kmsg.StickyMemberMetadata
			if err := meta.ReadFrom(m.UserData); err != nil || len(m.UserData) == 0 {
				continue
			}
			list = nil
			for _, a := range meta.CurrentAssignment {
				list = append(list, assign.TopicPartitions{Topic: a.Topic, Partitions: a.Partitions})
			}
			gen = meta.Generation
		}
		c := map[tp]int32{}
		claimsOf[m.ID] = c
		for _, t := range list {
			for _, p := range t.Partitions {
				k := tp{t.Topic, p}
				c[k] = gen
				b := top[k]
				switch {
				case b == nil || gen > b.gen:
					top[k] = &best{gen, []string{m.ID}}
				case gen == b.gen && !slices.Contains(b.ids, m.ID):
					b.ids = append(b.ids, m.ID)
				}
			}
		}
	}
	prev = map[tp]string{}
	for k, b := range top {
		if len(b.ids) == 1 {
			prev[k] = b.ids[0]
		}
	}
	return claimsOf, prev
}

func subscribed(m assign.Member, topic string) bool { return slices.Contains(m.Topics, topic) }

// validate checks the plan is a partition of the subscribed partitions among
// subscribers (complete unless cooperative) and returns who got what.
func validate(t *testing.T, g group, out map[string]assign.Assignment, complete bool) map[tp]string {
	t.Helper()
	if len(out) != len(g.members) {
		t.Fatalf("plan has %d members, group %d", len(out), len(g.members))
	}
	byID := map[string]assign.Member{}
	for _, m := range g.members {
		byID[m.ID] = m
		if _, ok := out[m.ID]; !ok {
			t.Fatalf("member %s missing from plan", m.ID)
		}
	}
	got := map[tp]string{}
	for id, a := range out {
		for _, tps := range a.Partitions {
			if !subscribed(byID[id], tps.Topic) {
				t.Fatalf("%s got %s which it does not subscribe to", id, tps.Topic)
			}
			for _, p := range tps.Partitions {
				if p < 0 || p >= g.topics[tps.Topic].Partitions {
					t.Fatalf("%s got nonexistent %s/%d", id, tps.Topic, p)
				}
				k := tp{tps.Topic, p}
				if o, dup := got[k]; dup {
					t.Fatalf("%s/%d assigned to both %s and %s", k.topic, k.part, o, id)
				}
				got[k] = id
			}
		}
	}
	if complete {
		for name, top := range g.topics {
			anySub := false
			for _, m := range g.members {
				anySub = anySub || subscribed(m, name)
			}
			for p := int32(0); p < top.Partitions; p++ {
				if _, ok := got[tp{name, p}]; anySub && !ok {
					t.Fatalf("%s/%d unassigned", name, p)
				}
			}
		}
	}
	return got
}

func loadsOf(g group, got map[tp]string) []int {
	idx := map[string]int{}
	for i, m := range g.members {
		idx[m.ID] = i
	}
	loads := make([]int, len(g.members))
	for _, id := range got {
		loads[idx[id]]++
	}
	return loads
}

// kept counts partitions that stay with their previous owner.
func kept(prev, got map[tp]string) int {
	n := 0
	for k, id := range got {
		if prev[k] == id {
			n++
		}
	}
	return n
}

func sortedDesc(v []int) []int {
	v = slices.Clone(v)
	sort.Sort(sort.Reverse(sort.IntSlice(v)))
	return v
}

func sumSquares(v []int) int {
	s := 0
	for _, x := range v {
		s += x * x
	}
	return s
}

// instance is the group reduced to what optimality is about: each
// partition's eligible members and its previous owner (-1 if none or no
// longer eligible).
type instance struct {
	eligible [][]int
	owner    []int
	keys     []tp
	nm       int
}

func toInstance(g group) instance {
	_, prev := refClaims(g.members)
	in := instance{nm: len(g.members)}
	var names []string
	for n := range g.topics {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for p := int32(0); p < g.topics[n].Partitions; p++ {
			var el []int
			owner := -1
			for i, m := range g.members {
				if subscribed(m, n) {
					el = append(el, i)
					if prev[tp{n, p}] == m.ID {
						owner = i
					}
				}
			}
			if len(el) == 0 {
				continue
			}
			in.eligible = append(in.eligible, el)
			in.owner = append(in.owner, owner)
			in.keys = append(in.keys, tp{n, p})
		}
	}
	return in
}

// bruteForce tries every assignment: the lexicographically smallest sorted
// load vector, then the most partitions kept at it.
func bruteForce(in instance) (bestLoads []int, bestKept int) {
	loads := make([]int, in.nm)
	var rec func(i, k int)
	rec = func(i, k int) {
		if i == len(in.eligible) {
			v := sortedDesc(loads)
			c := -1
			if bestLoads != nil {
				c = slices.Compare(v, bestLoads)
			}
			if c < 0 || c == 0 && k > bestKept {
				bestLoads, bestKept = v, k
			}
			return
		}
		for _, m := range in.eligible[i] {
			loads[m]++
			kk := k
			if in.owner[i] == m {
				kk++
			}
			rec(i+1, kk)
			loads[m]--
		}
	}
	rec(0, 0)
	return bestLoads, bestKept
}

// minCostFlow is an independent exact reference: successive shortest paths
// on the per-partition graph source -> partition -> member -> sink, where
// the k-th partition of a member costs B*(2k-1) (so the sum of squared
// loads is minimised first) and keeping a partition with its previous owner
// costs -1. It returns the optimal sum of squares and partitions kept.
func minCostFlow(in instance) (squares, keptN int) {
	np, nm := len(in.eligible), in.nm
	big := 2*np + 2
	// nodes: 0 source, 1..np partitions, np+1..np+nm members, np+nm+1 sink
	type arc struct{ to, cap, cost, rev int }
	nodes := np + nm + 2
	adj := make([][]arc, nodes)
	add := func(u, v, c, cost int) {
		adj[u] = append(adj[u], arc{v, c, cost, len(adj[v])})
		adj[v] = append(adj[v], arc{u, 0, -cost, len(adj[u]) - 1})
	}
	sink := nodes - 1
	for i := range in.eligible {
		add(0, 1+i, 1, 0)
		for _, m := range in.eligible[i] {
			cost := 0
			if in.owner[i] == m {
				cost = -1
			}
			add(1+i, 1+np+m, 1, cost)
		}
	}
	for m := 0; m < nm; m++ {
		for k := 1; k <= np; k++ {
			add(1+np+m, sink, 1, big*(2*k-1))
		}
	}
	total := 0
	for f := 0; f < np; f++ {
		const inf = math.MaxInt32 // no path is longer; fits a 32-bit int
		dist := make([]int, nodes)
		pv := make([]int, nodes)
		pa := make([]int, nodes)
		for i := range dist {
			dist[i] = inf
		}
		dist[0] = 0
		for it := 0; it < nodes; it++ {
			changed := false
			for u := 0; u < nodes; u++ {
				if dist[u] == inf {
					continue
				}
				for j, a := range adj[u] {
					if a.cap > 0 && dist[u]+a.cost < dist[a.to] {
						dist[a.to] = dist[u] + a.cost
						pv[a.to], pa[a.to] = u, j
						changed = true
					}
				}
			}
			if !changed {
				break
			}
		}
		for v := sink; v != 0; v = pv[v] {
			a := &adj[pv[v]][pa[v]]
			a.cap--
			adj[v][a.rev].cap++
		}
		total += dist[sink]
	}
	// total = big*squares - kept, with 0 <= kept <= np < big
	squares = (total + big - 1) / big
	keptN = big*squares - total
	return squares, keptN
}
