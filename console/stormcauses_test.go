package console

import (
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStormLineNamesEvictions: a storm whose rebalances were started by
// members joining, while members were evicted for the rebalance timeout
// during them (a slow member evicted at each rebalance and rejoining as a
// new member): the group page's storm line must name the evictions too, as
// `cohort group why` and the node's log do. It listed only what started
// each rebalance, so the cause an on-call engineer had to act on was not on
// the page at all (staged with franz-go: "member joined 5, member left 1,
// metadata changed 2", and not a word of the two rebalance timeouts).
func TestStormLineNamesEvictions(t *testing.T) {
	doc := &group.HistoryDoc{Version: group.HistoryDocVersion, Group: "g", Type: "classic", State: "Stable", History: []group.RebalanceEvent{},
		Storm: group.StormStatus{Flagged: true, Count: 8, Threshold: 3, WindowMs: 300000,
			StartedBy: map[group.CauseKind]int{group.CauseMemberJoined: 5, group.CauseMemberLeft: 1, group.CauseMetadataChanged: 2},
			Causes: map[group.CauseKind]int{group.CauseMemberJoined: 5, group.CauseMemberLeft: 3, group.CauseMetadataChanged: 9,
				group.CauseRebalanceTimeout: 2}}}
	var d kmsg.DescribeGroupsResponseGroup
	if err := group.SetHistoryTag(&d, doc); err != nil {
		t.Fatal(err)
	}
	h := historyOf(&d)
	want := "8 rebalances within 5m0s (more than 3): member joined 5, member left 1, metadata changed 2;" +
		" all causes, with the rejoins during them: member joined 5, member left 3, metadata changed 9, rebalance timeout 2"
	if h.StormOf != want {
		t.Fatalf("storm line\n%q\nwant\n%q", h.StormOf, want)
	}
	page := renderGroupPage(t, &GroupDetail{GroupRow: GroupRow{ID: "g", State: "Stable", Type: "classic"}, History: h})
	if !strings.Contains(page, "rebalance timeout 2") {
		t.Errorf("the page's storm line lacks the evictions")
	}
	// Where every cause started a rebalance, the line is as before.
	doc.Storm.Causes = doc.Storm.StartedBy
	if err := group.SetHistoryTag(&d, doc); err != nil {
		t.Fatal(err)
	}
	if h := historyOf(&d); h.StormOf != "8 rebalances within 5m0s (more than 3): member joined 5, member left 1, metadata changed 2" {
		t.Errorf("storm line without other causes: %q", h.StormOf)
	}
}
