package sticky

import (
	"errors"
	"math"
	"slices"
)

// The solver works on counts, not partitions. Partitions of one class are
// interchangeable for balance, and for stickiness only how many of its own
// partitions a member keeps matters. Arc a links a class to one of its
// subscribers: x[a] partitions of the class go to that member, o[a] of the
// class were previously owned by it, so it keeps min(x[a], o[a]).
//
// The goal is a minimum-cost flow where balance costs dominate: first make
// the sorted loads lexicographically smallest (equivalently, minimise the
// sum of squared loads), then maximise the kept partitions. Optimality is
// the absence of improving moves in the residual graph, whose nodes are
// members and classes:
//
//   - member m -> class c: m gives up one unit of c. Costs 1 when it is one
//     of m's previously owned partitions (x <= o), else 0.
//   - class c -> member m: m takes one unit of c. Costs -1 when it is one of
//     m's previously owned partitions (x < o), else 0.
//
// Moving a unit along a path from member a to member b changes only the
// loads of a and b. The plan is optimal when (1) no path leads from a to b
// with load(a) >= load(b)+2 (balance), (2) no cycle has negative cost, and
// (3) no path with negative cost leads from a to b with load(a) = load(b)+1.
//
// The start (everyone keeps everything it owned, the rest is water-filled)
// satisfies (2). Balancing moves always follow a cheapest path, which keeps
// (2) true (the successive-shortest-path argument); then (3) is repaired by
// single-unit moves along negative paths, which also keep (2).
type solver struct {
	nm         int
	classes    []class
	arcMember  []int32
	arcClass   []int32
	memberArcs [][]int32
	x, o       []int32
	load       []int32

	// scratch
	dist   []int32
	parent []int32
	inQ    []bool
	count  []int32
	queue  []int32
	label  []int32
	order  []int32
}

const inf = math.MaxInt32

var errInternal = errors.New("sticky: internal error: negative cycle in residual graph")

func (p *problem) newSolver() *solver {
	nm := len(p.members)
	narcs := 0
	for _, c := range p.classes {
		narcs += len(c.members)
	}
	s := &solver{
		nm:         nm,
		classes:    p.classes,
		arcMember:  make([]int32, narcs),
		arcClass:   make([]int32, narcs),
		memberArcs: make([][]int32, nm),
		x:          make([]int32, narcs),
		o:          make([]int32, narcs),
		load:       make([]int32, nm),
	}
	perMember := make([]int32, nm)
	for _, c := range p.classes {
		for _, m := range c.members {
			perMember[m]++
		}
	}
	flat := make([]int32, narcs)
	for m := range s.memberArcs {
		s.memberArcs[m] = flat[:0:perMember[m]]
		flat = flat[perMember[m]:]
	}
	pos := make([]int32, nm)
	for i := range pos {
		pos[i] = -1
	}
	for ci := range p.classes {
		c := &p.classes[ci]
		for k, m := range c.members {
			a := int32(c.arcStart + k)
			s.arcMember[a] = m
			s.arcClass[a] = int32(ci)
			s.memberArcs[m] = append(s.memberArcs[m], a)
			pos[m] = int32(k)
		}
		for _, t := range c.topics {
			for part := p.bases[t]; part < p.bases[t+1]; part++ {
				if w := p.owner[part]; w >= 0 {
					s.o[c.arcStart+int(pos[w])]++
				}
			}
		}
		for _, m := range c.members {
			pos[m] = -1
		}
	}
	return s
}

