package workers_test

import (
	"fmt"

	"github.com/cohort-dev/cohort/workers"
)

// A new member joins a pool where one member runs everything: the first
// round only takes resources away from the busy member; once it has stopped
// them (and announces only what it kept), the second round hands them over.
func ExamplePlan() {
	rs := []workers.Resource{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	first := workers.Plan(map[string][]string{"m1": {"a", "b", "c", "d"}, "m2": nil}, rs)
	fmt.Println("round 1:", first)
	second := workers.Plan(first, rs)
	fmt.Println("round 2:", second)
	// Output:
	// round 1: map[m1:[c d] m2:[]]
	// round 2: map[m1:[c d] m2:[a b]]
}
