package serverassign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// benchInput is a homogeneous group of ntopics x nparts partitions and
// nmembers members; for "join" and "leave", prev is the from-scratch plan
// of the group before one member joined (nmembers-1 members) or before one
// left (nmembers+1 members).
type benchInput struct {
	g    group
	prev Plan
}

var (
	benchMu    sync.Mutex
	benchCache = map[string]benchInput{}
)

func benchGroup(b *testing.B, shape string, ntopics, nparts, nmembers int) benchInput {
	return benchGroupRacks(b, shape, ntopics, nparts, nmembers, false)
}

// benchGroupRacks is benchGroup; with racks, members are spread over three
// racks and every partition has replicas in two of them.
func benchGroupRacks(b *testing.B, shape string, ntopics, nparts, nmembers int, racks bool) benchInput {
	benchMu.Lock()
	defer benchMu.Unlock()
	key := fmt.Sprint(shape, ntopics, nparts, nmembers, racks)
	if in, ok := benchCache[key]; ok {
		return in
	}
	clear(benchCache) // keep one large input alive at a time
	g := group{topics: map[string]Topic{}}
	var names []string
	for i := 0; i < ntopics; i++ {
		n := fmt.Sprintf("topic-%04d", i)
		names = append(names, n)
		t := Topic{Name: n, Partitions: int32(nparts)}
		if racks {
			pairs := [][]string{{"r0", "r1"}, {"r1", "r2"}, {"r0", "r2"}}
			t.Racks = make([][]string, nparts)
			for p := range t.Racks {
				t.Racks[p] = pairs[(i+p)%3]
			}
		}
		g.topics[n] = t
	}
	all := func(n int) []Member {
		ms := make([]Member, n)
		for i := range ms {
			// Each member its own copy, as decoded from its heartbeat.
			ms[i] = Member{ID: fmt.Sprintf("member-%05d", i), Topics: slices.Clone(names)}
			if racks {
				ms[i].Rack = fmt.Sprintf("r%d", i%3)
			}
		}
		return ms
	}
	in := benchInput{g: g}
	in.g.members = all(nmembers)
	before := g
	switch shape {
	case "join":
		before.members = all(nmembers - 1)
	case "leave":
		before.members = all(nmembers + 1)
		// The member that leaves is in the middle of the order.
		in.g.members = slices.Delete(slices.Clone(before.members), nmembers/2, nmembers/2+1)
	}
	if shape != "scratch" {
		var err error
		if in.prev, err = Uniform().Assign(before.members, before.topics, nil); err != nil {
			b.Fatal(err)
		}
	}
	benchCache[key] = in
	return in
}

func benchUniform(b *testing.B, ntopics, nparts, nmembers int, racks bool) {
	for _, shape := range []string{"scratch", "join", "leave"} {
		b.Run(shape, func(b *testing.B) {
			in := benchGroupRacks(b, shape, ntopics, nparts, nmembers, racks)
			a := Uniform()
			var p Plan
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if p, err = a.Assign(in.g.members, in.g.topics, in.prev); err != nil {
					b.Fatal(err)
				}
			}
			var counts []int
			for _, m := range in.g.members {
				counts = append(counts, count(p, m.ID))
			}
			b.ReportMetric(float64(slices.Max(counts)-slices.Min(counts)), "spread")
			if in.prev != nil {
				b.ReportMetric(float64(moved(in.prev, p)), "moved")
				b.ReportMetric(float64(minMovedHomogeneous(in.g, in.prev)), "min-moved")
			}
			if racks {
				b.ReportMetric(float64(local(in.g, p))/float64(len(owner(p))), "local-share")
			}
		})
	}
}

// BenchmarkUniform1M: 1,000 topics x 1,000 partitions and 2,000 members
// (the goal: at most 100 ms). Run with -benchtime=5x.
func BenchmarkUniform1M(b *testing.B) {
	if testing.Short() {
		b.Skip("large benchmark skipped in -short mode")
	}
	benchUniform(b, 1000, 1000, 2000, false)
}

// BenchmarkUniform100k: 100 topics x 1,000 partitions and 10,000 members
// (the goal: at most 50 ms).
func BenchmarkUniform100k(b *testing.B) {
	if testing.Short() {
		b.Skip("large benchmark skipped in -short mode")
	}
	benchUniform(b, 100, 1000, 10000, false)
}

