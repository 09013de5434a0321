package assign

import (
	"fmt"
	"slices"
)

// The engine below is shared by the redundant and rack-aware assignors. It
// places `need` distinct owners on every partition ("unit"), keeping member
// loads balanced, and honours a preference (previous owner, same rack) as far
// as balance allows. Everything iterates in a fixed order (units by topic and
// partition, members in Kafka order), so the result depends only on the input.
//
// Balance criterion ("within one where achievable"), always met: when the
// engine is done, no member holds two or more units more than another member
// that could take one of them (subscribed to its topic, not already an
// owner). With equal subscriptions this is exactly max-min <= 1.
//
// Preference is honoured by local improvement, not optimised: preferred
// owners first up to a quota, then single moves and pairwise swaps that add
// a preferred placement without hurting balance, until none is left. A plan
// with more preferred placements can remain when reaching it needs a longer
// chain of exchanges (a brute-force check over small groups found 53 of
// 2,000 rack-aware and 2 of about 3,000 redundant inputs one placement short).
//
// Cost: the preferring phase visits each unit's candidates (cands), the
// filling phase every member for each owner it adds, so a run is about
// O(units × replicas × members) plus improvement passes of O(units ×
// candidates) each; balancing rounds look only at members two or more
// above the least loaded. With member classes (classes.go) the filling
// phase, and for rack-aware the preferring phase too, instead look at the
// head of each class subscribed to the unit's topic, a handful, so a run is
// about O(units × replicas × classes) plus the candidates' visits and the
// improvement passes. Measured figures: docs/benchmarks.md,
// "rack-aware and redundant: the preference engine".

type unit struct {
	idx    int // position in engine.units
	ti     int // the topic's position in the engine's names
	topic  string
	part   int32
	need   int
	sub    []bool // member index -> subscribed to topic
	owners []int  // member indexes
	slot   []int  // slot[i]: this unit's position in held[owners[i]]
}

type engine struct {
	members []Member
	load    []int
	held    [][]*unit // units each member owns, in no particular order
	active  []int     // members subscribed to at least one topic
	units   []*unit
	// rank says how much member m is preferred as an owner of u: < 0 not
	// preferred, otherwise lower is better. It is called often and must be
	// cheap (no map lookups by string).
	rank func(u *unit, m int) int
	// cands lists, in ascending member order, every member rank may prefer
	// for u (a superset is allowed); nil means every member. It lets the
	// engine visit a unit's few preferred members instead of all of them.
	cands func(u *unit) []int
	// classes, when set, lets the preferring and filling phases pick a
	// single-owner unit's owner without visiting its candidates (see
	// memberClasses); nil: they visit them.
	classes *memberClasses
}

// newEngine builds the units: every partition of every subscribed topic,
// each needing min(replicas, subscribers) owners.
func newEngine(members []Member, names []string, subs map[string][]int, topics map[string]Topic, replicas int) *engine {
	e := &engine{members: members, load: make([]int, len(members)), held: make([][]*unit, len(members))}
	isActive := make([]bool, len(members))
	// The units, their owners and their held-list slots are cut from three
	// allocations: a group can have a million partitions.
	n, owners := 0, 0
	for _, t := range names {
		n += int(max(topics[t].Partitions, 0))
		owners += int(max(topics[t].Partitions, 0)) * min(replicas, len(subs[t]))
	}
	units := make([]unit, 0, n)
	e.units = make([]*unit, 0, n)
	ownerSpace, slotSpace := make([]int, owners), make([]int, owners)
	for ti, t := range names {
		s := make([]bool, len(members))
		for _, m := range subs[t] {
			s[m] = true
			isActive[m] = true
		}
		need := min(replicas, len(subs[t]))
		for p := int32(0); p < topics[t].Partitions; p++ {
			units = append(units, unit{idx: len(e.units), ti: ti, topic: t, part: p, need: need, sub: s,
				owners: ownerSpace[:0:need], slot: slotSpace[:0:need]})
			ownerSpace, slotSpace = ownerSpace[need:], slotSpace[need:]
			e.units = append(e.units, &units[len(units)-1])
		}
	}
	for m, ok := range isActive {
		if ok {
			e.active = append(e.active, m)
		}
	}
	return e
}

func (e *engine) canOwn(u *unit, m int) bool {
	return u.sub[m] && !slices.Contains(u.owners, m)
}

func (e *engine) preferred(u *unit, m int) bool { return e.rank != nil && e.rank(u, m) >= 0 }

// candidates returns the members rank may prefer for u.
func (e *engine) candidates(u *unit) []int {
	if e.cands != nil {
		return e.cands(u)
	}
	return e.active
}

func (e *engine) give(u *unit, m int) {
	u.owners = append(u.owners, m)
	u.slot = append(u.slot, len(e.held[m]))
	e.held[m] = append(e.held[m], u)
	e.load[m]++
	if e.classes != nil {
		e.classes.raised(m)
	}
}

