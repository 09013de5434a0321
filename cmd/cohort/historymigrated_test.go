package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
)

// TestHistoryTableAfterAProtocolMove: a group that moved online from the
// classic protocol to the consumer protocol (a KIP-848 member joined it
// once it was empty) keeps its classic events. The table named its number
// column after the group's type now, EPOCHS, above rows that were classic
// generations (the walkthrough's group "orders": rows 1-6 generations 0->1
// to 5->6 under EPOCHS, then epochs 0->1, 1->2). A table whose events are of
// both protocols now says which each number is; one of a single protocol is
// as before.
func TestHistoryTableAfterAProtocolMove(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	ev := func(seq int, typ string, from, to int32) group.RebalanceEvent {
		at := t0.Add(time.Duration(seq) * time.Minute)
		return group.RebalanceEvent{Seq: uint64(seq), Group: "g", Type: typ, FromGeneration: from, Generation: to,
			Start: at, End: at, Outcome: "stable", Cause: group.Cause{Kind: group.CauseMemberJoined, At: at, MemberID: "m"}}
	}
	table := func(doc *group.HistoryDoc) (header string, rows []string) {
		t.Helper()
		var b strings.Builder
		if err := writeHistoryTable(&b, doc); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(b.String(), "\n")
		return strings.Join(strings.Fields(lines[0]), " "), lines[1 : 1+len(doc.History)]
	}
	field := func(row string) string { return strings.Fields(row)[2] }

	moved := &group.HistoryDoc{Version: 1, Group: "g", Type: "consumer", State: "Empty",
		History: []group.RebalanceEvent{ev(1, "classic", 4, 5), ev(2, "consumer", 0, 1)}}
	header, rows := table(moved)
	if !strings.HasPrefix(header, "SEQ START GENERATIONS/EPOCHS ") {
		t.Errorf("header of a table of classic and consumer events: %q, want the third column GENERATIONS/EPOCHS", header)
	}
	if got := field(rows[0]); got != "gen:4->5" {
		t.Errorf("classic event of a moved group: %q, want %q", got, "gen:4->5")
	}
	if got := field(rows[1]); got != "epoch:0->1" {
		t.Errorf("consumer event of a moved group: %q, want %q", got, "epoch:0->1")
	}

	for _, c := range []struct{ typ, col string }{{"classic", "GENERATIONS"}, {"consumer", "EPOCHS"}} {
		doc := &group.HistoryDoc{Version: 1, Group: "g", Type: c.typ, State: "Empty",
			History: []group.RebalanceEvent{ev(1, c.typ, 0, 1), ev(2, "", 1, 2)}}
		header, rows := table(doc)
		if !strings.HasPrefix(header, "SEQ START "+c.col+" ") {
			t.Errorf("%s group: header %q, want %s", c.typ, header, c.col)
		}
		if f := strings.Fields(rows[1])[2]; f != "1->2" {
			t.Errorf("%s group: %q, want 1->2", c.typ, f)
		}
	}
}