// BenchmarkUniformRacks1M: the 1M-partition group over three racks, each
// partition with replicas in two of them (rack-local placement possible
// for every partition).
func BenchmarkUniformRacks1M(b *testing.B) {
	if testing.Short() {
		b.Skip("large benchmark skipped in -short mode")
	}
	benchUniform(b, 1000, 1000, 2000, true)
}

// BenchmarkRange1M: range on the 1M-partition group, for comparison.
func BenchmarkRange1M(b *testing.B) {
	if testing.Short() {
		b.Skip("large benchmark skipped in -short mode")
	}
	in := benchGroup(b, "scratch", 1000, 1000, 2000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Range().Assign(in.g.members, in.g.topics, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// heteroGroup is ntopics x nparts partitions and nmembers members, each
// subscribed to k topics drawn at random (a fixed seed), with three racks
// when racks is set (members round-robin, every partition with replicas in
// two of them).
func heteroGroup(ntopics, nparts, nmembers, k int, racks bool) group {
	r := rand.New(rand.NewPCG(uint64(ntopics)<<32|uint64(nmembers), uint64(k)))
	g := group{topics: map[string]Topic{}}
	names := make([]string, ntopics)
	for i := range names {
		names[i] = fmt.Sprintf("topic-%04d", i)
		t := Topic{Name: names[i], Partitions: int32(nparts)}
		if racks {
			pairs := [][]string{{"r0", "r1"}, {"r1", "r2"}, {"r0", "r2"}}
			t.Racks = make([][]string, nparts)
			for p := range t.Racks {
				t.Racks[p] = pairs[(i+p)%3]
			}
		}
		g.topics[names[i]] = t
	}
	g.members = make([]Member, nmembers)
	idx := make([]int, ntopics)
	for i := range idx {
		idx[i] = i
	}
	for i := range g.members {
		// A partial Fisher-Yates shuffle draws k distinct topics.
		for j := 0; j < k; j++ {
			s := j + r.IntN(ntopics-j)
			idx[j], idx[s] = idx[s], idx[j]
		}
		sel := slices.Clone(idx[:k])
		slices.Sort(sel)
		m := Member{ID: fmt.Sprintf("member-%05d", i), Topics: make([]string, k)}
		for j, t := range sel {
			m.Topics[j] = names[t]
		}
		if racks {
			m.Rack = fmt.Sprintf("r%d", i%3)
		}
		g.members[i] = m
	}
	return g
}

// BenchmarkUniformHeterogeneous: members subscribed to k random topics
// each, no previous target (a cold start, or every member replaced), named
// topics x partitions / members / k. "join" is one more member (k random
// topics) joining the plan of the others.
func BenchmarkUniformHeterogeneous(b *testing.B) {
	if testing.Short() {
		b.Skip("large benchmark skipped in -short mode")
	}
	cases := []struct {
		nt, np, nm, k int
		racks, join   bool
	}{
		{100, 100, 1000, 10, false, false},
		{500, 100, 5000, 10, false, false},
		{1000, 100, 10000, 10, false, false},
		{100, 1000, 10000, 50, false, false},
		{10, 10000, 10000, 5, false, false},
		{1000, 100, 10000, 10, true, false},
		{1000, 100, 10000, 10, false, true},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%dx%d/%dm/%dt", c.nt, c.np, c.nm, c.k)
		if c.racks {
			name += "/racks"
		}
		if c.join {
			name += "/join"
		}
		b.Run(name, func(b *testing.B) {
			g := heteroGroup(c.nt, c.np, c.nm, c.k, c.racks)
			var prev Plan
			if c.join {
				var err error
				if prev, err = Uniform().Assign(g.members[:c.nm-1], g.topics, nil); err != nil {
					b.Fatal(err)
				}
			}
			a := Uniform()
			var p Plan
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if p, err = a.Assign(g.members, g.topics, prev); err != nil {
					b.Fatal(err)
				}
			}
			var counts []int
			for _, m := range g.members {
				counts = append(counts, count(p, m.ID))
			}
			b.ReportMetric(float64(slices.Max(counts)-slices.Min(counts)), "spread")
			if prev != nil {
				b.ReportMetric(float64(moved(prev, p)), "moved")
			}
		})
	}
}
