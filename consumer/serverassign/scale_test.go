package serverassign

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// TestRangeSubscriptionsResolvedInLinearTime: range resolves every
// member's topic list against the metadata. It used to check each topic it
// added against the ones already added for that member (quadratic in the
// list's length) and to reuse a resolution only for a member whose list
// equals the previous member's in range order. So a group mid-way through a
// subscription change, its members alternating between two long lists (a
// rolling deploy adding one topic to a subscription of thousands),
// paid the quadratic cost once per member: 400 members on 8,000 topics took
// about 5 s, the coordinator computing the target synchronously.
//
// The test compares, in the same run, that group with one whose members
// all hold the same list (one resolution, old code or new): the
// alternating group may take at most maxRatio times as long. A fixed bound
// on the wall clock (3 s, before) failed the fixed code under -race on a
// loaded 2-core machine, where it took up to 2.2 s; a ratio of two
// measurements under the same load does not move with the load. Each is
// the fastest of up to three tries, to leave out a pause of the machine.
func TestRangeSubscriptionsResolvedInLinearTime(t *testing.T) {
	const maxRatio = 10
	const nmembers, ntopics = 400, 8000
	topics := map[string]Topic{}
	var names []string
	for i := range ntopics + 1 {
		n := fmt.Sprintf("topic-%05d", i)
		names = append(names, n)
		topics[n] = Topic{Name: n, Partitions: 1}
	}
	before, after := names[:ntopics], names
	members := make([]Member, nmembers)
	same := make([]Member, nmembers)
	for i := range members {
		members[i] = Member{ID: fmt.Sprintf("member-%04d", i), Topics: before}
		if i%2 == 1 {
			members[i].Topics = after
		}
		same[i] = Member{ID: members[i].ID, Topics: after}
	}
	assign := func(ms []Member) (map[string]map[string][]int32, time.Duration) {
		start := time.Now()
		plan, err := Range().Assign(ms, topics, nil)
		if err != nil {
			t.Fatal(err)
		}
		return plan, time.Since(start)
	}
	var plan map[string]map[string][]int32
	fastSame, fastAlt := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	for try := 1; ; try++ {
		_, d := assign(same)
		fastSame = min(fastSame, d)
		plan, d = assign(members)
		fastAlt = min(fastAlt, d)
		if fastAlt <= maxRatio*fastSame {
			t.Logf("alternating %v, same list %v (fastest of %d)", fastAlt, fastSame, try)
			break
		}
		if try == 3 {
			t.Errorf("%d members alternating between %d and %d topics: %v, %.0f times the %v of %d members on one list; want at most %d times",
				nmembers, ntopics, ntopics+1, fastAlt, float64(fastAlt)/float64(fastSame), fastSame, nmembers, maxRatio)
			break
		}
	}
	// One partition per topic goes to the topic's first subscriber: the
	// first member for the shared topics, the second for the new one.
	if got := len(plan[members[0].ID]); got != ntopics {
		t.Errorf("%s has %d topics, want %d", members[0].ID, got, ntopics)
	}
	if got := plan[members[1].ID]; len(got) != 1 || !slices.Equal(got[names[ntopics]], []int32{0}) {
		t.Errorf("%s has %v, want only %s partition 0", members[1].ID, got, names[ntopics])
	}
	for _, m := range members[2:] {
		if len(plan[m.ID]) != 0 {
			t.Fatalf("%s has %v, want nothing", m.ID, plan[m.ID])
		}
	}
}
