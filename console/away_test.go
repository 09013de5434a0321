package console

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
)

// A consumer group Reconciling only because a static member is away for a
// restart (epoch -2) is not shown as a rebalance in progress, nor counted as
// one on the groups page: the group page lists the member under "Static
// members away", with when it left and when its partitions go to the others.
func TestStaticMemberAwayIsNoRebalance(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	end := t0.Add(45 * time.Second)
	doc := &group.HistoryDoc{Version: group.HistoryDocVersion, Group: "g", Type: "consumer", State: "Reconciling",
		History: []group.RebalanceEvent{},
		Waiting: &group.Waiting{State: "Reconciling", Since: t0, Members: []group.WaitingMember{
			{MemberID: "s-1", InstanceID: "inst-1", ClientID: "s", Phase: "away", Since: t0, Deadline: &end}}}}
	var d kmsg.DescribeGroupsResponseGroup
	if err := group.SetHistoryTag(&d, doc); err != nil {
		t.Fatal(err)
	}
	h := historyOf(&d)
	if h.InProgress || len(h.Waiting) != 0 || len(h.Away) != 1 {
		t.Fatalf("history %+v", h)
	}
	var row GroupRow
	summarize(&row, h, t0.Add(time.Minute))
	if row.RebalancesPerHour != 0 {
		t.Errorf("a static member away counted as a rebalance: %+v", row)
	}
	page := renderGroupPage(t, &GroupDetail{GroupRow: GroupRow{ID: "g", State: "Reconciling", Type: "consumer"}, History: h})
	if strings.Contains(page, "Rebalance in progress") || strings.Contains(page, "has not completed") {
		t.Errorf("a static member away shown as a rebalance in progress:\n%s", page)
	}
	for _, want := range []string{"Static members away", "No rebalance is in progress",
		"left for a restart at 18:00:00 and keeps its partitions; they go to the others at 18:00:45 unless its instance id joins before"} {
		if !strings.Contains(page, want) {
			t.Errorf("the group page lacks %q", want)
		}
	}
}

// The groups page asks for no list entries (group.HistoryListsTag 0), so
// the away member is not listed, only counted: the node's OnlyAway flag
// still keeps the row from counting a rebalance in progress. Before the
// flag the row counted one from when the member left.
func TestStaticMemberAwayIsNoRebalanceOnTheGroupsPage(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	doc := &group.HistoryDoc{Version: group.HistoryDocVersion, Group: "g", Type: "consumer", State: "Reconciling",
		History: []group.RebalanceEvent{},
		Waiting: &group.Waiting{State: "Reconciling", Since: t0, Members: []group.WaitingMember{}, OmittedMembers: 1, OnlyAway: true}}
	var d kmsg.DescribeGroupsResponseGroup
	if err := group.SetHistoryTag(&d, doc); err != nil {
		t.Fatal(err)
	}
	h := historyOf(&d)
	var row GroupRow
	summarize(&row, h, t0.Add(time.Minute))
	if h.InProgress || row.RebalancesPerHour != 0 {
		t.Errorf("a static member away, not listed, counted as a rebalance: in progress %v, row %+v", h.InProgress, row)
	}
}
