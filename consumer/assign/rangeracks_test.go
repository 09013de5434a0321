package assign_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// rackCase is one of Kafka's rack-aware RangeAssignor expectations (its
// RangeAssignorTest, Kafka 3.5+), rebuilt the way Kafka's test builds its
// input: brokers numbered 0.. with brokerRacks[i] ("" for none), topics in
// the order given, partition i of a topic with its replicas on brokers
// (i+j+offset) mod brokers for j < rf, where offset counts the partitions of
// the topics before it; members consumer0.. with the racks and
// subscriptions given.
type rackCase struct {
	name        string
	topics      []string // "t1:6"
	rf          int
	brokerRacks []string
	memberRacks []string
	subs        [][]string
	want        []string // per member, "t1-0 t1-3 ..."
}

func (c rackCase) input() ([]assign.Member, map[string]assign.Topic) {
	topics := map[string]assign.Topic{}
	offset := 0
	for _, tn := range c.topics {
		name, count, _ := strings.Cut(tn, ":")
		n := 0
		for _, d := range count {
			n = n*10 + int(d-'0')
		}
		tp := assign.Topic{Name: name, Partitions: int32(n)}
		for i := range n {
			var racks []string
			for j := range c.rf {
				if r := c.brokerRacks[(i+j+offset)%len(c.brokerRacks)]; r != "" && !slices.Contains(racks, r) {
					racks = append(racks, r)
				}
			}
			tp.Racks = append(tp.Racks, racks)
		}
		offset += n
		topics[name] = tp
	}
	var ms []assign.Member
	for i, s := range c.subs {
		m := sub("consumer"+string(rune('0'+i)), s...)
		m.Rack = c.memberRacks[i]
		ms = append(ms, m)
	}
	return ms, topics
}

func racksN(n int) []string { return []string{"a", "b", "c", "d", "e", "f"}[:n] }

