package group

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// countedSummary is what a node's rebalance metrics read of an event told to
// OnRebalance: its group, type, causes (counted by kind, past the 64 kept
// too), outcome, generations and phase durations.
func countedSummary(ev RebalanceEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %d->%d %s cause=%s join=%d sync=%d more=", ev.Group, ev.Type, ev.FromGeneration, ev.Generation,
		ev.Outcome, ev.Cause.Kind, ev.JoinMs, ev.SyncMs)
	for _, c := range ev.MoreCauses {
		fmt.Fprintf(&b, "%s,", c.Kind)
	}
	for _, k := range slices.Sorted(func(yield func(CauseKind) bool) {
		for k := range ev.CutCauses {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, " cut %s=%d", k, ev.CutCauses[k])
	}
	return b.String()
}

// A node that keeps no history (HistorySize < 0) with an observer (the
// node's rebalance metrics) is told the same rebalances, at the same
// moments, with the same causes and phase durations as one that keeps it,
// through a failed assignment write, a leave during one, a session timeout
// and consumer-protocol joins and a rebalance-timeout fencing; and it keeps
// and stores no event. Before, it was told nothing, so a node run with
// --group-history 0 counted no rebalance in cohort_rebalances_total nor
// cohort_group_member_timeouts_total.
func TestHistoryOffStillTellsObserver(t *testing.T) {
	run := func(size int) (told []string, h *h) {
		h, _ = newCH(t, map[string]int32{"t": 4}, func(c *Config) {
			c.HistorySize = size
			c.MinSessionTimeout = time.Second
			c.OnRebalance = func(e RebalanceEvent) { told = append(told, countedSummary(e)) }
		})
		step := func(what string) { told = append(told, "-- "+what) }
		// Classic.
		ids, _ := h.stableGroup("g", 2)
		step("stable")
		h.advance(time.Second)
		h.heldAssignment("g", ids)
		h.advance(time.Second)
		h.completeHeld(0, ErrCoordinatorNotAvailable) // the assignment write fails
		h.held, h.hold = nil, false
		step("failed write")
		h.advance(time.Second)
		h.rejoinAndSync("g", ids...)
		step("rejoined")
		h.advance(time.Second)
		h.heldAssignment("g", ids)
		if r := h.leave("g", lm(ids[1])); r.ErrorCode != 0 {
			t.Fatalf("leave: %d", r.ErrorCode)
		}
		h.completeHeld(0, ErrNone) // stored; the leave starts the next rebalance
		h.held, h.hold = nil, false
		h.release()
		h.advance(time.Second)
		h.rejoinAndSync("g", ids[0])
		step("left")
		h.advance(time.Minute) // ids[0]'s session expires: Empty
		step("session timeout")
		// Consumer protocol: a join, a second join whose first member
		// does not revoke in time and is fenced.
		h.cg(hb{member: "c1", names: []string{"t"}, owned: tpset{}, rebalance: 10000})
		h.cgJoin("c2", "t")
		h.cgBeat("c1", h.cgOwned("c1"))
		h.advance(10 * time.Second)
		h.advance(time.Second)
		h.cgBeat("c2", tpset{})
		h.cgSettle("c2")
		step("consumer")
		return told, h
	}
	on, _ := run(100)
	off, hOff := run(-1)
	t.Logf("told:\n%s", strings.Join(on, "\n"))
	if strings.Join(off, "\n") != strings.Join(on, "\n") {
		t.Fatalf("history off told:\n%s\nhistory on told:\n%s", strings.Join(off, "\n"), strings.Join(on, "\n"))
	}
	if n := strings.Count(strings.Join(on, "\n"), "cause="); n < 6 {
		t.Fatalf("only %d events told:\n%s", n, strings.Join(on, "\n"))
	}
	for _, g := range []string{"g", "cg"} {
		if evs := hOff.s.History(g); len(evs) != 0 {
			t.Fatalf("group %s: %d events kept with history off", g, len(evs))
		}
	}
	for k := range hOff.store {
		if k != "" && k[0] == keyHistory {
			t.Fatalf("history record %q stored with history off", k)
		}
	}
}

// With history off, a classic rebalance whose assignment write is in flight
// when the partition is unloaded is told once that write is durable, as
// with history, and the unloaded shard keeps no event of it (it would count
// towards a storm, which a node without history never flags).
func TestHistoryOffUnloadedWriteToldNotKept(t *testing.T) {
	h, ids, told := newStableOff(t)
	h.heldAssignment("g", ids)
	if len(*told) != 1 {
		t.Fatalf("%d events told before the write's outcome, want 1", len(*told))
	}
	h.unload(newStormTally())
	h.completeHeld(0, ErrNone) // durable after the unload
	h.held, h.hold = nil, false
	if len(*told) != 2 || (*told)[1].Outcome != "stable" {
		t.Fatalf("told %d events after the late write, want 2 (the second stable)", len(*told))
	}
	if evs := h.s.History("g"); len(evs) != 0 {
		t.Fatalf("the unloaded shard keeps %d events with history off", len(evs))
	}
}

// With history off, the events told to OnRebalance are not numbered (Seq
// 0): nothing stores the number, so it could not continue across a load.
// Before, each shard numbered a group's events from 1 (or from the last
// event stored by a node that kept history), and a reload of the partition
// (after a failed write, in the same process and with the same observer)
// numbered them from 1 again: an observer that, as the Observer hook
// documents, expects a group's seq to grow, or drops an event whose
// (group, seq) it has seen, misread or dropped the rebalances after it.
func TestHistoryOffObserverSeqNotReused(t *testing.T) {
	h, ids, told := newStableOff(t)
	h.rejoinAndSync("g", ids...)
	h.adopt() // the partition reloads: a restart, or after a failed write
	h.advance(time.Second)
	h.rejoinAndSync("g", ids...)
	h.advance(time.Second)
	h.rejoinAndSync("g", ids...)
	if len(*told) < 4 {
		t.Fatalf("%d events told, want at least 4", len(*told))
	}
	seen := map[uint64]int{}
	for i, ev := range *told {
		if ev.Seq == 0 {
			continue
		}
		if j, ok := seen[ev.Seq]; ok {
			t.Fatalf("seq %d of group %s told twice: events %d and %d (the partition reloaded between them)", ev.Seq, ev.Group, j+1, i+1)
		}
		seen[ev.Seq] = i
	}
	if len(seen) > 0 {
		t.Fatalf("%d events told numbered with history off, want none (Seq 0)", len(seen))
	}
}

// newStableOff is a shard that keeps no history, with an observer that
// appends what it is told to the slice returned, and a Stable group "g" of
// two members (ids), a second later.
func newStableOff(t *testing.T) (h *h, ids []string, told *[]RebalanceEvent) {
	told = new([]RebalanceEvent)
	h = newH(t, func(c *Config) {
		c.HistorySize = -1
		c.OnRebalance = func(e RebalanceEvent) { *told = append(*told, e) }
	})
	ids, _ = h.stableGroup("g", 2)
	h.advance(time.Second)
	return h, ids, told
}
