package assign

import "log/slog"

// Redundant returns the redundant assignor ("redundant"): every partition
// goes to `replicas` distinct members, for consumers such as search indexers
// that keep several copies of each partition's state. If a topic has fewer
// subscribers than replicas, every subscriber gets all its partitions and
// Assign logs a warning on logger (slog.Default() if nil).
//
// Loads are balanced (see the package's balance criterion: per-member
// counts within one where subscriptions allow) and the assignment is sticky:
// a member keeps partitions it reports in its subscription's owned
// partitions (version 1+), preferring claims of the newest generation, as
// far as balance allows. Clients on the eager protocol report no owned
// partitions, in which case the assignment is simply balanced.
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
	if err := checkReplicas(a.name, a.replicas); err != nil {
		return nil, err
	}
	ms, names, subs, err := subscribers(a.name, members, topics)
	if err != nil {
		return nil, err
	}
	for _, t := range names {
		if n := len(subs[t]); n < a.replicas && topics[t].Partitions > 0 {
			a.log.Warn("redundant assignor: fewer subscribers than replicas; every subscriber gets every partition",
				"topic", t, "subscribers", n, "replicas", a.replicas)
		}
	}
	e := newEngine(ms, names, subs, topics, a.replicas)
	// claims[topic][partition][member] = generation of the claim.
	type key struct {
		topic string
		part  int32
	}
	claims := map[key]map[int]int32{}
	for m := range ms {
		for _, tp := range ms[m].Owned {
			for _, p := range tp.Partitions {
				k := key{tp.Topic, p}
				if claims[k] == nil {
					claims[k] = map[int]int32{}
				}
				if g, ok := claims[k][m]; !ok || ms[m].Generation > g {
					claims[k][m] = ms[m].Generation
				}
			}
		}
	}
	// Rank: newest generation first; invalid claims (no longer subscribed,
	// partition gone) never match because the unit or subscription is absent.
	maxGen := int32(-1)
	for _, m := range ms {
		maxGen = max(maxGen, m.Generation)
	}
	e.rank = func(u *unit, m int) int {
		g, ok := claims[key{u.topic, u.part}][m]
		if !ok {
			return -1
		}
		return int(maxGen - g)
	}
	e.run()
	return e.plan().result(ms), nil
}
