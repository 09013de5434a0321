package assign_test

import (
	"slices"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// Kafka's MemberInfo.compareTo orders static members by
// groupInstanceId.compareTo and dynamic ones by memberId.compareTo: Java
// String order, over UTF-16 code units. "😀" (U+1F600, surrogates
// 0xD83D 0xDE00) comes before "Ａ" (U+FF21) there, after it in Go's byte
// order. Range and roundrobin give the first member partition 0.
func TestRangeRoundRobinOrderIdsAsJava(t *testing.T) {
	fullwidthA, emoji := "\uFF21", "\U0001F600"
	static := []assign.Member{
		{ID: "m1", InstanceID: fullwidthA, Topics: []string{"t"}, Generation: -1},
		{ID: "m2", InstanceID: emoji, Topics: []string{"t"}, Generation: -1},
	}
	dynamic := []assign.Member{
		{ID: "m-" + fullwidthA, Topics: []string{"t"}, Generation: -1},
		{ID: "m-" + emoji, Topics: []string{"t"}, Generation: -1},
	}
	topics := map[string]assign.Topic{"t": {Name: "t", Partitions: 2}}
	for _, c := range []struct {
		members []assign.Member
		first   string
	}{{static, "m2"}, {dynamic, "m-" + emoji}} {
		for _, a := range []assign.Assignor{assign.Range(), assign.RoundRobin()} {
			out, err := a.Assign(c.members, topics)
			if err != nil {
				t.Fatal(err)
			}
			got := out[c.first].Partitions
			if len(got) != 1 || !slices.Equal(got[0].Partitions, []int32{0}) {
				t.Errorf("%s: Kafka gives t-0 to %q; got plan %v", a.Name(), c.first, flat(out))
			}
		}
	}
}
