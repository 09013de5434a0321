package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
)

// A consumer group Reconciling only because a static member is away for a
// restart is not rebalancing: `group why` says so, names the member, when it
// left and when its session ends, instead of "a rebalance is in progress
// since" and "has not reached its target assignment". Beside a rebalance, the
// member away is told apart from those the rebalance waits for.
func TestWhyStaticMemberAway(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	left := now.Add(-2 * time.Second)
	end := left.Add(45 * time.Second)
	away := group.WaitingMember{MemberID: "m-s", InstanceID: "inst-1", ClientID: "s1", ClientHost: "/127.0.0.1",
		Phase: "away", Since: left, Deadline: &end}
	doc := &group.HistoryDoc{Group: "app", Type: "consumer", State: "Reconciling",
		Waiting: &group.Waiting{State: "Reconciling", Since: left, Members: []group.WaitingMember{away}}}
	got := nowSentence(doc, "", nil, timeFmt{now})
	for _, want := range []string{
		"Now the group is Reconciling, but no rebalance is in progress",
		"member m-s (client s1, host 127.0.0.1, instance inst-1) left at 09:59:58.000 and keeps its partitions",
		"runs out at 10:00:43.000, the group then gives its partitions to the others.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("away only: %q\nlacks %q", got, want)
		}
	}
	if strings.Contains(got, "rebalance is in progress since") || strings.Contains(got, "has not reached") {
		t.Errorf("away only, told as a rebalance: %q", got)
	}

	start := now.Add(-time.Second)
	cause := group.Cause{Kind: group.CauseMemberJoined, At: start, MemberID: "m-c"}
	doc.Waiting = &group.Waiting{State: "Reconciling", Since: start, Cause: &cause, Members: []group.WaitingMember{
		{MemberID: "m-c", Phase: "assign", Since: start}, away}}
	got = nowSentence(doc, "", nil, timeFmt{now})
	for _, want := range []string{
		"a rebalance is in progress since 09:59:59.000",
		"It waits for member m-c, which has not reached its target assignment",
		"Static member m-s (client s1, host 127.0.0.1, instance inst-1) is away for a restart (epoch -2) since 09:59:58.000, keeping its partitions",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("beside a rebalance: %q\nlacks %q", got, want)
		}
	}
}