func (s *solver) solve() error {
	// Start: keep everything previously owned.
	copy(s.x, s.o)
	for a, x := range s.x {
		s.load[s.arcMember[a]] += x
	}
	if len(s.classes) == 1 {
		s.solveUniform()
		return nil
	}
	// Water-fill the unowned partitions, most constrained classes first.
	order := make([]int, len(s.classes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return len(s.classes[a].members) - len(s.classes[b].members)
	})
	for _, ci := range order {
		c := &s.classes[ci]
		owned := 0
		for k := range c.members {
			owned += int(s.o[c.arcStart+k])
		}
		s.waterFill(c, c.n-owned)
	}
	nodes := s.nm + len(s.classes)
	s.dist = make([]int32, nodes)
	s.parent = make([]int32, nodes)
	s.inQ = make([]bool, nodes)
	s.count = make([]int32, nodes)
	s.label = make([]int32, nodes)
	s.order = make([]int32, 0, s.nm)
	if err := s.balance(); err != nil {
		return err
	}
	return s.restick()
}

// solveUniform is the exact answer when there is a single class: counts
// q or q+1, the q+1 going first to members that owned more than q.
func (s *solver) solveUniform() {
	c := &s.classes[0]
	n, k := c.n, len(c.members)
	q, r := n/k, n%k
	for pass := 0; pass < 2; pass++ {
		for i := range c.members {
			a := c.arcStart + i
			if pass == 0 {
				s.x[a] = int32(q)
				if r > 0 && int(s.o[a]) > q {
					s.x[a]++
					r--
				}
			} else if r > 0 && int(s.x[a]) == q {
				s.x[a]++
				r--
			}
		}
	}
	for i, m := range c.members {
		s.load[m] = s.x[c.arcStart+i]
	}
}

// waterFill gives u units of class c to its least loaded members.
func (s *solver) waterFill(c *class, u int) {
	if u <= 0 {
		return
	}
	idx := make([]int, len(c.members))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return int(s.load[c.members[a]]) - int(s.load[c.members[b]])
	})
	level := int(s.load[c.members[idx[0]]])
	cnt := 1
	for {
		for cnt < len(idx) && int(s.load[c.members[idx[cnt]]]) <= level {
			cnt++
		}
		if cnt < len(idx) {
			next := int(s.load[c.members[idx[cnt]]])
			if need := (next - level) * cnt; need <= u {
				u -= need
				level = next
				continue
			}
		}
		level += u / cnt
		u %= cnt
		break
	}
	// Members below level are raised to it; u of them get one more, the
	// lowest member indices first.
	slices.Sort(idx[:cnt])
	for _, i := range idx[:cnt] {
		m := c.members[i]
		add := int32(level) - s.load[m]
		if u > 0 {
			add++
			u--
		}
		s.x[c.arcStart+i] += add
		s.load[m] += add
	}
}

// outCost is the cost and the capacity at that cost of member arcMember[a]
// giving up one unit of class arcClass[a]; ok is false if it has none.
func (s *solver) outCost(a int32) (cost, cap int32, ok bool) {
	x, o := s.x[a], s.o[a]
	switch {
	case x == 0:
		return 0, 0, false
	case x <= o:
		return 1, x, true
	default:
		return 0, x - o, true
	}
}

// inCost is the cost and capacity of member arcMember[a] taking one unit.
func (s *solver) inCost(a int32) (cost, cap int32) {
	if x, o := s.x[a], s.o[a]; x < o {
		return -1, o - x
	}
	return 0, inf
}

// spfa computes cheapest paths from the given members (Bellman-Ford with a
// queue; costs are -1, 0 or 1 and there is no negative cycle).
func (s *solver) spfa(sources []int32) error {
	for i := range s.dist {
		s.dist[i] = inf
		s.parent[i] = -1
		s.inQ[i] = false
		s.count[i] = 0
	}
	q := s.queue[:0]
	for _, m := range sources {
		s.dist[m] = 0
		s.inQ[m] = true
		q = append(q, m)
	}
	limit := int32(len(s.dist)) + 1
	for head := 0; head < len(q); head++ {
		v := q[head]
		s.inQ[v] = false
		d := s.dist[v]
		relax := func(w, a, cost int32) error {
			if nd := d + cost; nd < s.dist[w] {
				s.dist[w] = nd
				s.parent[w] = a
				if !s.inQ[w] {
					if s.count[w]++; s.count[w] > limit {
						return errInternal
					}
					s.inQ[w] = true
					q = append(q, w)
				}
			}
			return nil
		}
		if int(v) < s.nm {
			for _, a := range s.memberArcs[v] {
				if cost, _, ok := s.outCost(a); ok {
					if err := relax(int32(s.nm)+s.arcClass[a], a, cost); err != nil {
						return err
					}
				}
			}
		} else {
			c := &s.classes[int(v)-s.nm]
			for k := range c.members {
				a := int32(c.arcStart + k)
				cost, _ := s.inCost(a)
				if err := relax(s.arcMember[a], a, cost); err != nil {
					return err
				}
			}
		}
		if head > 1<<16 && head > len(q)/2 {
			// Compact the queue so it does not grow without bound.
			q = append(q[:0], q[head+1:]...)
			head = -1
		}
	}
	s.queue = q[:0]
	return nil
}