// TestRangeRackAwareMatchesKafka: range places partitions on rack-local
// members exactly as Kafka's rack-aware RangeAssignor does, and gives the
// plain range plan where Kafka's does (no member rack, no broker rack,
// disjoint racks, every partition on every rack).
func TestRangeRackAwareMatchesKafka(t *testing.T) {
	all := []string{"t1", "t2", "t3"}
	uniform := []string{"t1:6", "t2:7", "t3:2"}
	plainUniform := []string{"t1-0 t1-1 t2-0 t2-1 t2-2 t3-0", "t1-2 t1-3 t2-3 t2-4 t3-1", "t1-4 t1-5 t2-5 t2-6"}
	three := [][]string{all, all, all}
	nonEqual := [][]string{all, all, {"t1", "t3"}}
	plainNonEqual := []string{"t1-0 t1-1 t2-0 t2-1 t2-2 t2-3 t3-0", "t1-2 t1-3 t2-4 t2-5 t2-6 t3-1", "t1-4 t1-5"}
	samePartitions := []string{"t1:5", "t2:5", "t3:5"}
	plainSame := []string{"t1-0 t1-1 t2-0 t2-1 t3-0 t3-1", "t1-2 t1-3 t2-2 t2-3 t3-2 t3-3", "t1-4 t2-4 t3-4"}
	copart := []string{"t1:6", "t2:6", "t3:2", "t4:2"}
	copartRacks := []string{"a", "b", "b", "a"}
	pairs := [][]string{{"t1", "t2"}, {"t1", "t2"}, {"t3", "t4"}, {"t3", "t4"}}
	plainPairs := []string{"t1-0 t1-1 t1-2 t2-0 t2-1 t2-2", "t1-3 t1-4 t1-5 t2-3 t2-4 t2-5", "t3-0 t4-0", "t3-1 t4-1"}
	four := []string{"t1", "t2", "t3", "t4"}
	allFour := [][]string{four, four, four, four}
	plainFour := []string{"t1-0 t1-1 t2-0 t2-1 t3-0 t4-0", "t1-2 t1-3 t2-2 t2-3 t3-1 t4-1", "t1-4 t2-4", "t1-5 t2-5"}
	cases := []rackCase{
		// Rack-aware logic not used: the plain plan.
		{"uniform/no broker racks", uniform, 3, []string{"", "", ""}, racksN(3), three, plainUniform},
		{"uniform/no member racks", uniform, 3, racksN(3), []string{"", "", ""}, three, plainUniform},
		{"uniform/every rack holds every partition", uniform, 3, racksN(3), racksN(3), three, plainUniform},
		{"uniform/rf4 over 4 racks", uniform, 4, racksN(4), racksN(3), three, plainUniform},
		{"uniform/disjoint racks", uniform, 3, racksN(3), []string{"d", "e", "f"}, three, plainUniform},
		{"uniform/one member without a rack, others disjoint", uniform, 3, racksN(3), []string{"", "e", "f"}, three, plainUniform},
		// Best effort for a lower replication factor.
		{"uniform/rf1", uniform, 1, racksN(3), racksN(3), three,
			[]string{"t1-0 t1-3 t2-0 t2-3 t2-6", "t1-1 t1-4 t2-1 t2-4 t3-0", "t1-2 t1-5 t2-2 t2-5 t3-1"}},
		{"uniform/rf2", uniform, 2, racksN(3), racksN(3), three,
			[]string{"t1-0 t1-2 t2-0 t2-2 t2-3 t3-1", "t1-1 t1-3 t2-1 t2-4 t3-0", "t1-4 t1-5 t2-5 t2-6"}},
		{"uniform/a member on a rack without partitions", uniform, 3, racksN(2), racksN(3), three, plainUniform},
		{"non-equal/no broker racks", uniform, 3, []string{"", "", ""}, racksN(3), nonEqual, plainNonEqual},
		{"non-equal/rf1", uniform, 1, racksN(3), racksN(3), nonEqual,
			[]string{"t1-0 t1-3 t2-0 t2-2 t2-3 t2-6", "t1-1 t1-4 t2-1 t2-4 t2-5 t3-0", "t1-2 t1-5 t3-1"}},
		{"non-equal/rf2", uniform, 2, racksN(3), racksN(3), nonEqual,
			[]string{"t1-0 t1-2 t2-0 t2-2 t2-3 t2-5 t3-1", "t1-1 t1-3 t2-1 t2-4 t2-6 t3-0", "t1-4 t1-5"}},
		{"non-equal/a member on a rack without partitions", uniform, 3, racksN(2), racksN(3), nonEqual, plainNonEqual},
		// Co-partitioning comes before rack alignment.
		{"same partitions/rf1", samePartitions, 1, racksN(3), racksN(3), three, plainSame},
		{"same partitions/rf2", samePartitions, 2, racksN(3), racksN(3), three, plainSame},
		{"same partitions/a member on a rack without partitions", samePartitions, 3, racksN(2), racksN(3), three, plainSame},
		{"same partitions, non-equal/rf1", samePartitions, 1, racksN(3), racksN(3), nonEqual,
			[]string{"t1-0 t1-1 t2-0 t2-1 t2-4 t3-0 t3-1", "t1-2 t1-3 t2-2 t2-3 t3-2 t3-3", "t1-4 t3-4"}},
		{"same partitions, non-equal/rf2", samePartitions, 2, racksN(3), racksN(3), nonEqual,
			[]string{"t1-2 t2-0 t2-1 t2-3 t3-2", "t1-0 t1-3 t2-2 t2-4 t3-0 t3-3", "t1-1 t1-4 t3-1 t3-4"}},
		{"same partitions, non-equal/a member on a rack without partitions", samePartitions, 3, racksN(2), racksN(3), nonEqual,
			[]string{"t1-0 t1-1 t2-0 t2-1 t2-2 t3-0 t3-1", "t1-2 t1-3 t2-3 t2-4 t3-2 t3-3", "t1-4 t3-4"}},
		// Co-partitioned pairs with their own subscribers.
		{"pairs/rf3", copart, 3, racksN(2), copartRacks, pairs, plainPairs},
		{"pairs/rf2", copart, 2, racksN(2), copartRacks, pairs, plainPairs},
		{"pairs/rf1", copart, 1, racksN(2), copartRacks, pairs,
			[]string{"t1-0 t1-2 t1-4 t2-0 t2-2 t2-4", "t1-1 t1-3 t1-5 t2-1 t2-3 t2-5", "t3-1 t4-1", "t3-0 t4-0"}},
		{"pairs, all subscribed/rf3", copart, 3, racksN(2), copartRacks, allFour, plainFour},
		{"pairs, all subscribed/rf2", copart, 2, racksN(2), copartRacks, allFour, plainFour},
		{"pairs, all subscribed/rf1", copart, 1, racksN(2), copartRacks, allFour,
			[]string{"t1-0 t1-2 t2-0 t2-2 t3-0 t4-0", "t1-1 t1-3 t2-1 t2-3 t3-1 t4-1", "t1-5 t2-5", "t1-4 t2-4"}},
		{"pairs, all subscribed/rf1 over 3 racks", copart, 1, racksN(3), copartRacks, allFour,
			[]string{"t1-0 t1-3 t2-0 t2-3 t3-0 t4-0", "t1-1 t1-4 t2-1 t2-4 t3-1 t4-1", "t1-2 t2-2", "t1-5 t2-5"}},
		// Three pairs of equal partition counts among six subscribed (and
		// three missing) topics.
		{"co-partitioned, same subscription/rf2", []string{"t1:6", "t2:6", "t3:2", "t4:2", "t5:4", "t6:4"}, 2, racksN(3), racksN(3),
			[][]string{
				{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"},
				{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"},
				{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"},
			},
			[]string{"t1-0 t1-2 t2-0 t2-2 t3-0 t4-0 t5-1 t6-1", "t1-1 t1-3 t2-1 t2-3 t3-1 t4-1 t5-2 t6-2", "t1-4 t1-5 t2-4 t2-5 t5-0 t5-3 t6-0 t6-3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms, topics := c.input()
			res, err := assign.Range().Assign(ms, topics)
			if err != nil {
				t.Fatal(err)
			}
			got, model := flat(res), rangeModel(ms, topics)
			for i, w := range c.want {
				want := strings.Fields(w)
				slices.Sort(want)
				if id := ms[i].ID; !slices.Equal(got[id], want) || !slices.Equal(model[id], want) {
					t.Errorf("%s: %v (the model: %v), want %v", id, got[id], model[id], want)
				}
			}
		})
	}
}

// rangeModel is Kafka's rack-aware range written the plain way, with
// nothing indexed (every lookup a scan), to check Range's indexed version
// against on random groups.
func rangeModel(members []assign.Member, topics map[string]assign.Topic) map[string][]string {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b assign.Member) int { // the tests' ids and instance ids are ASCII
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			return strings.Compare(a.InstanceID, b.InstanceID)
		case a.InstanceID != "":
			return -1
		case b.InstanceID != "":
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	type state struct {
		topic      string
		subs       []int
		racks      [][]string // nil: no subscriber has a rack
		taken      []bool
		got        []int
		per, extra int
		needsRacks bool
	}
	var names []string
	for t := range topics {
		names = append(names, t)
	}
	slices.Sort(names)
	out := map[string][]string{}
	for _, m := range ms {
		out[m.ID] = []string{}
	}
	var states []*state
	for _, t := range names {
		n := int(topics[t].Partitions)
		st := &state{topic: t, taken: make([]bool, n)}
		for i, m := range ms {
			if slices.Contains(m.Topics, t) {
				st.subs = append(st.subs, i)
			}
		}
		if n == 0 || len(st.subs) == 0 {
			continue
		}
		st.got = make([]int, len(ms))
		st.per, st.extra = n/len(st.subs), n%len(st.subs)
		var mr, all []string
		for _, i := range st.subs {
			if r := ms[i].Rack; r != "" {
				mr = append(mr, r)
			}
		}
		if len(mr) > 0 {
			st.racks = make([][]string, n)
			for p := range n {
				if p < len(topics[t].Racks) {
					for _, r := range topics[t].Racks[p] {
						if r != "" && !slices.Contains(st.racks[p], r) {
							st.racks[p] = append(st.racks[p], r)
						}
						if r != "" && !slices.Contains(all, r) {
							all = append(all, r)
						}
					}
				}
			}
			shared := slices.ContainsFunc(mr, func(r string) bool { return slices.Contains(all, r) })
			same := true
			for _, rs := range st.racks {
				same = same && len(rs) == len(all)
			}
			st.needsRacks = shared && !same
		}
		states = append(states, st)
	}
	room := func(st *state, i int) int {
		n := st.per - st.got[i]
		if st.extra > 0 {
			n++
		}
		return max(0, n)
	}
	local := func(st *state, i, p int) bool {
		r := ms[i].Rack
		return r == "" || (st.racks != nil && slices.Contains(st.racks[p], r))
	}
	give := func(st *state, i int, ps []int) {
		for _, p := range ps {
			st.taken[p] = true
			out[ms[i].ID] = append(out[ms[i].ID], fmt.Sprintf("%s-%d", st.topic, p))
		}
		st.got[i] += len(ps)
		if st.got[i] > st.per {
			st.extra--
		}
	}
	deal := func(st *state, ok func(i, p int) bool) {
		for _, i := range st.subs {
			var take []int
			for p := range st.taken {
				if len(take) < room(st, i) && !st.taken[p] && ok(i, p) {
					take = append(take, p)
				}
			}
			if len(take) > 0 {
				give(st, i, take)
			}
		}
	}
	if slices.ContainsFunc(states, func(st *state) bool { return st.needsRacks }) {
		done := map[*state]bool{}
		for _, a := range states {
			if done[a] {
				continue
			}
			var class []*state
			for _, b := range states {
				if slices.Equal(a.subs, b.subs) && len(a.racks) == len(b.racks) {
					class = append(class, b)
					done[b] = true
				}
			}
			if len(class) == 1 {
				if a.needsRacks {
					deal(a, func(i, p int) bool { return local(a, i, p) })
				}
				continue
			}
			remaining := slices.Clone(a.subs)
			for p := range len(a.racks) {
				for j, i := range remaining {
					fits := true
					for _, st := range class {
						fits = fits && room(st, i) > 0 && local(st, i, p)
					}
					if !fits {
						continue
					}
					for _, st := range class {
						give(st, i, []int{p})
					}
					if !slices.ContainsFunc(class, func(st *state) bool { return room(st, i) > 0 }) {
						remaining = slices.Delete(remaining, j, j+1)
					}
					break
				}
			}
		}
	}
	for _, st := range states {
		deal(st, func(int, int) bool { return true })
	}
	for id := range out {
		slices.Sort(out[id])
	}
	return out
}

// TestRangeRacksMatchesModel: Range's indexed rack-aware assignment (queues
// per rack, partition lists per rack) chooses exactly what the plain model
// does, on random groups with racks: members with and without racks,
// partitions with zero to three replica racks, topics sharing subscribers
// and partition counts.
func TestRangeRacksMatchesModel(t *testing.T) {
	racks := []string{"a", "b", "c", "d"}
	compared := 0
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 881))
		topics := map[string]assign.Topic{}
		var names []string
		for i := range 1 + r.IntN(5) {
			n := int32(1 + r.IntN(12))
			if i > 0 && r.IntN(2) == 0 {
				n = topics[names[0]].Partitions // same count: a class
			}
			name := fmt.Sprintf("t%d", i)
			names = append(names, name)
			tp := assign.Topic{Name: name, Partitions: n}
			skew := r.IntN(3) == 0
			for range n {
				var rs []string
				for range r.IntN(4) {
					if skew {
						rs = append(rs, racks[r.IntN(2)])
					} else {
						rs = append(rs, racks[r.IntN(len(racks))])
					}
				}
				tp.Racks = append(tp.Racks, rs)
			}
			topics[name] = tp
		}
		var ms []assign.Member
		for i := range 1 + r.IntN(8) {
			m := sub(fmt.Sprintf("m%02d", i))
			if r.IntN(2) == 0 {
				m.Topics = names
			} else {
				for _, t := range names {
					if r.IntN(2) == 0 {
						m.Topics = append(m.Topics, t)
					}
				}
			}
			if r.IntN(5) > 0 {
				m.Rack = racks[r.IntN(len(racks))]
			}
			if r.IntN(4) == 0 {
				m.InstanceID = fmt.Sprintf("i%02d", r.IntN(100)+i*100)
			}
			ms = append(ms, m)
		}
		res, err := assign.Range().Assign(ms, topics)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := flat(res), rangeModel(ms, topics); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d:\n got %v\nwant %v", seed, got, want)
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("nothing compared")
	}
}