// unhold removes u (owned by m through owner slot i) from held[m].
func (e *engine) unhold(u *unit, i int) {
	m, p := u.owners[i], u.slot[i]
	h := e.held[m]
	last := h[len(h)-1]
	h[p] = last
	last.slot[slices.Index(last.owners, m)] = p
	e.held[m] = h[:len(h)-1]
}

func (e *engine) move(u *unit, from, to int) {
	i := slices.Index(u.owners, from)
	e.unhold(u, i)
	u.owners[i] = to
	u.slot[i] = len(e.held[to])
	e.held[to] = append(e.held[to], u)
	e.load[from]--
	e.load[to]++
}

func (e *engine) run() {
	e.preferPhase()
	e.fillPhase()
	e.balancePhase()
	if e.rank != nil {
		e.improvePhase()
		e.balancePhase()
	}
}

// preferPhase gives each unit its preferred owners while they are under
// quota. The quota (floor of the mean, plus one for the remainder's worth of
// members) keeps the preference from unbalancing the group.
func (e *engine) preferPhase() {
	if e.rank == nil || len(e.active) == 0 {
		return
	}
	total := 0
	for _, u := range e.units {
		total += u.need
	}
	base, extra := total/len(e.active), total%len(e.active)
	atCeil := 0
	var cands []int
	eligible := func(m int) bool {
		return e.load[m] < base || (e.load[m] == base && atCeil < extra)
	}
	for _, u := range e.units {
		if e.classes != nil && e.classes.preferred != nil && u.need == 1 && len(u.owners) == 0 {
			// The same choice as the loop below (rank is 0 for every
			// preferred member here), from the classes' least loaded
			// members. Eligibility only falls as load rises, so if the
			// least loaded preferred member is not eligible, none is.
			if best := e.classes.least(u, true); best >= 0 && eligible(best) {
				if e.load[best] == base {
					atCeil++
				}
				e.give(u, best)
			}
			continue
		}
		if u.need-len(u.owners) == 1 {
			// One owner to add: the first eligible preferred member in the
			// order below (rank, then load, then member order), found
			// without sorting: rack-aware units can have hundreds of
			// candidates.
			best, bestRank := -1, 0
			for _, m := range e.candidates(u) {
				if !eligible(m) || !e.canOwn(u, m) {
					continue
				}
				r := e.rank(u, m)
				if r >= 0 && (best < 0 || r < bestRank || (r == bestRank && e.load[m] < e.load[best])) {
					best, bestRank = m, r
				}
			}
			if best >= 0 {
				if e.load[best] == base {
					atCeil++
				}
				e.give(u, best)
			}
			continue
		}
		cands = cands[:0]
		for _, m := range e.candidates(u) {
			if e.canOwn(u, m) && e.preferred(u, m) {
				cands = append(cands, m)
			}
		}
		slices.SortStableFunc(cands, func(a, b int) int {
			if ra, rb := e.rank(u, a), e.rank(u, b); ra != rb {
				return ra - rb
			}
			return e.load[a] - e.load[b]
		})
		for _, m := range cands {
			if len(u.owners) >= u.need {
				break
			}
			if eligible(m) {
				if e.load[m] == base {
					atCeil++
				}
				e.give(u, m)
			}
		}
	}
}

// fillPhase gives every unit its remaining owners, each time the least
// loaded member that can own it (preferred members first among equals).
// It visits every member for every owner it adds: O(units × replicas ×
// members).
func (e *engine) fillPhase() {
	for _, u := range e.units {
		if e.classes != nil {
			for len(u.owners) < u.need {
				e.give(u, e.fillOwner(u))
			}
			continue
		}
		for len(u.owners) < u.need {
			best := -1
			for _, m := range e.active {
				if !e.canOwn(u, m) {
					continue
				}
				if best < 0 || e.load[m] < e.load[best] ||
					(e.load[m] == e.load[best] && e.preferred(u, m) && !e.preferred(u, best)) {
					best = m
				}
			}
			e.give(u, best) // need <= subscribers, so best >= 0
		}
	}
}

// fillOwner makes fillPhase's choice for u from the member classes: the
// least loaded member that can own u, a preferred one first among equals,
// then member order.
func (e *engine) fillOwner(u *unit) int {
	mc := e.classes
	// u's owners cannot own it twice: out of reach while choosing. No load
	// exceeds the unit count, so that is far enough, and it fits any int
	// (a 32-bit build refused a constant of 1 << 40).
	away := len(e.units) + 1
	for _, o := range u.owners {
		mc.shift(o, away)
	}
	best := mc.least(u, false)
	if mc.preferred == nil && !e.preferred(u, best) {
		// Preference per member (redundant's claims): the first preferred
		// member at the least load, if any.
		for _, m := range e.candidates(u) {
			if e.load[m] == e.load[best] && e.canOwn(u, m) && e.preferred(u, m) {
				best = m
				break
			}
		}
	}
	for _, o := range u.owners {
		mc.shift(o, -away)
	}
	return best
}