// augment moves delta units along the path spfa found to member b, or, if
// delta is 0, as many as the path allows at constant cost, up to limit.
func (s *solver) augment(b int32, limit int32) {
	delta := limit
	for v := b; s.parent[v] >= 0; {
		a := s.parent[v]
		if int(v) < s.nm { // class -> member v
			_, c := s.inCost(a)
			delta = min(delta, c)
			v = int32(s.nm) + s.arcClass[a]
		} else { // member -> class v
			_, c, _ := s.outCost(a)
			delta = min(delta, c)
			v = s.arcMember[a]
		}
	}
	v := b
	for s.parent[v] >= 0 {
		a := s.parent[v]
		if int(v) < s.nm {
			s.x[a] += delta
			v = int32(s.nm) + s.arcClass[a]
		} else {
			s.x[a] -= delta
			v = s.arcMember[a]
		}
	}
	s.load[v] -= delta
	s.load[b] += delta
}

// violation finds the highest load from which some member with a load at
// least two lower can be reached, by labelling every node with the highest
// load of a member that reaches it.
func (s *solver) violation() (int32, bool) {
	s.order = s.order[:0]
	for m := 0; m < s.nm; m++ {
		if len(s.memberArcs[m]) > 0 {
			s.order = append(s.order, int32(m))
		}
	}
	slices.SortStableFunc(s.order, func(a, b int32) int { return int(s.load[b]) - int(s.load[a]) })
	for i := range s.label {
		s.label[i] = -1
	}
	q := s.queue[:0]
	for _, src := range s.order {
		if s.label[src] >= 0 {
			continue
		}
		l := s.load[src]
		s.label[src] = l
		q = append(q[:0], src)
		for head := 0; head < len(q); head++ {
			v := q[head]
			if int(v) < s.nm {
				for _, a := range s.memberArcs[v] {
					if w := int32(s.nm) + s.arcClass[a]; s.x[a] > 0 && s.label[w] < 0 {
						s.label[w] = l
						q = append(q, w)
					}
				}
				continue
			}
			for _, m := range s.classes[int(v)-s.nm].members {
				if s.label[m] < 0 {
					s.label[m] = l
					q = append(q, m)
				}
			}
		}
	}
	s.queue = q[:0]
	best := int32(-1)
	for _, m := range s.order {
		if s.label[m]-s.load[m] >= 2 {
			best = max(best, s.label[m])
		}
	}
	return best, best >= 0
}

