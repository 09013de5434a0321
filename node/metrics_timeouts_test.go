package node

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cohort-dev/cohort/group"
)

// TestMetricsMemberTimeouts: members removed for a timeout are counted by
// type and timeout whether the removal started the rebalance (its cause) or
// came while it was in progress (a more cause), the common case of a slow
// member evicted at the join barrier of a rebalance that a join started.
// cohort_rebalances_total counts only what started each rebalance, so in a
// storm of a slow franz-go member evicted at every rebalance (staged: 4
// rebalance-timeout evictions, 1 consumer-protocol fence) it read
// member_joined and metadata_changed only, and no metric showed a timeout.
func TestMetricsMemberTimeouts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newRebalanceMetrics(reg, func() int { return 50 })
	m.observe(group.RebalanceEvent{Type: "classic", Cause: group.Cause{Kind: group.CauseMemberJoined},
		MoreCauses: []group.Cause{{Kind: group.CauseMetadataChanged}, {Kind: group.CauseRebalanceTimeout}, {Kind: group.CauseRebalanceTimeout}}})
	m.observe(group.RebalanceEvent{Type: "classic", Cause: group.Cause{Kind: group.CauseSessionTimeout},
		MoreCauses: []group.Cause{{Kind: group.CauseSyncTimeout}, {Kind: group.CauseLeaderNotSynced}}})
	m.observe(group.RebalanceEvent{Type: "consumer", Cause: group.Cause{Kind: group.CauseMemberJoined},
		MoreCauses: []group.Cause{{Kind: group.CauseRebalanceTimeout}, {Kind: group.CauseMemberLeft}}})
	// Causes past the 64 an event keeps count too.
	m.observe(group.RebalanceEvent{Type: "consumer", Cause: group.Cause{Kind: group.CauseSessionTimeout},
		CutCauses: map[group.CauseKind]int{group.CauseSessionTimeout: 40, group.CauseMemberLeft: 3}})
	want := `
# HELP cohort_group_member_timeouts_total Members the coordinator removed for a timeout, by group type and timeout, whether the removal started a rebalance or came during one.
# TYPE cohort_group_member_timeouts_total counter
cohort_group_member_timeouts_total{timeout="leader_not_synced",type="classic"} 1
cohort_group_member_timeouts_total{timeout="leader_not_synced",type="consumer"} 0
cohort_group_member_timeouts_total{timeout="rebalance_timeout",type="classic"} 2
cohort_group_member_timeouts_total{timeout="rebalance_timeout",type="consumer"} 1
cohort_group_member_timeouts_total{timeout="session_timeout",type="classic"} 1
cohort_group_member_timeouts_total{timeout="session_timeout",type="consumer"} 41
cohort_group_member_timeouts_total{timeout="sync_timeout",type="classic"} 1
cohort_group_member_timeouts_total{timeout="sync_timeout",type="consumer"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cohort_group_member_timeouts_total"); err != nil {
		t.Fatal(err)
	}
	// What started each rebalance is counted as before.
	if v := testutil.ToFloat64(m.count[rebalanceKey{"classic", group.CauseMemberJoined}]); v != 1 {
		t.Fatalf("cohort_rebalances_total{classic,member_joined} %v, want 1", v)
	}
}
