package assign_test

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// randomGroup builds a seeded random group: members with differing
// subscriptions, some static, racks, previous ownership; topics with racks;
// sometimes a subscribed topic without metadata.
func randomGroup(r *rand.Rand) ([]assign.Member, map[string]assign.Topic) {
	racks := []string{"r0", "r1", "r2"}
	nt := 1 + r.IntN(4)
	topics := map[string]assign.Topic{}
	var names []string
	for i := 0; i < nt; i++ {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		n := int32(r.IntN(13))
		tp := assign.Topic{Name: name, Partitions: n}
		if r.IntN(4) > 0 {
			for p := int32(0); p < n; p++ {
				rs := []string{racks[r.IntN(3)]}
				if r.IntN(2) == 0 {
					rs = append(rs, racks[r.IntN(3)])
				}
				tp.Racks = append(tp.Racks, rs)
			}
		}
		topics[name] = tp
	}
	names = append(names, "missing") // subscribed, no metadata
	nm := 1 + r.IntN(7)
	var members []assign.Member
	for i := 0; i < nm; i++ {
		m := assign.Member{ID: fmt.Sprintf("m%02d-%x", i, r.Uint32()), Generation: int32(r.IntN(5)) - 1}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("inst-%d", r.IntN(1000))
		}
		for _, t := range names {
			if r.IntN(3) > 0 {
				m.Topics = append(m.Topics, t)
			}
		}
		if len(m.Topics) == 0 {
			m.Topics = []string{names[0]}
		}
		if r.IntN(4) > 0 {
			m.Rack = racks[r.IntN(3)]
		}
		for _, t := range m.Topics {
			n := topics[t].Partitions
			var owned []int32
			for p := int32(0); p < n; p++ {
				if r.IntN(3) == 0 {
					owned = append(owned, p)
				}
			}
			if len(owned) > 0 {
				m.Owned = append(m.Owned, assign.TopicPartitions{Topic: t, Partitions: owned})
			}
		}
		members = append(members, m)
	}
	// Instance ids must be unique within a group.
	seen := map[string]bool{}
	for i := range members {
		if seen[members[i].InstanceID] {
			members[i].InstanceID = ""
		}
		seen[members[i].InstanceID] = members[i].InstanceID != ""
	}
	return members, topics
}

type tp struct {
	topic string
	part  int32
}

// check verifies the invariants every assignor here keeps and returns the
// owners of each partition.
func check(t *testing.T, name string, members []assign.Member, topics map[string]assign.Topic, res map[string]assign.Assignment) map[tp][]string {
	t.Helper()
	owners := map[tp][]string{}
	if len(res) != len(members) {
		t.Fatalf("%s: %d results for %d members", name, len(res), len(members))
	}
	for _, m := range members {
		a, ok := res[m.ID]
		if !ok {
			t.Fatalf("%s: member %s missing from result", name, m.ID)
		}
		for _, x := range a.Partitions {
			if !slices.Contains(m.Topics, x.Topic) {
				t.Fatalf("%s: %s got unsubscribed topic %s", name, m.ID, x.Topic)
			}
			for _, p := range x.Partitions {
				if p < 0 || p >= topics[x.Topic].Partitions {
					t.Fatalf("%s: %s got nonexistent %s-%d", name, m.ID, x.Topic, p)
				}
				k := tp{x.Topic, p}
				if slices.Contains(owners[k], m.ID) {
					t.Fatalf("%s: %s got %s-%d twice", name, m.ID, x.Topic, p)
				}
				owners[k] = append(owners[k], m.ID)
			}
		}
	}
	return owners
}

func subscribers(members []assign.Member, topic string) []string {
	var out []string
	for _, m := range members {
		if slices.Contains(m.Topics, topic) {
			out = append(out, m.ID)
		}
	}
	return out
}

// checkCoverage: every partition of every subscribed topic has exactly
// min(replicas, subscribers) owners.
func checkCoverage(t *testing.T, name string, members []assign.Member, topics map[string]assign.Topic, owners map[tp][]string, replicas int) {
	t.Helper()
	for topic, md := range topics {
		n := min(replicas, len(subscribers(members, topic)))
		for p := int32(0); p < md.Partitions; p++ {
			if got := len(owners[tp{topic, p}]); got != n {
				t.Fatalf("%s: %s-%d has %d owners, want %d", name, topic, p, got, n)
			}
		}
	}
}

