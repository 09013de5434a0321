package sticky_test

import (
	"fmt"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
)

// A third member joins a group of two. The sticky assignor moves only the
// two partitions the newcomer needs; the cooperative one first takes them
// away from their owners and hands them over in the next rebalance.
func Example() {
	topics := map[string]assign.Topic{"orders": {Name: "orders", Partitions: 6}}
	owned := func(ps ...int32) []assign.TopicPartitions {
		return []assign.TopicPartitions{{Topic: "orders", Partitions: ps}}
	}
	members := []assign.Member{
		{ID: "a", Topics: []string{"orders"}, Owned: owned(0, 1, 2), Generation: 4},
		{ID: "b", Topics: []string{"orders"}, Owned: owned(3, 4, 5), Generation: 4},
		{ID: "c", Topics: []string{"orders"}, Generation: -1},
	}
	for _, a := range []assign.Assignor{sticky.New(), sticky.NewCooperative()} {
		plan, err := a.Assign(members, topics)
		if err != nil {
			panic(err)
		}
		fmt.Println(a.Name())
		for _, id := range []string{"a", "b", "c"} {
			fmt.Println(" ", id, plan[id].Partitions)
		}
	}
	// Output:
	// sticky
	//   a [{orders [0 1]}]
	//   b [{orders [3 4]}]
	//   c [{orders [2 5]}]
	// cooperative-sticky
	//   a [{orders [0 1]}]
	//   b [{orders [3 4]}]
	//   c []
}
