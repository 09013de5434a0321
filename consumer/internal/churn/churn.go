// Package churn builds the inputs of the assignor leader-path benchmarks: a
// group whose previous assignment is scattered as after long churn, with
// one member gone.
package churn

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// Group is ntopics x nparts partitions and the members that rejoin after
// one member of a previous plan over len(IDs)+1 members left.
type Group struct {
	Names  []string            // topic names, sorted
	Counts map[string]int32    // partitions per topic
	IDs    []string            // rejoining members, sorted
	Subs   map[string][]string // member -> subscribed topics (sorted)
	// Prev is each rejoining member's previous assignment (partitions
	// sorted). Every partition was dealt to a random previous member (a
	// fixed shuffle cut into equal runs), so a member's partitions spread
	// over many topics; the leaver's partitions are owned by nobody now.
	Prev map[string]map[string][]int32
}

// Build makes the group. divergent makes the last member subscribe to the
// first half of the topics only.
func Build(ntopics, nparts, nmembers int, divergent bool) *Group {
	g := &Group{Counts: map[string]int32{}, Subs: map[string][]string{}, Prev: map[string]map[string][]int32{}}
	for t := 0; t < ntopics; t++ {
		n := fmt.Sprintf("topic-%04d", t)
		g.Names = append(g.Names, n)
		g.Counts[n] = int32(nparts)
	}
	prevIDs := make([]string, nmembers+1)
	for i := range prevIDs {
		prevIDs[i] = fmt.Sprintf("member-%05d", i)
	}
	total := ntopics * nparts
	order := make([]int32, total)
	for i := range order {
		order[i] = int32(i)
	}
	r := rand.New(rand.NewPCG(18, 2))
	r.Shuffle(total, func(i, j int) { order[i], order[j] = order[j], order[i] })
	leaver := len(prevIDs) / 2
	for i, id := range prevIDs {
		if i == leaver {
			continue
		}
		own := map[string][]int32{}
		lo, hi := i*total/len(prevIDs), (i+1)*total/len(prevIDs)
		for _, gp := range order[lo:hi] {
			t, p := int(gp)/nparts, gp%int32(nparts)
			own[g.Names[t]] = append(own[g.Names[t]], p)
		}
		for _, ps := range own {
			slices.Sort(ps)
		}
		g.Prev[id] = own
		g.IDs = append(g.IDs, id)
		g.Subs[id] = g.Names
	}
	if divergent {
		g.Subs[g.IDs[len(g.IDs)-1]] = g.Names[:len(g.Names)/2]
	}
	return g
}

// Quality compares a plan (member -> topic -> partitions) with the group:
// spread is max - min partitions per rejoining member, moved counts
// previously owned partitions not with their previous owner, unassigned the
// partitions nobody got.
func (g *Group) Quality(plan map[string]map[string][]int32) (spread, moved, unassigned int) {
	lo, hi, total := -1, 0, 0
	for _, id := range g.IDs {
		n := 0
		for _, ps := range plan[id] {
			n += len(ps)
		}
		total += n
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	for id, own := range g.Prev {
		for t, ps := range own {
			have := map[int32]bool{}
			for _, p := range plan[id][t] {
				have[p] = true
			}
			for _, p := range ps {
				if !have[p] {
					moved++
				}
			}
		}
	}
	all := 0
	for _, n := range g.Counts {
		all += int(n)
	}
	return hi - lo, moved, all - total
}