// balance moves partitions along cheapest paths from the most loaded
// members that can shed load until no path from a member to one with a
// load two lower remains.
//
// Each round finds the highest such load (violation), the cheapest paths
// from all members at that load (spfa) and the cheapest cost at which one
// of the members two or more below can be reached, and the least loaded
// of those: the receivers. With one receiver it moves partitions along the
// cheapest path to it; with several, from as many of the sources as it
// can, one path each, to the receivers (blockingFlow), each path still a
// cheapest one when it is used, which is what keeps (2). Moving along a
// single path per round took thousands of rounds, each a scan of the whole
// graph, for thousands of members with differing subscriptions and no
// history.
func (s *solver) balance() error {
	var sources []int32
	for {
		level, ok := s.violation()
		if !ok {
			return nil
		}
		sources = sources[:0]
		for m := 0; m < s.nm; m++ {
			if s.load[m] == level && len(s.memberArcs[m]) > 0 {
				sources = append(sources, int32(m))
			}
		}
		if err := s.spfa(sources); err != nil {
			return err
		}
		// The receivers: the least loaded of the cheapest to reach among
		// the members with a load of at most level-2.
		b, open := int32(-1), 0
		for m := 0; m < s.nm; m++ {
			if s.load[m] > level-2 || s.dist[m] == inf {
				continue
			}
			switch {
			case b < 0 || s.dist[m] < s.dist[b] || s.dist[m] == s.dist[b] && s.load[m] < s.load[b]:
				b, open = int32(m), 1
			case s.dist[m] == s.dist[b] && s.load[m] == s.load[b]:
				open++
			}
		}
		switch {
		case b < 0:
			return errInternal
		case open == 1:
			// The one-path step: no search for more paths to make.
			s.augment(b, (level-s.load[b])/2)
		case s.blockingFlow(sources, level, s.dist[b], s.load[b], open) == 0:
			return errInternal
		}
	}
}

// blockingFlow moves partitions from the sources (members at load level,
// spfa's sources) to the open receivers, the members at distance best with
// load low (the least loaded of the cheapest to reach with a load of at
// most level-2: those the one-path step chooses from), along paths whose every arc is tight for spfa's distances
// (dist[w] = dist[v] + cost), until no such path or no receiver remains,
// and returns how many paths it used. Each source sends along one path and
// each receiver takes from one; as in the one-path step, a path carries as
// many units as its arcs allow at their current cost, up to half the gap
// between its two ends, so every path lowers the sum of squared loads.
//
// Moving units along tight arcs keeps dist a valid potential (no residual
// arc gets a negative reduced cost: the reverse of a tight arc is tight,
// and an arc's cost only rises as it is used), so every later path of
// tight arcs is still a cheapest path: the residual graph keeps having no
// negative cycle. As in Dinic's algorithm, paths only follow arcs that go
// one step further from the sources in a breadth-first layering of the
// tight arcs, so arcs gained in the round (reverses) are never used and a
// node found to lead nowhere stays dead for the round.
func (s *solver) blockingFlow(sources []int32, level, best, low int32, open int) int {
	nm := int32(s.nm)
	lvl, cur := s.label, s.count // spfa is done with count; violation redoes label
	for i := range lvl {
		lvl[i] = -1
		cur[i] = 0
	}
	// Breadth-first layers over the tight arcs.
	q := s.queue[:0]
	for _, m := range sources {
		lvl[m] = 0
		q = append(q, m)
	}
	for head := 0; head < len(q); head++ {
		v := q[head]
		d, l := s.dist[v], lvl[v]+1
		if v < nm {
			for _, a := range s.memberArcs[v] {
				if cost, _, ok := s.outCost(a); ok {
					if w := nm + s.arcClass[a]; lvl[w] < 0 && s.dist[w] == d+cost {
						lvl[w] = l
						q = append(q, w)
					}
				}
			}
			continue
		}
		c := &s.classes[v-nm]
		for k, w := range c.members {
			if lvl[w] < 0 {
				if cost, _ := s.inCost(int32(c.arcStart + k)); s.dist[w] == d+cost {
					lvl[w] = l
					q = append(q, w)
				}
			}
		}
	}
	s.queue = q[:0]

	sink := func(m int32) bool {
		return m < nm && s.load[m] == low && s.dist[m] == best
	}
	moved := 0
	path := s.order[:0] // the arcs of the path from src; nodes, its nodes
	nodes := make([]int32, 0, 16)
	for _, src := range sources {
		if open == 0 {
			break
		}
		if lvl[src] < 0 {
			continue
		}
		path, nodes = path[:0], append(nodes[:0], src)
		for len(nodes) > 0 {
			v := nodes[len(nodes)-1]
			if v != src && sink(v) {
				delta := min(s.capacity(path), (level-s.load[v])/2)
				s.push(path, delta)
				s.load[src] -= delta
				s.load[v] += delta
				open--
				moved++
				break
			}
			a, w, ok := s.nextAdmissible(v, lvl, cur)
			if ok {
				path = append(path, a)
				nodes = append(nodes, w)
				continue
			}
			lvl[v] = -1 // dead for the round
			nodes = nodes[:len(nodes)-1]
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		}
	}
	s.order = path[:0]
	return moved
}

