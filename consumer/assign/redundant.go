package assign

import "log/slog"

// Redundant returns the redundant assignor ("redundant"): every partition
// goes to `replicas` distinct members, for consumers such as search indexers
// that keep several copies of each partition's state. If a topic has fewer
// subscribers than replicas, every subscriber gets all its partitions and
// Assign logs a warning on logger (slog.Default() if nil).
//
// Loads are always balanced (per-member counts within one where
// subscriptions allow) and the assignment is sticky: a member keeps
// partitions it reports in its subscription's owned partitions (version
// 1+), preferring claims of the newest generation, as far as balance
// allows. Stickiness comes from local improvement (claimants first up to
// their share, then moves and pairwise swaps), not an optimum: a balanced
// plan keeping more claims can exist when reaching it needs a longer chain
// of exchanges (2 of about 3,000 small random groups kept one claim fewer
// than a brute-force optimum). Clients on the eager protocol report no
// owned partitions, in which case the assignment is simply balanced. Cost
// grows with partitions × replicas × the number of distinct subscription
// sets, plus each partition's claimants (see docs/architecture.md,
// assignors).
//
// replicas below 1 makes Assign return an error.
func Redundant(replicas int, logger *slog.Logger) Assignor {
	if logger == nil {
		logger = slog.Default()
	}
	return redundant{simple: simple{RedundantName}, replicas: replicas, log: logger}
}

type redundant struct {
	simple
	replicas int
	log      *slog.Logger
}

func (a redundant) Assign(members []Member, topics map[string]Topic) (map[string]Assignment, error) {
	ms, e, err := a.engine(members, topics)
	if err != nil {
		return nil, err
	}
	e.run()
	return e.plan().result(ms), nil
}

// engine builds the engine Assign runs, with its rank, candidates and
// member classes.
func (a redundant) engine(members []Member, topics map[string]Topic) ([]Member, *engine, error) {
	if err := checkReplicas(a.name, a.replicas); err != nil {
		return nil, nil, err
	}
	ms, names, subs, err := subscribers(a.name, members, topics)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range names {
		if n := len(subs[t]); n < a.replicas && topics[t].Partitions > 0 {
			a.log.Warn("redundant assignor: fewer subscribers than replicas; every subscriber gets every partition",
				"topic", t, "subscribers", n, "replicas", a.replicas)
		}
	}
	e := newEngine(ms, names, subs, topics, a.replicas)
	// claims[unit] lists the members claiming it in their owned partitions
	// (ascending member order), with the newest generation each claims it
	// in. Invalid claims (no longer subscribed, partition gone) never
	// match because the unit or the subscription is absent.
	type claim struct {
		member int
		gen    int32
	}
	type key struct {
		topic string
		part  int32
	}
	unitOf := make(map[key]*unit, len(e.units))
	for _, u := range e.units {
		unitOf[key{u.topic, u.part}] = u
	}
	claims := make([][]claim, len(e.units))
	for m := range ms {
		for _, tp := range ms[m].Owned {
			for _, p := range tp.Partitions {
				u := unitOf[key{tp.Topic, p}]
				if u == nil {
					continue
				}
				cs := claims[u.idx]
				if n := len(cs); n > 0 && cs[n-1].member == m {
					cs[n-1].gen = max(cs[n-1].gen, ms[m].Generation)
					continue
				}
				claims[u.idx] = append(cs, claim{m, ms[m].Generation})
			}
		}
	}
	// Rank: newest generation first.
	maxGen := int32(-1)
	for _, m := range ms {
		maxGen = max(maxGen, m.Generation)
	}
	e.rank = func(u *unit, m int) int {
		for _, c := range claims[u.idx] {
			if c.member == m {
				return int(maxGen - c.gen)
			}
		}
		return -1
	}
	var buf []int
	e.cands = func(u *unit) []int {
		buf = buf[:0]
		for _, c := range claims[u.idx] {
			buf = append(buf, c.member)
		}
		return buf
	}
	// Members of one subscription set form a class; preference stays per
	// member (its claims), checked on a unit's claimants.
	e.classes = newMemberClasses(e, names, subs, nil, nil)
	return ms, e, nil
}
