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
// Balance criterion ("within one where achievable"): when the engine is
// done, no member holds two or more units more than another member that could
// take one of them (subscribed to its topic, not already an owner). With equal
// subscriptions this is exactly max-min <= 1.

type unit struct {
	topic  string
	part   int32
	need   int
	owners []int // member indexes
}

type engine struct {
	members []Member
	load    []int
	units   []*unit
	subs    map[string][]bool // topic -> member index -> subscribed
	// rank says how much member m is preferred as an owner of u: < 0 not
	// preferred, otherwise lower is better.
	rank func(u *unit, m int) int
}

// newEngine builds the units: every partition of every subscribed topic,
// each needing min(replicas, subscribers) owners.
func newEngine(members []Member, names []string, subs map[string][]int, topics map[string]Topic, replicas int) *engine {
	e := &engine{members: members, load: make([]int, len(members)), subs: map[string][]bool{}}
	for _, t := range names {
		s := make([]bool, len(members))
		for _, m := range subs[t] {
			s[m] = true
		}
		e.subs[t] = s
		need := min(replicas, len(subs[t]))
		for p := int32(0); p < topics[t].Partitions; p++ {
			e.units = append(e.units, &unit{topic: t, part: p, need: need})
		}
	}
	return e
}

func (e *engine) canOwn(u *unit, m int) bool {
	return e.subs[u.topic][m] && !slices.Contains(u.owners, m)
}

func (e *engine) preferred(u *unit, m int) bool { return e.rank != nil && e.rank(u, m) >= 0 }

func (e *engine) give(u *unit, m int) {
	u.owners = append(u.owners, m)
	e.load[m]++
}

func (e *engine) move(u *unit, from, to int) {
	i := slices.Index(u.owners, from)
	u.owners[i] = to
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
	if e.rank == nil {
		return
	}
	total, active := 0, 0
	for _, u := range e.units {
		total += u.need
	}
	for m := range e.members {
		for _, s := range e.subs {
			if s[m] {
				active++
				break
			}
		}
	}
	if active == 0 {
		return
	}
	base, extra := total/active, total%active
	atCeil := 0
	for _, u := range e.units {
		var cands []int
		for m := range e.members {
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
			switch {
			case e.load[m] < base:
				e.give(u, m)
			case e.load[m] == base && atCeil < extra:
				atCeil++
				e.give(u, m)
			}
		}
	}
}

// fillPhase gives every unit its remaining owners, each time the least
// loaded member that can own it (preferred members first among equals).
func (e *engine) fillPhase() {
	for _, u := range e.units {
		for len(u.owners) < u.need {
			best := -1
			for m := range e.members {
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

// balancePhase moves single units from a member to one holding at least two
// fewer, until no such move exists. Each move lowers the sum of squared
// loads, so this terminates. Among possible moves it prefers one that takes
// a unit away from a non-preferred owner to a preferred one.
func (e *engine) balancePhase() {
	for {
		bestScore, bu, bfrom, bto := -1, (*unit)(nil), -1, -1
		for _, u := range e.units {
			for _, from := range u.owners {
				for to := range e.members {
					if e.load[from]-e.load[to] < 2 || !e.canOwn(u, to) {
						continue
					}
					score := 1 + e.load[from] - e.load[to]
					if !e.preferred(u, from) {
						score += 1 << 20
					}
					if e.preferred(u, to) {
						score += 1 << 19
					}
					if score > bestScore {
						bestScore, bu, bfrom, bto = score, u, from, to
					}
				}
			}
		}
		if bu == nil {
			return
		}
		e.move(bu, bfrom, bto)
	}
}

// improvePhase raises the number of preferred placements without hurting
// balance: it moves a unit from a non-preferred owner to a preferred member
// carrying at least one unit less (loads at most swap), or swaps two units
// between members so that at least one ends on a preferred member and
// neither leaves a preferred one. Each step adds a preferred placement, so
// this terminates.
func (e *engine) improvePhase() {
	for e.improveOnce() {
	}
}

func (e *engine) improveOnce() bool {
	for _, u := range e.units {
		for _, from := range u.owners {
			if e.preferred(u, from) {
				continue
			}
			for to := range e.members {
				if e.preferred(u, to) && e.canOwn(u, to) && e.load[to] < e.load[from] {
					e.move(u, from, to)
					return true
				}
			}
		}
	}
	for _, x := range e.units {
		for _, a := range x.owners {
			if e.preferred(x, a) {
				continue
			}
			for _, y := range e.units {
				if y == x {
					continue
				}
				for _, b := range y.owners {
					if b == a || !e.preferred(x, b) || e.preferred(y, b) {
						continue
					}
					if e.canOwn(x, b) && e.canOwn(y, a) {
						e.move(x, a, b)
						e.move(y, b, a)
						return true
					}
				}
			}
		}
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
