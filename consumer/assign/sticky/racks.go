package sticky

import (
	"math/bits"
	"slices"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// AssignRacks computes the plan of New().Assign (same per-member counts,
// same number of previously owned partitions kept: the balance and the
// movement are exactly as good) and, within it, places as many partitions
// as it can on a member whose Rack is among the racks of the partition's
// replicas (Topic.Racks). It is meant for callers that pass previous
// ownership directly, as Member.Owned with one Generation for everyone (the
// server-side "uniform" assignor of the consumer protocol does).
//
// Rack locality is the third goal, after balance and stickiness, and it
// acts only on which partitions are kept and handed over, not on how many a
// member takes from each class of partitions sharing a subscriber set:
//
//   - a member that must give up some of its previous partitions keeps its
//     rack-local ones first;
//   - the partitions a class hands over are matched to the members taking
//     them so that the number of rack-local placements is the maximum the
//     per-member counts allow (a small max-flow between groups of
//     partitions with the same replica racks and the takers' racks).
//
// The per-class counts themselves come from the rack-blind solver, so when
// members subscribe to several classes, a different split of counts between
// classes could sometimes place more partitions locally; AssignRacks does
// not search for it. Members without a rack, partitions without replica
// racks and, for the handover matching, groups with more than 64 distinct
// taker racks get no preference (they are placed as New().Assign would
// place them, in partition order).
func AssignRacks(members []assign.Member, topics map[string]assign.Topic) (map[string]assign.Assignment, error) {
	p, err := newProblem(members, topics)
	if err != nil {
		return nil, err
	}
	p.resolveOwners(false)
	s := p.newSolver()
	if err := s.solve(); err != nil {
		return nil, err
	}
	racks := make([][][]string, len(p.names))
	hasRacks := false
	for t, name := range p.names {
		racks[t] = topics[name].Racks
		hasRacks = hasRacks || len(racks[t]) > 0
	}
	memberRacks := false
	for i := range members {
		memberRacks = memberRacks || members[i].Rack != ""
	}
	if !hasRacks || !memberRacks {
		return p.output(p.materialize(s, false)), nil
	}
	return p.materializeRacks(s, racks), nil
}

// materializeRacks is materialize (non-cooperative) with rack preference;
// racks[t][i] are the replica racks of partition i of topic t.
func (p *problem) materializeRacks(s *solver, racks [][][]string) map[string]assign.Assignment {
	nm := len(p.members)
	sl := p.newSlots(s)
	give := sl.put
	local := func(m, t, part int32) bool {
		r, rs, i := p.members[m].Rack, racks[t], part-p.bases[t]
		return r != "" && int(i) < len(rs) && slices.Contains(rs[i], r)
	}

	kept := make([]bool, p.nparts)
	pos := make([]int32, nm)
	for i := range pos {
		pos[i] = -1
	}
	var keep []int32
	var h handover
	for ci := range p.classes {
		c := &p.classes[ci]
		keep = keep[:0]
		for k, m := range c.members {
			pos[m] = int32(k)
			a := c.arcStart + k
			keep = append(keep, min(s.x[a], s.o[a]))
		}
		// Rack-local previous partitions are kept first, then the others.
		for pass := 0; pass < 2; pass++ {
			for _, t := range c.topics {
				for part := p.bases[t]; part < p.bases[t+1]; part++ {
					w := p.owner[part]
					if w < 0 || kept[part] {
						continue
					}
					if k := pos[w]; keep[k] > 0 && (pass == 1 || local(w, t, part)) {
						keep[k]--
						kept[part] = true
						give(w, part)
					}
				}
			}
		}
		h.reset(c.n)
		for k, m := range c.members {
			a := c.arcStart + k
			if take := s.x[a] - min(s.x[a], s.o[a]); take > 0 {
				h.taker(m, p.members[m].Rack, take)
			}
		}
		for _, t := range c.topics {
			for part := p.bases[t]; part < p.bases[t+1]; part++ {
				if !kept[part] {
					var rs []string
					if i := int(part - p.bases[t]); i < len(racks[t]) {
						rs = racks[t][i]
					}
					h.partition(part, rs)
				}
			}
		}
		h.distribute(give)
		for _, m := range c.members {
			pos[m] = -1
		}
	}
	return p.output(sl)
}

// handover matches the partitions one class hands over to the members
// taking them, maximising rack-local placements for fixed take counts.
type handover struct {
	takers []int32 // members, ascending
	takes  []int32
	rackOf []int // taker -> rack index, -1 if none
	racks  []string
	index  map[string]int // used when there are many racks

	parts []int32  // handed-over partitions, in order
	masks []uint64 // parts[i]'s replica racks among the takers' racks
}

// reset empties h for a class of n partitions.
func (h *handover) reset(n int) {
	h.takers, h.takes, h.rackOf, h.racks = h.takers[:0], h.takes[:0], h.rackOf[:0], h.racks[:0]
	if cap(h.parts) < n {
		h.parts, h.masks = make([]int32, 0, n), make([]uint64, 0, n)
	}
	h.parts, h.masks = h.parts[:0], h.masks[:0]
	clear(h.index)
}

func (h *handover) taker(m int32, rack string, take int32) {
	r := -1
	if rack != "" {
		r = slices.Index(h.racks, rack)
		if r < 0 {
			r = len(h.racks)
			h.racks = append(h.racks, rack)
		}
	}
	h.takers = append(h.takers, m)
	h.takes = append(h.takes, take)
	h.rackOf = append(h.rackOf, r)
}

// rackIndex finds a taker rack by name (-1 if no taker is in that rack).
func (h *handover) rackIndex(name string) int {
	if len(h.racks) <= 8 {
		return slices.Index(h.racks, name)
	}
	if len(h.index) == 0 {
		if h.index == nil {
			h.index = make(map[string]int, len(h.racks))
		}
		for i, r := range h.racks {
			h.index[r] = i
		}
	}
	if i, ok := h.index[name]; ok {
		return i
	}
	return -1
}

func (h *handover) partition(part int32, replicaRacks []string) {
	var mask uint64
	if len(h.racks) > 0 && len(h.racks) <= 64 {
		for _, name := range replicaRacks {
			if r := h.rackIndex(name); r >= 0 {
				mask |= 1 << r
			}
		}
	}
	h.parts = append(h.parts, part)
	h.masks = append(h.masks, mask)
}

// distribute hands every partition to a taker: first the rack-local
// matches a maximum flow finds, then the rest in partition order to the
// takers with room left, in member order.
func (h *handover) distribute(give func(m, part int32)) {
	nr := len(h.racks)
	// Group the partitions by mask, groups in order of first appearance.
	var gmask []uint64
	var gcount []int
	group := make([]int32, len(h.parts))
	byMask := map[uint64]int32{}
	for i, mask := range h.masks {
		g := int32(-1)
		if mask != 0 {
			var ok bool
			if g, ok = byMask[mask]; !ok {
				g = int32(len(gmask))
				byMask[mask] = g
				gmask = append(gmask, mask)
				gcount = append(gcount, 0)
			}
			gcount[g]++
		}
		group[i] = g
	}
	capacity := make([]int, nr)
	for k, r := range h.rackOf {
		if r >= 0 {
			capacity[r] += int(h.takes[k])
		}
	}
	flow := maxLocal(gmask, gcount, capacity)

	// Partitions matched to rack r, in order; then the unmatched ones.
	bucket := make([][]int32, nr)
	matched := 0
	for r := range bucket {
		n := 0
		for g := range gmask {
			n += flow[g*nr+r]
		}
		bucket[r] = make([]int32, 0, n)
		matched += n
	}
	rest := make([]int32, 0, len(h.parts)-matched)
	for i, part := range h.parts {
		g := group[i]
		if g < 0 {
			rest = append(rest, part)
			continue
		}
		placed := false
		for r := 0; r < nr && !placed; r++ {
			if f := &flow[int(g)*nr+r]; *f > 0 {
				*f--
				bucket[r] = append(bucket[r], part)
				placed = true
			}
		}
		if !placed {
			rest = append(rest, part)
		}
	}
	room := slices.Clone(h.takes)
	for k, m := range h.takers {
		if r := h.rackOf[k]; r >= 0 {
			n := min(int(room[k]), len(bucket[r]))
			for _, part := range bucket[r][:n] {
				give(m, part)
			}
			bucket[r] = bucket[r][n:]
			room[k] -= int32(n)
		}
	}
	for k, m := range h.takers {
		n := min(int(room[k]), len(rest))
		for _, part := range rest[:n] {
			give(m, part)
		}
		rest = rest[n:]
	}
}

// maxLocal returns a maximum flow from groups (count[g] partitions whose
// replica racks are the bits of mask[g]) to racks (room for capacity[r]
// partitions), as flow[g*len(capacity)+r]: a greedy start, then
// shortest augmenting paths (Edmonds-Karp) until none remains.
func maxLocal(mask []uint64, count, capacity []int) []int {
	ng, nr := len(mask), len(capacity)
	flow := make([]int, ng*nr)
	sent := make([]int, ng)
	used := make([]int, nr)
	order := make([]int, ng)
	for g := range order {
		order[g] = g
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return bits.OnesCount64(mask[a]) - bits.OnesCount64(mask[b])
	})
	for _, g := range order {
		for r := 0; r < nr && sent[g] < count[g]; r++ {
			if mask[g]&(1<<r) != 0 {
				n := min(count[g]-sent[g], capacity[r]-used[r])
				flow[g*nr+r] += n
				sent[g] += n
				used[r] += n
			}
		}
	}
	// Residual search from groups with unsent partitions to racks with
	// room. Nodes: groups 0..ng-1, racks ng..ng+nr-1.
	parent := make([]int, ng+nr)
	queue := make([]int, 0, ng+nr)
	for {
		for i := range parent {
			parent[i] = -2
		}
		queue = queue[:0]
		for g := 0; g < ng; g++ {
			if sent[g] < count[g] {
				parent[g] = -1
				queue = append(queue, g)
			}
		}
		end := -1
		for head := 0; head < len(queue) && end < 0; head++ {
			v := queue[head]
			if v < ng {
				for r := 0; r < nr; r++ {
					if w := ng + r; mask[v]&(1<<r) != 0 && parent[w] == -2 {
						parent[w] = v
						queue = append(queue, w)
						if used[r] < capacity[r] {
							end = w
							break
						}
					}
				}
				continue
			}
			r := v - ng
			for g := 0; g < ng; g++ {
				if flow[g*nr+r] > 0 && parent[g] == -2 {
					parent[g] = v
					queue = append(queue, g)
				}
			}
		}
		if end < 0 {
			return flow
		}
		// Bottleneck along the path, then push it.
		delta := capacity[end-ng] - used[end-ng]
		for w := end; parent[w] != -1; w = parent[w] {
			if v := parent[w]; w < ng { // rack v -> group w: undo flow
				delta = min(delta, flow[w*nr+v-ng])
			}
		}
		var start int
		for w := end; ; w = parent[w] {
			if parent[w] == -1 {
				start = w
				break
			}
		}
		delta = min(delta, count[start]-sent[start])
		for w := end; parent[w] != -1; w = parent[w] {
			v := parent[w]
			if w < ng {
				flow[w*nr+v-ng] -= delta
			} else {
				flow[v*nr+w-ng] += delta
			}
		}
		sent[start] += delta
		used[end-ng] += delta
	}
}
