package assign_test

import (
	"testing"
	"time"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// TestPreferenceEngineNotQuadratic: inputs on which the engine shared by
// rack-aware and redundant used to rescan every unit against every other
// after each improvement: the old engine took 22.6 s and 36.2 s for these
// two on a loaded 2-core machine. Now tens of milliseconds; the bound leaves
// room for the race detector and a loaded machine.
func TestPreferenceEngineNotQuadratic(t *testing.T) {
	const bound = 3 * time.Second
	for _, c := range []struct {
		name     string
		a        assign.Assignor
		group    func(int, int) ([]assign.Member, map[string]assign.Topic)
		mem, par int
	}{
		{"rack-aware skewed", assign.RackAware(), skewedRackGroup, 10, 16000},
		{"redundant doubled", assign.Redundant(2, quiet()), doubledGroup, 60, 12800},
	} {
		ms, topics := c.group(c.mem, c.par)
		start := time.Now()
		res, err := c.a.Assign(ms, topics)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > bound {
			t.Errorf("%s, %d members, %d partitions: %v, want under %v", c.name, c.mem, c.par, d, bound)
		}
		owners := check(t, c.a.Name(), ms, topics, res)
		checkBalanced(t, c.a.Name(), ms, owners)
	}
}
