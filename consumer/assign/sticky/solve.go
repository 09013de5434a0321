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
		b := int32(-1)
		for m := 0; m < s.nm; m++ {
			if s.load[m] > level-2 || s.dist[m] == inf {
				continue
			}
			if b < 0 || s.dist[m] < s.dist[b] || s.dist[m] == s.dist[b] && s.load[m] < s.load[b] {
				b = int32(m)
			}
		}
		if b < 0 {
			return errInternal
		}
		s.augment(b, (level-s.load[b])/2)
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
