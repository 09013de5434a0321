package group

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// historyOffTwin runs the same fuzz input twice, through run: with history
// kept (the default bound) and with history off (HistorySize < 0), an
// observer set in both (as every node with metrics has). History off must
// change nothing but the kept history: the same answers to every request
// (each ticket's response, encoded), the same stored records once history
// records are left out, and the same rebalances told to the observer as
// the node's metrics count them (countedSummary: group, type, causes,
// outcome, generations and phase durations). It fails with the first
// difference. In both runs a write of history records only is stored
// whatever the input's failures say, and left out when the input picks held
// writes by position (h.passHistory): the node without history has no such
// write, and the input's failures must fall on the same writes in both
// (FuzzMixedOutcomes, without the twin, still fails them).
func historyOffTwin(t *testing.T, run func(mod func(*Config)) *h) {
	t.Helper()
	trace := func(off bool) []string {
		var told []string
		h := run(func(c *Config) {
			if off {
				c.HistorySize = -1
			}
			c.OnRebalance = func(ev RebalanceEvent) { told = append(told, "told "+countedSummary(ev)) }
		})
		return append(twinTrace(h), told...)
	}
	on, off := trace(false), trace(true)
	for i := range max(len(on), len(off)) {
		var a, b string
		if i < len(on) {
			a = on[i]
		}
		if i < len(off) {
			b = off[i]
		}
		if a != b {
			t.Fatalf("history off changes more than the history, at line %d of %d/%d:\nhistory on:  %s\nhistory off: %s",
				i, len(on), len(off), a, b)
		}
	}
}

// twinTrace lists h's answers by ticket (encoded) and its store without
// history records, one line each.
func twinTrace(h *h) []string {
	var lines []string
	for _, tk := range slices.Sorted(func(yield func(Ticket) bool) {
		for tk := range h.got {
			if !yield(tk) {
				return
			}
		}
	}) {
		r := h.got[tk]
		lines = append(lines, fmt.Sprintf("answer %d %T v%d %x", tk, r, r.GetVersion(), r.AppendTo(nil)))
	}
	var stored []string
	for k, v := range h.store {
		if k != "" && k[0] == keyHistory {
			continue
		}
		stored = append(stored, fmt.Sprintf("stored %x = %x", k, v))
	}
	slices.Sort(stored)
	return append(lines, strings.Join(stored, "\n"))
}
