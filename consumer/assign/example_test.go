package assign_test

import (
	"fmt"

	"github.com/cohort-dev/cohort/consumer/assign"
)

func ExampleRange() {
	members := []assign.Member{
		{ID: "m2", Topics: []string{"orders"}},
		{ID: "m1", Topics: []string{"orders", "refunds"}},
	}
	topics := map[string]assign.Topic{
		"orders":  {Name: "orders", Partitions: 3},
		"refunds": {Name: "refunds", Partitions: 2},
	}
	res, err := assign.Range().Assign(members, topics)
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"m1", "m2"} {
		fmt.Println(id, res[id].Partitions)
	}
	// Output:
	// m1 [{orders [0 1]} {refunds [0 1]}]
	// m2 [{orders [2]}]
}

func ExampleCopartition() {
	// clicks and views are keyed by user id with the same partitioner:
	// partition p of both must be joined by one consumer.
	a := assign.Copartition([]string{"clicks", "views"})
	members := []assign.Member{
		{ID: "m1", Topics: []string{"clicks", "views"}},
		{ID: "m2", Topics: []string{"clicks", "views"}},
	}
	topics := map[string]assign.Topic{
		"clicks": {Name: "clicks", Partitions: 4},
		"views":  {Name: "views", Partitions: 4},
	}
	res, err := a.Assign(members, topics)
	if err != nil {
		panic(err)
	}
	fmt.Println("m1", res["m1"].Partitions)
	fmt.Println("m2", res["m2"].Partitions)

	// Different partition counts cannot be co-partitioned.
	topics["views"] = assign.Topic{Name: "views", Partitions: 6}
	_, err = a.Assign(members, topics)
	fmt.Println(err)
	// Output:
	// m1 [{clicks [0 1]} {views [0 1]}]
	// m2 [{clicks [2 3]} {views [2 3]}]
	// copartition: co-partitioned topics have different partition counts: clicks=4 views=6; give them the same partition count, or put them in separate co-partitioned sets
}

func ExampleRedundant() {
	members := []assign.Member{{ID: "a", Topics: []string{"docs"}}, {ID: "b", Topics: []string{"docs"}}, {ID: "c", Topics: []string{"docs"}}}
	res, _ := assign.Redundant(2, nil).Assign(members, map[string]assign.Topic{"docs": {Name: "docs", Partitions: 3}})
	for _, id := range []string{"a", "b", "c"} {
		fmt.Println(id, res[id].Partitions)
	}
	// Output:
	// a [{docs [0 1]}]
	// b [{docs [0 2]}]
	// c [{docs [1 2]}]
}
