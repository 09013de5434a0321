package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
)

// TestHistoryRejoinAfterEviction: a classic member stops (its 10 s session
// runs out) and the same client comes back 41 s later with a new member id,
// on a live node whose clock is fake. group history's REJOIN-OF names the
// evicted member, its JSON carries the link on the join's cause, and why
// tells the join as a rejoin after that eviction.
func TestHistoryRejoinAfterEviction(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	n, clk, c := fakeClockNode(t, t0, 52)
	const g = "rg"

	first := newRawMember(t, n.Addr(), "app", 10*time.Second)
	j, err := first.join(g)
	must(t, err)
	must(t, first.sync(g, j.Generation, map[string][]int32{first.id: {0, 1}}))
	c.awaitHistory(g, "first join", func(d group.HistoryDoc) bool { return len(d.History) == 1 })
	clk.Advance(10 * time.Second) // its session runs out: the group is Empty
	c.awaitHistory(g, "the eviction", func(d group.HistoryDoc) bool { return len(d.History) == 2 })

	clk.Advance(41 * time.Second)
	again := newRawMember(t, n.Addr(), "app", 10*time.Second)
	j, err = again.join(g)
	must(t, err)
	must(t, again.sync(g, j.Generation, map[string][]int32{again.id: {0, 1}}))
	doc := c.awaitHistory(g, "the rejoin", func(d group.HistoryDoc) bool { return len(d.History) == 3 })

	r := doc.History[2].Cause.Rejoin
	if doc.History[2].Cause.MemberID != again.id || r == nil || r.MemberID != first.id || r.Kind != group.CauseSessionTimeout ||
		r.AfterMs != 41000 || r.By != "client" || !r.At.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("the rejoin's cause: %+v, rejoin %+v", doc.History[2].Cause, r)
	}
	tbl := table(c.ok("group", "history", g))
	t.Logf("cohort group history %s\n%s", g, tbl)
	if !strings.Contains(tbl, " MOVED REJOIN-OF\n") || !strings.Contains(tbl, first.id+" (session_timeout, 41s before)\n") {
		t.Fatalf("history does not link the rejoin:\n%s", tbl)
	}
	why := c.ok("group", "why", g)
	wantIn(t, "why of a rejoin", why,
		"started because a new member "+again.id+" (client app, host 127.0.0.1) joined, rejoining after the eviction of member "+
			first.id+" (session timeout at 10:00:10.000) 41 s earlier (same client id and host).")
}
