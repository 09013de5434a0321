package node

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
)

// TestMetricsStormLate: a storm flagged by a rebalance whose write became
// durable after its partition's state left the node (group.StormStatus.Late)
// counts in cohort_rebalance_storms_total (no node else counts it: the next
// owner finds the flag at its load) but not in cohort_groups_storming (the
// group is not served here), and leaves the flags of groups served here as
// they are, the same group's included if its partition came back.
func TestMetricsStormLate(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newRebalanceMetrics(reg, func() int { return 50 })
	gauge := func() float64 {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "cohort_groups_storming")
		if err != nil || n != 1 {
			t.Fatalf("gather: %v (%d series)", err, n)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "cohort_groups_storming" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	m.storm(group.StormStatus{Group: "here", Flagged: true, Count: 3, Threshold: 2})
	m.storm(group.StormStatus{Group: "moved", Flagged: true, Count: 3, Threshold: 2, Late: true})
	if v := testutil.ToFloat64(m.storms); v != 2 {
		t.Fatalf("cohort_rebalance_storms_total %v, want 2 (the late flag counts)", v)
	}
	if v := gauge(); v != 1 {
		t.Fatalf("cohort_groups_storming %v, want 1 (the late group is not served here)", v)
	}
	// The partition came back and its load found the flag: not counted
	// again, storming here now; a late flag of it changes nothing there.
	m.released(coordinator.PartitionFor("moved", 50))
	m.storm(group.StormStatus{Group: "moved", Flagged: true, Count: 3, Threshold: 2, Loaded: true})
	m.storm(group.StormStatus{Group: "moved", Flagged: true, Count: 3, Threshold: 2, Late: true})
	if v, g := testutil.ToFloat64(m.storms), gauge(); v != 3 || g != 2 {
		t.Fatalf("storms %v, storming %v; want 3, 2", v, g)
	}
}
