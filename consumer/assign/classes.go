package assign

import "encoding/binary"

// memberClasses lets the engine choose a unit's owners in time that does not
// grow with the members: rack-aware's units prefer every member of a few
// racks, and with three racks a unit used to visit a third of the group, or
// all of it once partitions have replicas in every rack (100,000 partitions
// over 1,000 members took 1.3 s, most of it there); the filling phase
// visited every member for each owner it added.
//
// The active members are split into classes whose members subscribe to the
// same topics and, when preferred is set, are preferred equally for the same
// units (rack-aware: one rack and one subscription set; redundant, whose
// preference is each member's own claims: one subscription set). Within a
// class only the least loaded member can be the engine's choice, the first
// in member order among equals, because the engine's loops choose by load,
// then member order, and their filters (subscribed, preferred by class,
// eligible under the quota) are the same for the whole class or only pass
// lower loads. So each class keeps its members in a heap ordered by (load,
// member), and a unit's owner is found among the heads of the classes
// subscribed to its topic; a preference per member is then checked on the
// unit's few candidates (engine.fillOwner), and a unit's owners are shifted
// out of reach while its next owner is chosen.
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

// newMemberClasses splits the engine's active members into classes of one
// subscription set and one split value (split[m]; nil: none), builds their
// heaps, and reports each new class with its split value to made (may be
// nil). The caller sets preferred when preference is the same within a
// class.
func newMemberClasses(e *engine, names []string, subs map[string][]int, split []int, made func(c, split int)) *memberClasses {
	topicsOf := make([][]int, len(e.members)) // member -> the topics (by position) it subscribes to
	for ti, t := range names {
		for _, m := range subs[t] {
			topicsOf[m] = append(topicsOf[m], ti)
		}
	}
	type key struct {
		split  int
		topics string
	}
	ids := map[key]int{}
	mc := &memberClasses{load: e.load, pos: make([]int, len(e.members)), class: make([]int, len(e.members)),
		byTopic: make([][]int, len(names))}
	var b []byte
	for m := range e.members {
		mc.class[m], mc.pos[m] = -1, -1
		if len(topicsOf[m]) == 0 {
			continue
		}
		b = b[:0]
		for _, ti := range topicsOf[m] {
			b = binary.AppendUvarint(b, uint64(ti))
		}
		k := key{topics: string(b)}
		if split != nil {
			k.split = split[m]
		}
		c, ok := ids[k]
		if !ok {
			c = len(mc.heaps)
			ids[k] = c
			mc.heaps = append(mc.heaps, nil)
			for _, ti := range topicsOf[m] {
				mc.byTopic[ti] = append(mc.byTopic[ti], c)
			}
			if made != nil {
				made(c, k.split)
			}
		}
		mc.class[m], mc.pos[m] = c, len(mc.heaps[c])
		mc.heaps[c] = append(mc.heaps[c], m)
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

// shift moves m's load by d (owners are shifted out of reach while their
// unit's next owner is chosen) and restores m's class heap.
func (mc *memberClasses) shift(m, d int) {
	mc.load[m] += d
	c := mc.class[m]
	if c < 0 {
		return
	}
	h := mc.heaps[c]
	i := mc.pos[m]
	for i > 0 {
		p := (i - 1) / 2
		if !mc.before(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		mc.pos[h[i]], mc.pos[h[p]] = i, p
		i = p
	}
	mc.down(c, i)
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
		pref := mc.preferred != nil && mc.preferred(u, c)
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
