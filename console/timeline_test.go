package console

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
)

// checkTimeline asserts the group page's rebalance timeline after the
// kill of the consumer whose client id is victim (see
// TestBrowserDuringRebalance): the newest entry that names the victim
// is a session timeout, and the survivors gained the partitions the victim
// held (moved). A node that records no history says so on the page, and
// then only that note is checked.
func checkTimeline(t *testing.T, b *browser, url, victim string, victimParts []string) {
	t.Helper()
	h := b.html(url)
	if strings.Contains(h, `id="timeline-empty"`) && strings.Contains(h, "recorded no rebalance history") {
		t.Logf("the node records no rebalance history yet: the timeline shows the note %q", b.text("#timeline-empty"))
		return
	}
	h = b.until("the kill on the timeline", url, func(h string) bool {
		return strings.Contains(h, `data-cause="session_timeout"`)
	})
	entry := b.text(`#timeline li[data-cause="session_timeout"]`)
	if !strings.Contains(entry, "session timeout") || !strings.Contains(entry, victim) {
		t.Errorf("the timeline entry of the kill reads %q; want the cause session timeout naming %s", entry, victim)
	}
	if first := b.text(`#timeline > li`); !strings.Contains(first, "session timeout") {
		t.Errorf("the newest timeline entry is %q, want the kill's session timeout", first)
	}
	if strings.Contains(h, `id="timeline-empty"`) {
		t.Errorf("the page has both a timeline and the no-history note")
	}
	kill := b.outerHTML(`#timeline li[data-cause="session_timeout"]`)
	gained := map[string]bool{}
	for _, m := range regexp.MustCompile(`<span class="added">\+events ([0-9,]+)</span>`).FindAllStringSubmatch(kill, -1) {
		for _, p := range strings.Split(m[1], ",") {
			gained[p] = true
		}
	}
	for _, p := range victimParts {
		if !gained[p] {
			t.Errorf("the kill's entry does not show partition %s (the victim's) moving to a survivor: %q", p, b.text(`#timeline li[data-cause="session_timeout"] .moves`))
		}
	}
}

