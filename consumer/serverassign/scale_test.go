package serverassign

import (
	"fmt"
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
// about 5 s, the coordinator computing the target synchronously. The bound
// leaves room for the race detector and a loaded machine; the fixed code
// takes about 0.1 s.
func TestRangeSubscriptionsResolvedInLinearTime(t *testing.T) {
	const bound = 3 * time.Second
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
	for i := range members {
		members[i] = Member{ID: fmt.Sprintf("member-%04d", i), Topics: before}
		if i%2 == 1 {
			members[i].Topics = after
		}
	}
	start := time.Now()
	plan, err := Range().Assign(members, topics, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > bound {
		t.Errorf("%d members alternating between %d and %d topics: %v, want under %v", nmembers, ntopics, ntopics+1, d, bound)
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
