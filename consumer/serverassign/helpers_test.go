package serverassign

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

type tp struct {
	topic string
	part  int32
}

// group is one assignor input.
type group struct {
	members []Member
	topics  map[string]Topic
}

// randomGroup draws a small group: up to maxTopics topics of 0..maxParts
// partitions, 1..maxMembers members, every member subscribed to every
// topic (homogeneous) or to a random subset, some names of topics that do
// not exist, some static members, and racks when withRacks.
func randomGroup(r *rand.Rand, maxTopics, maxParts, maxMembers int, homogeneous, withRacks bool) group {
	g := group{topics: map[string]Topic{}}
	racks := []string{"r0", "r1", "r2"}
	var names []string
	for i := 0; i < 1+r.IntN(maxTopics); i++ {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		t := Topic{Name: name, Partitions: int32(r.IntN(maxParts + 1))}
		if withRacks {
			for p := int32(0); p < t.Partitions; p++ {
				var rs []string
				for _, rk := range racks {
					if r.IntN(3) == 0 {
						rs = append(rs, rk)
					}
				}
				t.Racks = append(t.Racks, rs)
			}
		}
		g.topics[name] = t
	}
	for i := 0; i < 1+r.IntN(maxMembers); i++ {
		m := Member{ID: fmt.Sprintf("m%02d", i)}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%02d", r.IntN(100)*100+i)
		}
		if withRacks {
			m.Rack = racks[r.IntN(len(racks))]
		}
		for _, n := range names {
			if homogeneous || r.IntN(2) == 0 {
				m.Topics = append(m.Topics, n)
			}
		}
		if r.IntN(4) == 0 {
			m.Topics = append(m.Topics, "zz-missing") // sorts last
		}
		g.members = append(g.members, m)
	}
	return g
}

// owners flattens a plan into partition -> owners.
func owners(p Plan) map[tp][]string {
	out := map[tp][]string{}
	for _, id := range slices.Sorted(maps.Keys(p)) {
		for t, parts := range p[id] {
			for _, x := range parts {
				out[tp{t, x}] = append(out[tp{t, x}], id)
			}
		}
	}
	return out
}

// owner is the single owner of each partition in a valid plan.
func owner(p Plan) map[tp]string {
	out := map[tp]string{}
	for k, v := range owners(p) {
		out[k] = v[0]
	}
	return out
}

func count(p Plan, id string) int {
	n := 0
	for _, parts := range p[id] {
		n += len(parts)
	}
	return n
}

// checkValid asserts the invariants of every plan: each partition of
// every subscribed, existing topic assigned exactly once, only to a
// subscriber, partitions sorted and in range, nothing else, and an entry
// for every member and no one else.
func checkValid(t *testing.T, g group, p Plan) {
	t.Helper()
	subscribed := map[string]map[string]bool{}
	want := map[tp]bool{}
	for _, m := range g.members {
		subscribed[m.ID] = map[string]bool{}
		for _, name := range m.Topics {
			subscribed[m.ID][name] = true
			for x := int32(0); x < g.topics[name].Partitions; x++ {
				want[tp{name, x}] = true
			}
		}
		if _, ok := p[m.ID]; !ok {
			t.Fatalf("member %s has no entry", m.ID)
		}
	}
	if len(p) != len(g.members) {
		t.Fatalf("plan has %d entries for %d members", len(p), len(g.members))
	}
	for id, topics := range p {
		for name, parts := range topics {
			if !subscribed[id][name] {
				t.Fatalf("%s got %s, which it does not subscribe to", id, name)
			}
			if len(parts) == 0 {
				t.Fatalf("%s has an empty list for %s", id, name)
			}
			if !slices.IsSorted(parts) {
				t.Fatalf("%s: %s partitions not sorted: %v", id, name, parts)
			}
		}
	}
	own := owners(p)
	for k, ids := range own {
		if !want[k] {
			t.Fatalf("%v assigned but not a subscribed partition", k)
		}
		if len(ids) != 1 {
			t.Fatalf("%v assigned to %v", k, ids)
		}
	}
	if len(own) != len(want) {
		t.Fatalf("%d partitions assigned, %d subscribed", len(own), len(want))
	}
}

// clone deep-copies an input so tests can verify it was not modified.
func clone(g group, prev Plan) (group, Plan) {
	c := group{topics: map[string]Topic{}}
	for _, m := range g.members {
		m.Topics = slices.Clone(m.Topics)
		c.members = append(c.members, m)
	}
	for n, t := range g.topics {
		rs := make([][]string, len(t.Racks))
		for i := range t.Racks {
			rs[i] = slices.Clone(t.Racks[i])
		}
		if t.Racks == nil {
			rs = nil
		}
		t.Racks = rs
		c.topics[n] = t
	}
	var cp Plan
	if prev != nil {
		cp = Plan{}
		for id, topics := range prev {
			cp[id] = map[string][]int32{}
			for n, parts := range topics {
				cp[id][n] = slices.Clone(parts)
			}
		}
	}
	return c, cp
}

// run assigns and checks validity, determinism (a second run gives the
// same plan) and that no input was modified.
func run(t *testing.T, a Assignor, g group, prev Plan) Plan {
	t.Helper()
	g0, prev0 := clone(g, prev)
	p, err := a.Assign(g.members, g.topics, prev)
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, g, p)
	if !reflect.DeepEqual(g0, g) || !reflect.DeepEqual(prev0, prev) {
		t.Fatal("Assign modified its input")
	}
	again, err := a.Assign(g.members, g.topics, prev)
	if err != nil || !reflect.DeepEqual(p, again) {
		t.Fatalf("second run differs (err %v)", err)
	}
	return p
}

// moved counts the partitions of plan next whose owner differs from their
// owner in prev (a partition without a previous owner counts).
func moved(prev, next Plan) int {
	before := owners(prev)
	n := 0
	for k, id := range owner(next) {
		if b := before[k]; len(b) != 1 || b[0] != id {
			n++
		}
	}
	return n
}

// minMovedHomogeneous is the fewest partitions a balanced plan must move
// when every member subscribes to the same T partitions: member i may keep
// min(l_i, quota) of the l_i it held, and the T mod N members allowed one
// more are best chosen among those that held more than the quota.
func minMovedHomogeneous(g group, prev Plan) int {
	total := 0
	for _, name := range g.members[0].Topics {
		total += max(0, int(g.topics[name].Partitions))
	}
	n := len(g.members)
	q, r := total/n, total%n
	held := map[string]int{} // valid previous partitions per member
	subscribed := map[string]bool{}
	for _, name := range g.members[0].Topics {
		subscribed[name] = true
	}
	for k, ids := range owners(prev) {
		if len(ids) == 1 && subscribed[k.topic] && k.part < g.topics[k.topic].Partitions {
			held[ids[0]]++
		}
	}
	kept, over := 0, 0
	for _, m := range g.members {
		l := held[m.ID]
		kept += min(l, q)
		if l > q {
			over++
		}
	}
	return total - kept - min(r, over)
}