// checkBalanced: no member holds two or more partitions more than a member
// that could take one of them (subscribed, not already an owner).
func checkBalanced(t *testing.T, name string, members []assign.Member, owners map[tp][]string) {
	t.Helper()
	load := map[string]int{}
	held := map[string][]tp{}
	for k, os := range owners {
		for _, o := range os {
			load[o]++
			held[o] = append(held[o], k)
		}
	}
	for _, heavy := range members {
		for _, light := range members {
			if load[heavy.ID]-load[light.ID] < 2 {
				continue
			}
			for _, k := range held[heavy.ID] {
				if slices.Contains(light.Topics, k.topic) && !slices.Contains(owners[k], light.ID) {
					t.Fatalf("%s: unbalanced: %s holds %d, %s holds %d and could take %s-%d", name, heavy.ID, load[heavy.ID], light.ID, load[light.ID], k.topic, k.part)
				}
			}
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestPropertiesRandomGroups(t *testing.T) {
	assignors := []assign.Assignor{
		assign.Range(), assign.RoundRobin(), assign.RackAware(),
		assign.Redundant(1, quiet()), assign.Redundant(2, quiet()), assign.Redundant(3, quiet()),
		assign.Copartition([]string{"t0", "t1"}),
	}
	replicasOf := []int{1, 1, 1, 1, 2, 3, 1}
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		members, topics := randomGroup(r)
		for ai, a := range assignors {
			name := fmt.Sprintf("seed %d %s", seed, a.Name())
			res, err := a.Assign(members, topics)
			if a.Name() == assign.CopartitionName && err != nil {
				// Legitimate only for mismatched counts or no member
				// subscribed to both topics.
				if topics["t0"].Partitions == topics["t1"].Partitions {
					both := false
					for _, m := range members {
						both = both || (slices.Contains(m.Topics, "t0") && slices.Contains(m.Topics, "t1"))
					}
					if both {
						t.Fatalf("%s: %v", name, err)
					}
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			owners := check(t, name, members, topics, res)
			replicas := replicasOf[ai]
			checkCoverage(t, name, members, topics, owners, replicas)
			switch a.Name() {
			case assign.RoundRobinName:
				// Round robin is only balanced for equal subscriptions.
			case assign.RangeName:
				checkRangePerTopic(t, name, members, topics, owners)
				checkCopartitioned(t, name, members, topics, owners)
			case assign.CopartitionName:
				if owners[tp{"t0", 0}] != nil && owners[tp{"t1", 0}] != nil {
					for p := int32(0); p < topics["t0"].Partitions; p++ {
						if !reflect.DeepEqual(owners[tp{"t0", p}], owners[tp{"t1", p}]) {
							t.Fatalf("%s: t0-%d -> %v but t1-%d -> %v", name, p, owners[tp{"t0", p}], p, owners[tp{"t1", p}])
						}
					}
				}
			default:
				checkBalanced(t, name, members, owners)
			}
			// Deterministic, whatever the member order.
			shuffled := slices.Clone(members)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			again, err := a.Assign(shuffled, topics)
			if err != nil || !reflect.DeepEqual(res, again) {
				t.Fatalf("%s: not deterministic under member shuffle (%v)", name, err)
			}
		}
	}
}

// Range is balanced per topic: subscriber counts differ by at most one.
func checkRangePerTopic(t *testing.T, name string, members []assign.Member, topics map[string]assign.Topic, owners map[tp][]string) {
	t.Helper()
	for topic, md := range topics {
		if len(subscribers(members, topic)) == 0 {
			continue
		}
		count := map[string]int{}
		for _, s := range subscribers(members, topic) {
			count[s] = 0
		}
		for p := int32(0); p < md.Partitions; p++ {
			count[owners[tp{topic, p}][0]]++
		}
		lo, hi := int(md.Partitions), 0
		for _, c := range count {
			lo, hi = min(lo, c), max(hi, c)
		}
		if len(count) > 0 && hi-lo > 1 {
			t.Fatalf("%s: range unbalanced on %s: %v", name, topic, count)
		}
	}
}

// Range keeps partition p of topics with the same subscribers and partition
// count on one member, with or without racks.
func checkCopartitioned(t *testing.T, name string, members []assign.Member, topics map[string]assign.Topic, owners map[tp][]string) {
	t.Helper()
	for a, ma := range topics {
		for b, mb := range topics {
			subsA := subscribers(members, a)
			if a >= b || ma.Partitions != mb.Partitions || len(subsA) == 0 || !slices.Equal(subsA, subscribers(members, b)) {
				continue
			}
			for p := int32(0); p < ma.Partitions; p++ {
				if !slices.Equal(owners[tp{a, p}], owners[tp{b, p}]) {
					t.Fatalf("%s: %s-%d on %v but %s-%d on %v", name, a, p, owners[tp{a, p}], b, p, owners[tp{b, p}])
				}
			}
		}
	}
}

// With equal subscriptions the engine-based assignors are within one.
func TestEqualSubscriptionsWithinOne(t *testing.T) {
	for seed := uint64(0); seed < 100; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		members, topics := randomGroup(r)
		var all []string
		for name := range topics {
			all = append(all, name)
		}
		for i := range members {
			members[i].Topics = all
		}
		for _, a := range []assign.Assignor{assign.RoundRobin(), assign.RackAware(), assign.Redundant(2, quiet())} {
			res, err := a.Assign(members, topics)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := 1<<30, 0
			for _, x := range res {
				n := 0
				for _, tp := range x.Partitions {
					n += len(tp.Partitions)
				}
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 {
				t.Fatalf("seed %d %s: loads from %d to %d", seed, a.Name(), lo, hi)
			}
		}
	}
}
