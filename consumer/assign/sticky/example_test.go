package sticky_test

import (
	"fmt"

	"github.com/cohort-dev/cohort/consumer"
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

// A leader that only needs each member's SyncGroup bytes takes the plan
// member by member and encodes it as it comes, without holding every
// member's assignment (what the kgobalancer adapter does). With more than
// one worker, emit runs on several goroutines: state is kept per worker.
func Example_streamed() {
	topics := map[string]assign.Topic{"orders": {Name: "orders", Partitions: 6}}
	members := []assign.Member{
		{ID: "a", Topics: []string{"orders"}, Generation: -1},
		{ID: "b", Topics: []string{"orders"}, Generation: -1},
	}
	const workers = 2
	var writers [workers]*consumer.AssignmentWriter
	for w := range writers {
		writers[w], _ = consumer.NewAssignmentWriter(consumer.MaxVersion)
	}
	syncBytes := make([][]byte, len(members))
	err := sticky.New().(assign.Streamer).AssignEach(members, topics, workers, func(w, i int, a assign.Assignment) error {
		var err error
		syncBytes[i], err = writers[w].Encode(a) // a is valid only during the call
		return err
	})
	if err != nil {
		panic(err)
	}
	for i, b := range syncBytes {
		a, err := consumer.DecodeAssignment(b)
		if err != nil {
			panic(err)
		}
		fmt.Println(members[i].ID, len(b), "bytes:", a.Partitions)
	}
	// Output:
	// a 34 bytes: [{orders [0 1 2]}]
	// b 34 bytes: [{orders [3 4 5]}]
}
