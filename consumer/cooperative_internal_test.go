package consumer

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
)

func tps(topic string, ps ...int32) []assign.TopicPartitions {
	return []assign.TopicPartitions{{Topic: topic, Partitions: ps}}
}

// TestWithholdMoves: a cooperative plan may not hand a partition to a
// member while the member reporting it owned is told to give it up in the
// same round (Kafka's validateCooperativeAssignment); such partitions are
// taken out of the plan. Keeping, revoking without handing over, handing
// over what nobody owns, and resolving a double claim in favour of one
// claimant are left alone.
func TestWithholdMoves(t *testing.T) {
	a := assign.Member{ID: "a", Owned: tps("t", 0, 1, 2), Generation: 4}
	b := assign.Member{ID: "b", Generation: 4}
	type plan = map[string]assign.Assignment
	for _, c := range []struct {
		name     string
		members  []assign.Member
		plan     plan
		want     plan
		withheld []string
	}{
		{"keep", []assign.Member{a, b}, plan{"a": {Partitions: tps("t", 0, 1, 2)}, "b": {}}, nil, nil},
		{"revoke first", []assign.Member{a, b}, plan{"a": {Partitions: tps("t", 0)}, "b": {}}, nil, nil},
		{"unowned to b", []assign.Member{a, b}, plan{"a": {Partitions: tps("t", 0, 1, 2)}, "b": {Partitions: tps("t", 3)}}, nil, nil},
		{"direct move", []assign.Member{a, b},
			plan{"a": {Partitions: tps("t", 0)}, "b": {Partitions: tps("t", 1, 3), UserData: []byte("u")}},
			plan{"a": {Partitions: tps("t", 0)}, "b": {Partitions: tps("t", 3), UserData: []byte("u")}},
			[]string{"t/1 from a to b"}},
		{"left out of the plan", []assign.Member{a, b},
			plan{"b": {Partitions: []assign.TopicPartitions{{Topic: "t", Partitions: []int32{2}}, {Topic: "u", Partitions: []int32{0}}}}},
			plan{"b": {Partitions: tps("u", 0)}},
			[]string{"t/2 from a to b"}},
		{"to an id outside members", []assign.Member{a, b},
			plan{"a": {}, "b": {}, "x": {Partitions: tps("t", 0)}},
			plan{"a": {}, "b": {}, "x": {}},
			[]string{"t/0 from a to x"}},
		{"double claim kept by one", []assign.Member{a, {ID: "b", Owned: tps("t", 1), Generation: 2}},
			plan{"a": {Partitions: tps("t", 0, 1, 2)}, "b": {}}, nil, nil},
	} {
		orig := fmt.Sprint(c.plan)
		got, withheld := withholdMoves(c.members, c.plan)
		want := c.want
		if want == nil {
			want = c.plan
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(withheld, c.withheld) {
			t.Errorf("%s: got %v withholding %q, want %v withholding %q", c.name, got, withheld, want, c.withheld)
		}
		if fmt.Sprint(c.plan) != orig {
			t.Errorf("%s: the assignor's plan was modified: %v", c.name, c.plan)
		}
	}
}

// TestCooperativeStickyNeedsNoWithholding: cohort's cooperative-sticky
// withholds what another member still claims by itself, so the leader's
// check never changes its plans, whatever the claims (stale generations,
// double claims, members subscribing to less).
func TestCooperativeStickyNeedsNoWithholding(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	topics := map[string]assign.Topic{"t": {Name: "t", Partitions: 12}, "u": {Name: "u", Partitions: 5}}
	as := sticky.NewCooperative()
	for i := 0; i < 500; i++ {
		n := 1 + rnd.IntN(5)
		members := make([]assign.Member, n)
		for j := range members {
			m := assign.Member{ID: string(rune('a' + j)), Topics: []string{"t", "u"}, Generation: int32(3 + rnd.IntN(3))}
			if rnd.IntN(4) == 0 {
				m.Topics = []string{"t"}
			}
			for _, name := range []string{"t", "u"} {
				for p := int32(0); p < topics[name].Partitions; p++ {
					if rnd.IntN(n+1) == 0 {
						m.Owned = append(m.Owned, assign.TopicPartitions{Topic: name, Partitions: []int32{p}})
					}
				}
			}
			members[j] = m
		}
		plan, err := as.Assign(members, topics)
		if err != nil {
			t.Fatal(err)
		}
		if _, withheld := withholdMoves(members, plan); withheld != nil {
			t.Fatalf("case %d: withheld %q\nmembers %+v\nplan %+v", i, withheld, members, plan)
		}
	}
}
