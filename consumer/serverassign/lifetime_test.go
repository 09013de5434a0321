package serverassign

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestAssignorsOverGroupLifetimes follows groups through the changes a
// coordinator recomputes targets for, each target computed from the
// previous one, as the coordinator does: members joining (dynamic or
// static, with or without racks) and leaving, subscriptions changing
// (including to topics that do not exist or to nothing), topics growing,
// being created and being deleted, and static members restarting under a
// new member id (their target handed to the new id, as the coordinator
// does). After every change:
//
//   - uniform's plan passes certify against the previous target (optimal
//     balance and, for it, the fewest moves), racks or not;
//   - range's plan matches the formula and its co-partitioning;
//   - both give the same plan whatever the order of the members they are
//     given: in cluster mode any node may compute a group's target;
//   - a static member's restart moves nothing, with either assignor.
func TestAssignorsOverGroupLifetimes(t *testing.T) {
	n := uint64(seeds)
	if testing.Short() {
		n /= 5
	}
	for seed := uint64(0); seed < n; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		l := newLifetime(r, seed%3 == 0)
		prev := map[string]Plan{}
		for step := 0; step < 10; step++ {
			restarted := ""
			switch ev := r.IntN(7); {
			case step == 0:
			case ev == 0 || len(l.g.members) < 2:
				l.join()
			case ev == 1:
				l.leave()
			case ev == 2:
				l.resubscribe()
			case ev == 3:
				l.grow()
			case ev == 4:
				l.deleteOrCreate()
			default:
				var from, to string
				if from, to = l.restartStatic(); from != "" {
					restarted = to
					for _, p := range prev {
						p[to] = p[from]
						delete(p, from)
					}
				}
			}
			for _, a := range []Assignor{Uniform(), Range()} {
				p := run(t, a, l.g, prev[a.Name()])
				what := fmt.Sprintf("seed %d step %d %s", seed, step, a.Name())
				switch a.Name() {
				case UniformName:
					if err := certify(l.g, p, prev[a.Name()]); err != nil {
						t.Fatalf("%s: %v\nmembers %+v\nprev %v\nplan %v", what, err, l.g.members, prev[a.Name()], p)
					}
				case RangeName:
					if err := checkRangeFormula(l.g, p); err != nil {
						t.Fatalf("%s: %v", what, err)
					}
				}
				shuffled := slices.Clone(l.g.members)
				r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				if q, err := a.Assign(shuffled, l.g.topics, prev[a.Name()]); err != nil || !reflect.DeepEqual(p, q) {
					t.Fatalf("%s: members in another order give another plan (err %v)\n%v\n%v", what, err, p, q)
				}
				if restarted != "" {
					if m := moved(prev[a.Name()], p); m != 0 {
						t.Fatalf("%s: static member restarting as %s moved %d partitions", what, restarted, m)
					}
				}
				prev[a.Name()] = p
			}
		}
	}
}

// lifetime is a group whose members and topics change over time.
type lifetime struct {
	r     *rand.Rand
	g     group
	racks bool
	next  int // member ids and topic names are never reused
	names []string
}

var lifetimeRacks = []string{"r0", "r1", "r2"}

func newLifetime(r *rand.Rand, racks bool) *lifetime {
	l := &lifetime{r: r, g: group{topics: map[string]Topic{}}, racks: racks}
	for range 1 + r.IntN(4) {
		l.create()
	}
	for range 1 + r.IntN(6) {
		l.join()
	}
	return l
}

func (l *lifetime) id() int { l.next++; return l.next }

// create adds a topic of 0..12 partitions, with replica racks if l.racks.
func (l *lifetime) create() {
	name := fmt.Sprintf("t%03d", l.id())
	l.names = append(l.names, name)
	l.g.topics[name] = l.topic(name, int32(l.r.IntN(13)))
}

func (l *lifetime) topic(name string, parts int32) Topic {
	t := Topic{Name: name, Partitions: parts}
	if l.racks {
		old := l.g.topics[name].Racks
		t.Racks = slices.Clone(old[:min(len(old), int(parts))])
		for len(t.Racks) < int(parts) {
			t.Racks = append(t.Racks, []string{lifetimeRacks[l.r.IntN(3)], lifetimeRacks[l.r.IntN(3)]})
		}
	}
	return t
}

// subscription picks topics among the names ever created (deleted ones
// included) and sometimes one that never existed; sometimes none.
func (l *lifetime) subscription() []string {
	var ts []string
	all := l.r.IntN(3) == 0 // the homogeneous case often
	for _, n := range l.names {
		if all || l.r.IntN(2) == 0 {
			ts = append(ts, n)
		}
	}
	if l.r.IntN(5) == 0 {
		ts = append(ts, "zz-never")
	}
	return ts
}

func (l *lifetime) join() {
	k := l.id()
	m := Member{ID: fmt.Sprintf("m%03d", k), Topics: l.subscription()}
	if l.r.IntN(3) == 0 {
		m.InstanceID = fmt.Sprintf("i%03d", l.r.IntN(1000))
		for _, o := range l.g.members {
			if o.InstanceID == m.InstanceID {
				m.InstanceID = ""
			}
		}
	}
	if l.racks && l.r.IntN(4) != 0 {
		m.Rack = lifetimeRacks[l.r.IntN(3)]
	}
	if l.r.IntN(2) == 0 && len(l.g.members) > 0 {
		// Most groups are homogeneous: often copy someone's subscription.
		m.Topics = slices.Clone(l.g.members[l.r.IntN(len(l.g.members))].Topics)
	}
	l.g.members = append(l.g.members, m)
	l.sort()
}

func (l *lifetime) sort() {
	slices.SortFunc(l.g.members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
}

func (l *lifetime) leave() {
	k := l.r.IntN(len(l.g.members))
	l.g.members = slices.Delete(l.g.members, k, k+1)
}

func (l *lifetime) resubscribe() {
	l.g.members[l.r.IntN(len(l.g.members))].Topics = l.subscription()
}

func (l *lifetime) grow() {
	var live []string
	for _, n := range l.names {
		if _, ok := l.g.topics[n]; ok {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		l.create()
		return
	}
	name := live[l.r.IntN(len(live))]
	l.g.topics[name] = l.topic(name, l.g.topics[name].Partitions+int32(1+l.r.IntN(6)))
}

func (l *lifetime) deleteOrCreate() {
	if l.r.IntN(2) == 0 {
		l.create()
		return
	}
	delete(l.g.topics, l.names[l.r.IntN(len(l.names))])
}

// restartStatic gives a static member a new member id (same instance id,
// rack and subscription) and returns the old and new ids, or "" when the
// group has no static member.
func (l *lifetime) restartStatic() (from, to string) {
	var static []int
	for i, m := range l.g.members {
		if m.InstanceID != "" {
			static = append(static, i)
		}
	}
	if len(static) == 0 {
		return "", ""
	}
	i := static[l.r.IntN(len(static))]
	from, to = l.g.members[i].ID, fmt.Sprintf("m%03d", l.id())
	l.g.members[i].ID = to
	l.sort()
	return from, to
}
