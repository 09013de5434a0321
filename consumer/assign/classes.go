package assign

// memberClasses lets the engine choose a single-owner unit's owner in time
// that does not grow with the members: rack-aware's units prefer every member
// of a few racks, and with three racks a unit used to visit a third of the
// group, or all of it once partitions have replicas in every rack (100,000
// partitions over 1,000 members took 1.4 s, most of it there).
//
// The active members are split into classes whose members subscribe to the
// same topics and are preferred, equally, for the same units (for
// rack-aware: the same rack and the same subscriptions). Within a class only
// the least loaded member can be the engine's choice, the first in member
// order among equals, because the engine's loops choose by load, then member
// order, and its filters (subscribed, preferred, eligible under the quota)
// are the same for the whole class or only pass lower loads. So each class
// keeps its members in a heap ordered by (load, member), and a unit's owner
// is found among the heads of the classes subscribed to its topic.
//
// The heaps follow loads while units are given (engine.give) and are used by
// the preferring and filling phases only; the phases after them move units
// without updating the heaps.
type memberClasses struct {
	load  []int   // the engine's loads
	heaps [][]int // per class, its members ordered by (load, member)
	pos   []int   // member -> position in its class's heap; -1 in none
	class []int   // member -> its class; -1 in none
	// byTopic lists, per topic (unit.ti), the classes subscribed to it.
	byTopic [][]int
	// preferred says whether the members of class c are preferred for u
	// (ranked 0; the engine's rank must say the same for each of them).
	preferred func(u *unit, c int) bool
}

// newMemberClasses builds the heaps; class[m] is member m's class (-1 for
// members subscribed to nothing) and byTopic lists each topic's classes.
func newMemberClasses(load []int, class []int, nclass int, byTopic [][]int, preferred func(u *unit, c int) bool) *memberClasses {
	mc := &memberClasses{load: load, heaps: make([][]int, nclass), pos: make([]int, len(class)), class: class,
		byTopic: byTopic, preferred: preferred}
	for m, c := range class {
		mc.pos[m] = -1
		if c >= 0 {
			mc.pos[m] = len(mc.heaps[c])
			mc.heaps[c] = append(mc.heaps[c], m)
		}
	}
	for c := range mc.heaps {
		for i := len(mc.heaps[c])/2 - 1; i >= 0; i-- {
			mc.down(c, i)
		}
	}
	return mc
}

// before orders members by load, then member order.
func (mc *memberClasses) before(a, b int) bool {
	if la, lb := mc.load[a], mc.load[b]; la != lb {
		return la < lb
	}
	return a < b
}

// raised restores m's class heap after m's load went up.
func (mc *memberClasses) raised(m int) {
	if c := mc.class[m]; c >= 0 {
		mc.down(c, mc.pos[m])
	}
}

func (mc *memberClasses) down(c, i int) {
	h := mc.heaps[c]
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && mc.before(h[r], h[l]) {
			l = r
		}
		if !mc.before(h[l], h[i]) {
			return
		}
		h[i], h[l] = h[l], h[i]
		mc.pos[h[i]], mc.pos[h[l]] = i, l
		i = l
	}
}

// least returns the member the engine's loops would choose for u, which has
// no owner yet. With onlyPreferred (the preferring phase): the least loaded
// preferred member subscribed to u's topic, first in member order among
// equals, or -1. Otherwise (the filling phase): the least loaded member
// subscribed to it, a preferred one first among equals, then member order.
func (mc *memberClasses) least(u *unit, onlyPreferred bool) int {
	best, bestPref := -1, false
	for _, c := range mc.byTopic[u.ti] {
		h := mc.heaps[c]
		if len(h) == 0 {
			continue
		}
		pref := mc.preferred(u, c)
		if onlyPreferred && !pref {
			continue
		}
		m := h[0]
		switch {
		case best < 0:
		case mc.load[m] != mc.load[best]:
			if mc.load[m] > mc.load[best] {
				continue
			}
		case pref != bestPref:
			if !pref {
				continue
			}
		case m > best:
			continue
		}
		best, bestPref = m, pref
	}
	return best
}