// nextAdmissible returns, from v's current arc on (cur[v]), the first
// residual arc v -> w that is tight and leads one layer further to a node
// not yet dead, leaving cur[v] at it.
func (s *solver) nextAdmissible(v int32, lvl, cur []int32) (a, w int32, ok bool) {
	nm := int32(s.nm)
	d := s.dist[v]
	if v < nm {
		arcs := s.memberArcs[v]
		for ; int(cur[v]) < len(arcs); cur[v]++ {
			a := arcs[cur[v]]
			if cost, _, ok := s.outCost(a); ok {
				if w := nm + s.arcClass[a]; lvl[w] == lvl[v]+1 && s.dist[w] == d+cost {
					return a, w, true
				}
			}
		}
		return 0, 0, false
	}
	c := &s.classes[v-nm]
	for ; int(cur[v]) < len(c.members); cur[v]++ {
		a := int32(c.arcStart) + cur[v]
		cost, _ := s.inCost(a)
		if w := s.arcMember[a]; lvl[w] == lvl[v]+1 && s.dist[w] == d+cost {
			return a, w, true
		}
	}
	return 0, 0, false
}

// capacity is how many units can move along a path of arcs from a member
// (member -> class and class -> member arcs alternating) at the cost of
// its first unit.
func (s *solver) capacity(path []int32) int32 {
	c := int32(inf)
	for i, a := range path {
		if i%2 == 0 {
			_, n, _ := s.outCost(a)
			c = min(c, n)
		} else {
			_, n := s.inCost(a)
			c = min(c, n)
		}
	}
	return c
}

// push moves delta units along a path of arcs from a member: a member ->
// class arc gives them up, a class -> member arc takes them.
func (s *solver) push(path []int32, delta int32) {
	for i, a := range path {
		if i%2 == 0 {
			s.x[a] -= delta
		} else {
			s.x[a] += delta
		}
	}
}

// restick applies single-unit moves along negative paths from a member to
// one with a load one lower, which keep the balance and keep more
// partitions with their previous owners, until none remains.
func (s *solver) restick() error {
	deficit := false
	for a := range s.x {
		if s.x[a] < s.o[a] {
			deficit = true
			break
		}
	}
	if !deficit {
		// No member lacks any of its own partitions: every partition that
		// could stay is kept, nothing to improve.
		return nil
	}
	var levels, sources []int32
	for {
		levels = levels[:0]
		for m := 0; m < s.nm; m++ {
			if len(s.memberArcs[m]) > 0 {
				levels = append(levels, s.load[m])
			}
		}
		slices.Sort(levels)
		levels = slices.Compact(levels)
		improved := false
		for i := len(levels) - 1; i > 0 && !improved; i-- {
			hi, lo := levels[i], levels[i-1]
			if hi != lo+1 {
				continue
			}
			sources = sources[:0]
			for m := 0; m < s.nm; m++ {
				if s.load[m] == hi && len(s.memberArcs[m]) > 0 {
					sources = append(sources, int32(m))
				}
			}
			if err := s.spfa(sources); err != nil {
				return err
			}
			b := int32(-1)
			for m := 0; m < s.nm; m++ {
				if s.load[m] == lo && s.dist[m] < 0 && (b < 0 || s.dist[m] < s.dist[b]) {
					b = int32(m)
				}
			}
			if b >= 0 {
				s.augment(b, 1)
				improved = true
			}
		}
		if !improved {
			return nil
		}
	}
}