// balancePhase moves single units from a member to one holding at least two
// fewer, until no such move exists. Each move lowers the sum of squared
// loads, so this terminates. Among possible moves it prefers one that takes
// a unit away from a non-preferred owner, then one that gives it to a
// preferred member, then the largest load difference, then the first unit
// (topic and partition order), owner and receiver (member order).
//
// Each round looks only at the units of members holding two or more above
// the least loaded member, and only at receivers at least two below the
// giver: after the preferring and filling phases that is usually nothing,
// and the round costs one pass over the members.
func (e *engine) balancePhase() {
	if len(e.active) == 0 {
		return
	}
	byLoad := slices.Clone(e.active)
	for {
		slices.SortStableFunc(byLoad, func(a, b int) int { return e.load[a] - e.load[b] })
		low := e.load[byLoad[0]]
		type cand struct{ score, unit, slot, to int }
		best := cand{score: -1}
		better := func(c cand) bool {
			if c.score != best.score {
				return c.score > best.score
			}
			if c.unit != best.unit {
				return c.unit < best.unit
			}
			if c.slot != best.slot {
				return c.slot < best.slot
			}
			return c.to < best.to
		}
		for _, from := range e.active {
			if e.load[from] < low+2 {
				continue
			}
			for _, u := range e.held[from] {
				slot := slices.Index(u.owners, from)
				fromScore := 0
				if !e.preferred(u, from) {
					fromScore = 1 << 20
				}
				for _, to := range byLoad {
					if e.load[from]-e.load[to] < 2 {
						break
					}
					if !e.canOwn(u, to) {
						continue
					}
					c := cand{score: fromScore + 1 + e.load[from] - e.load[to], unit: u.idx, slot: slot, to: to}
					if e.preferred(u, to) {
						c.score += 1 << 19
					}
					if better(c) {
						best = c
					}
				}
			}
		}
		if best.score < 0 {
			return
		}
		u := e.units[best.unit]
		e.move(u, u.owners[best.slot], best.to)
	}
}

// improvePhase raises the number of preferred placements without hurting
// balance: it moves a unit from a non-preferred owner to a preferred member
// carrying at least one unit less (loads at most swap), or swaps two units
// between members so that at least one ends on a preferred member and
// neither leaves a preferred one. Each step adds a preferred placement, so
// this terminates.
//
// This is local improvement, not an optimum: a better plan may need a
// chain of three or more exchanges, which it does not search for. Each
// pass visits every unit once, looking only at the unit's candidates
// (cands) and, for a swap, at units the candidate holds without
// preference; passes repeat while one improved something.
func (e *engine) improvePhase() {
	// spare[b] lists units b owns without being preferred: what b could
	// give in a swap. Entries go stale when b loses the unit; they are
	// dropped when met.
	spare := make([][]*unit, len(e.members))
	for _, u := range e.units {
		for _, m := range u.owners {
			if !e.preferred(u, m) {
				spare[m] = append(spare[m], u)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, x := range e.units {
			for i := 0; i < len(x.owners); i++ {
				if e.improveOwner(x, x.owners[i], spare) {
					changed = true
				}
			}
		}
	}
}

// improveOwner tries to replace a, a non-preferred owner of x, by a
// preferred member: by a move, or by a swap with a unit the preferred
// member holds without preference.
func (e *engine) improveOwner(x *unit, a int, spare [][]*unit) bool {
	if e.preferred(x, a) {
		return false
	}
	cands := e.candidates(x)
	for _, b := range cands {
		if e.preferred(x, b) && e.canOwn(x, b) && e.load[b] < e.load[a] {
			e.move(x, a, b)
			return true
		}
	}
	for _, b := range cands {
		if b == a || !e.preferred(x, b) || !e.canOwn(x, b) {
			continue
		}
		list := spare[b]
		kept := list[:0]
		found := -1
		for k, y := range list {
			if !slices.Contains(y.owners, b) {
				continue // stale: b gave y away
			}
			kept = append(kept, y)
			if y != x && e.canOwn(y, a) {
				found = len(kept) - 1
				kept = append(kept, list[k+1:]...)
				break
			}
		}
		// Drop what the scan found stale; the rest keeps its order.
		spare[b] = kept
		if found < 0 {
			continue
		}
		y := spare[b][found]
		e.move(x, a, b)
		e.move(y, b, a)
		spare[b] = slices.Delete(spare[b], found, found+1)
		if !e.preferred(y, a) {
			spare[a] = append(spare[a], y)
		}
		return true
	}
	return false
}

func (e *engine) plan() plan {
	p := newPlan(len(e.members))
	for _, u := range e.units {
		for _, m := range u.owners {
			p.add(m, u.topic, u.part)
		}
	}
	return p
}

func checkReplicas(name string, r int) error {
	if r < 1 {
		return fmt.Errorf("%s: replicas must be at least 1, got %d", name, r)
	}
	return nil
}