// TestTimelineRendering: a HistoryDoc as the node sends it becomes the
// group page's timeline: newest first, the cause in words with the member,
// its last heartbeat, the phases, who was waited for, the evicted member
// and the partitions each member gained and lost; a storm is flagged and
// what a rebalance in progress waits for is listed.
func TestTimelineRendering(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	hb := t0.Add(-2 * time.Second)
	deadline := t0.Add(time.Minute)
	doc := &group.HistoryDoc{Version: group.HistoryDocVersion, Group: "g", Type: "classic", State: "PreparingRebalance",
		History: []group.RebalanceEvent{
			{Seq: 1, Generation: 1, Start: t0.Add(-time.Minute), Outcome: "stable", Cause: group.Cause{Kind: group.CauseMemberJoined, ClientID: "a", MemberID: "a-1", Reason: "need to re-join"},
				Members: []group.MemberChange{{MemberID: "a-1", ClientID: "a", Decoded: true, New: true, Added: []group.TopicPartitions{{Topic: "t", Partitions: []int32{1, 0}}}}}},
			{Seq: 2, Generation: 2, Start: t0, Outcome: "stable", DurationMs: 1500, JoinMs: 1200, SyncMs: 300,
				Cause:     group.Cause{Kind: group.CauseSessionTimeout, ClientID: "victim", ClientHost: "/10.0.0.7", MemberID: "victim-1", LastHeartbeat: &hb},
				WaitedFor: []group.Wait{{MemberID: "slow-1", Phase: "join", WaitedMs: 1200}},
				Evicted:   []string{"victim-1"},
				Members: []group.MemberChange{
					{MemberID: "a-1", ClientID: "a", Decoded: true, Added: []group.TopicPartitions{{Topic: "t", Partitions: []int32{2}}}},
					{MemberID: "b-1", ClientID: "b", Decoded: true}, // unchanged: not listed
				}},
		},
		Storm:   group.StormStatus{Flagged: true, Count: 12, Threshold: 10, WindowMs: 300000, Causes: map[group.CauseKind]int{group.CauseSessionTimeout: 12}},
		Waiting: &group.Waiting{State: "PreparingRebalance", Since: t0.Add(10 * time.Second), Cause: &group.Cause{Kind: group.CauseMemberLeft, ClientID: "c", MemberID: "c-1", Reason: "shutting down"}, Members: []group.WaitingMember{{MemberID: "slow-1", ClientID: "slow", Phase: "join", Since: t0, Deadline: &deadline}}},
	}
	var d kmsg.DescribeGroupsResponseGroup
	if err := group.SetHistoryTag(&d, doc); err != nil {
		t.Fatal(err)
	}
	h := historyOf(&d)
	if len(h.Events) != 2 || h.Events[0].Seq != 2 || !h.Storm || len(h.Waiting) != 1 {
		t.Fatalf("history %+v", h)
	}
	var row GroupRow
	summarize(&row, h, t0.Add(30*time.Minute))
	// The rebalance in progress counts: it started, and the history
	// records it only when it completes.
	if !row.HasHistory || !row.LastRebalance.Equal(t0.Add(10*time.Second)) || row.RebalancesPerHour != 3 || !row.Storm {
		t.Errorf("summary %+v", row)
	}
	row = GroupRow{}
	summarize(&row, h, t0.Add(time.Hour+5*time.Second))
	if row.RebalancesPerHour != 1 {
		t.Errorf("an hour later only the one in progress counts: %+v", row)
	}
	row = GroupRow{}
	summarize(&row, History{InProgress: true, InProgressSince: t0}, t0.Add(time.Second))
	if !row.HasHistory || !row.LastRebalance.Equal(t0) || row.RebalancesPerHour != 1 {
		t.Errorf("a group's first rebalance, in progress: %+v", row)
	}
	page := renderGroupPage(t, &GroupDetail{GroupRow: GroupRow{ID: "g", State: "PreparingRebalance", Type: "classic", Generation: 2}, History: h})
	first := page[strings.Index(page, `<ol class="timeline"`):]
	first = first[:strings.Index(first, "</li>\n")]
	for _, want := range []string{`data-cause="session_timeout"`, "#2", "generation 2", "session timeout", "victim on 10.0.0.7 (victim-1)",
		"last heartbeat 17:59:58.000 UTC", "took 1.5s (join 1.2s, sync 300ms)", "waited for slow-1 (join, 1.2s)", "evicted victim-1",
		`<span class="added">+t 2</span>`} {
		if !strings.Contains(first, want) {
			t.Errorf("the newest timeline entry lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "b b-1") {
		t.Errorf("an unchanged member is listed as moved")
	}
	for _, want := range []string{`id="storm"`, "12 rebalances within 5m0s (more than 10): session timeout 12", `id="waiting"`,
		"slow (slow-1) has not completed join since 18:00:00; evicted at 18:01:00",
		`started by <span class="tag cause">member left</span> c (c-1); reason: shutting down`, "member joined", "reason: need to re-join", "+t 0,1"} {
		if !strings.Contains(page, want) {
			t.Errorf("the group page lacks %q", want)
		}
	}
	// No history tag: the note says so.
	if h := historyOf(&kmsg.DescribeGroupsResponseGroup{}); len(h.Events) != 0 || !strings.Contains(h.Note, "no rebalance history") {
		t.Errorf("without the tag: %+v", h)
	}
	// A node that keeps no history (--group-history 0) says so, not
	// "no rebalance recorded yet".
	var off kmsg.DescribeGroupsResponseGroup
	if err := group.SetHistoryTag(&off, &group.HistoryDoc{Version: 1, Group: "g", Type: "classic", State: "Stable",
		History: []group.RebalanceEvent{}, HistoryOff: true}); err != nil {
		t.Fatal(err)
	}
	if h := historyOf(&off); !strings.Contains(h.Note, "keeps no rebalance history (cohort serve --group-history 0)") {
		t.Errorf("history off: %+v", h)
	}
	// Events stored before history was turned off are shown, as older.
	older := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	if err := group.SetHistoryTag(&off, &group.HistoryDoc{Version: 1, Group: "g", Type: "classic", State: "Stable", HistoryOff: true,
		History: []group.RebalanceEvent{{Seq: 1, Start: older, Generation: 1, Outcome: "completed", Cause: group.Cause{Kind: group.CauseMemberJoined, At: older}}}}); err != nil {
		t.Fatal(err)
	}
	if h := historyOf(&off); len(h.Events) != 1 || !strings.Contains(h.Note, "recorded before") || strings.Contains(h.Note, "no rebalance is recorded") {
		t.Errorf("history off with older events: %+v", h)
	}
}

// renderGroupPage is the group page of g, as the console serves it.
func renderGroupPage(t *testing.T, g *GroupDetail) string {
	t.Helper()
	var b strings.Builder
	if err := New(nil, nil, nil).tmpl["group"].Execute(&b, pageData{Title: "Group " + g.ID, Body: struct {
		G         *GroupDetail
		OffsetErr string
	}{G: g}}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// timelineEntries are the <li> entries of a rendered timeline, newest
// first, each with its markup.
func timelineEntries(t *testing.T, page string) []string {
	t.Helper()
	i := strings.Index(page, `<ol class="timeline"`)
	if i < 0 {
		t.Fatalf("the page has no timeline:\n%s", page)
	}
	ol := page[i:]
	ol = ol[:strings.Index(ol, "</ol>")]
	return regexp.MustCompile(`(?s)<li data-cause=.*?</li>\n`).FindAllString(ol, -1)
}

// TestTimelineConsumerWording: a consumer-protocol group's event is a
// group-epoch bump whose phases are the target's computation and the
// members reaching it (docs/history.md), and the timeline words it so, as
// cohort group history and why do; a classic event of the same group
// (recorded before an upgrade to the consumer protocol) keeps the words of a
// classic rebalance.
func TestTimelineConsumerWording(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	doc := &group.HistoryDoc{Version: group.HistoryDocVersion, Group: "g", Type: "consumer", State: "Stable",
		History: []group.RebalanceEvent{
			{Seq: 1, Type: "classic", Generation: 4, Start: t0.Add(-time.Minute), Outcome: "stable", DurationMs: 900, JoinMs: 600, SyncMs: 300,
				Cause: group.Cause{Kind: group.CauseMemberJoined, MemberID: "a-1"}},
			{Seq: 2, Type: "consumer", FromGeneration: 5, Generation: 6, Start: t0, Outcome: "stable", DurationMs: 2100, JoinMs: 100, SyncMs: 2000,
				Cause:     group.Cause{Kind: group.CauseMemberJoined, MemberID: "b-1"},
				WaitedFor: []group.Wait{{MemberID: "a-1", Phase: "revoke", WaitedMs: 2000}}},
		},
		Storm: group.StormStatus{Count: 2, Threshold: 10, WindowMs: 300000}}
	var d kmsg.DescribeGroupsResponseGroup
	if err := group.SetHistoryTag(&d, doc); err != nil {
		t.Fatal(err)
	}
	page := renderGroupPage(t, &GroupDetail{GroupRow: GroupRow{ID: "g", State: "Stable", Type: "consumer", Generation: 6}, History: historyOf(&d)})
	entries := timelineEntries(t, page)
	if len(entries) != 2 {
		t.Fatalf("%d timeline entries, want 2:\n%s", len(entries), page)
	}
	consumer, classic := entries[0], entries[1]
	for _, want := range []string{"#2", "group epoch 6", "took 2.1s (target computed after 100ms, reached by every member 2s later)", "waited for a-1 (revoke, 2s)"} {
		if !strings.Contains(consumer, want) {
			t.Errorf("the consumer event lacks %q:\n%s", want, consumer)
		}
	}
	// The epoch and the phases (the cause, "member joined", is the same
	// for both kinds).
	epochAndPhases := regexp.MustCompile(`<div class="(when|phases)">.*</div>`).FindAllString(consumer, -1)
	if len(epochAndPhases) != 2 {
		t.Fatalf("the consumer event's when and phases: %q", epochAndPhases)
	}
	for _, classicWord := range []string{"generation", "join", "sync"} {
		if s := strings.Join(epochAndPhases, "\n"); strings.Contains(s, classicWord) {
			t.Errorf("the consumer event says %q, a classic rebalance's word:\n%s", classicWord, s)
		}
	}
	for _, want := range []string{"#1", "generation 4", "took 900ms (join 600ms, sync 300ms)"} {
		if !strings.Contains(classic, want) {
			t.Errorf("the classic event lacks %q:\n%s", want, classic)
		}
	}
	if strings.Contains(classic, "epoch") || strings.Contains(classic, "target") {
		t.Errorf("the classic event uses the consumer protocol's words:\n%s", classic)
	}
}

// TestTimelineConsumerEarlierTarget: a consumer event whose 12.2 s before
// the last target went to a member fenced for not revoking (earlier target in
// force 10 s) reads so on the timeline, with that member waited for; before,
// it read "target computed after 12.2s", as if the assignor had been slow.
func TestTimelineConsumerEarlierTarget(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	doc := &group.HistoryDoc{Version: group.HistoryDocVersion, Group: "g", Type: "consumer", State: "Stable",
		History: []group.RebalanceEvent{
			{Seq: 1, Type: "consumer", FromGeneration: 1, Generation: 3, Start: t0, Outcome: "stable", DurationMs: 12215, JoinMs: 12200, SyncMs: 15,
				EarlierTargetMs: 10000, Cause: group.Cause{Kind: group.CauseMemberJoined, MemberID: "vP3y"}, Evicted: []string{"slowC"},
				WaitedFor: []group.Wait{{MemberID: "slowC", Phase: "revoke", WaitedMs: 10000, Evicted: true}, {MemberID: "vP3y", Phase: "assign", WaitedMs: 15}}},
		},
		Storm: group.StormStatus{Count: 1, Threshold: 10, WindowMs: 300000}}
	var d kmsg.DescribeGroupsResponseGroup
	if err := group.SetHistoryTag(&d, doc); err != nil {
		t.Fatal(err)
	}
	page := renderGroupPage(t, &GroupDetail{GroupRow: GroupRow{ID: "g", State: "Stable", Type: "consumer", Generation: 3}, History: historyOf(&d)})
	entries := timelineEntries(t, page)
	if len(entries) != 1 {
		t.Fatalf("%d timeline entries, want 1:\n%s", len(entries), page)
	}
	for _, want := range []string{"members reconciling to earlier targets for 10s, last target computed after 12.2s, reached by every member 15ms later",
		"waited for slowC (revoke, 10s) evicted, vP3y (assign, 15ms)"} {
		if !strings.Contains(entries[0], want) {
			t.Errorf("the event lacks %q:\n%s", want, entries[0])
		}
	}
}
