package group

import (
	"fmt"
	"testing"
	"time"
)

// Storms and rebalance counts of groups whose completing writes are in
// flight (docs/history.md, "Observer hook"). Every test runs on the fake
// clock; the harness holds writes and completes them one by one in the order
// and with the outcome each case chooses.

// stormTally counts storms the way the node's metrics do
// (node/rebalancemetrics.go): a flag counts unless the group is flagged
// already or the flag was found at a load; a reload forgets the flags.
type stormTally struct {
	flagged map[string]bool
	counted int
	all     []StormStatus
}

func newStormTally() *stormTally { return &stormTally{flagged: map[string]bool{}} }

func (st *stormTally) on(s StormStatus) {
	st.all = append(st.all, s)
	switch {
	case !s.Flagged:
		delete(st.flagged, s.Group)
	default:
		if !st.flagged[s.Group] && !s.Loaded {
			st.counted++
		}
		st.flagged[s.Group] = true
	}
}

func (st *stormTally) released() { clear(st.flagged) }

// heldWrite completes the held write i with code.
func (h *h) completeHeld(i int, code int16) {
	h.t.Helper()
	var out Output
	saved := h.fail
	h.fail = code
	h.complete(h.held[i], &out)
	h.fail = saved
	h.settle(&out)
}

// cgSend sends a heartbeat without waiting for its answer (its write may be
// held).
func (h *h) cgSend(o hb) Ticket {
	req := h.cgReq(o)
	return h.do(func(t Ticket, out *Output) {
		h.s.ConsumerGroupHeartbeat(h.now, t, Client{ID: "client-" + o.member, Host: "127.0.0.1"}, req, out)
	})
}

// Two completing writes of one consumer group in flight (a's join and its
// leave, each a rebalance event) with the storm detector at 3: the group
// storms once both are stored, not before. A storm flagged by an event
// whose write was still in flight counted once then, and once more when the
// other write failed, the partition reloaded (without the failed event, not
// flagged) and the group's next stored rebalance took it over the threshold
// again: cohort_rebalance_storms_total said 2 for one storm. Whatever the
// order of the outcomes, the storm is counted exactly once.
func TestHistoryCGStormInFlightCountedOnce(t *testing.T) {
	for _, c := range []struct {
		name  string
		order [2]int   // which held write completes first, second
		codes [2]int16 // their outcomes, in that order
	}{
		{"first stored, second fails", [2]int{0, 1}, [2]int16{ErrNone, ErrCoordinatorNotAvailable}},
		{"second stored first, first fails", [2]int{1, 0}, [2]int16{ErrNone, ErrCoordinatorNotAvailable}},
		{"first fails, second stored", [2]int{0, 1}, [2]int16{ErrCoordinatorNotAvailable, ErrNone}},
		{"both stored", [2]int{0, 1}, [2]int16{ErrNone, ErrNone}},
		{"both stored, second first", [2]int{1, 0}, [2]int16{ErrNone, ErrNone}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tally := newStormTally()
			h, _ := newCH(t, map[string]int32{"t": 4}, func(cfg *Config) {
				cfg.StormThreshold, cfg.StormWindow = 3, time.Hour
				cfg.OnStorm = tally.on
			})
			h.cgJoin("a", "t") // event 1
			h.advance(time.Second)
			h.cg(hb{member: "a", epoch: -1}) // the last leave: event 2
			h.advance(time.Second)
			h.events("cg", 2)
			h.hold = true
			h.cgSend(hb{member: "a", names: []string{"t"}, owned: tpset{}}) // event 3
			h.advance(time.Second)
			h.cgSend(hb{member: "a", epoch: -1}) // event 4
			if len(h.held) != 2 {
				t.Fatalf("%d writes held, want 2", len(h.held))
			}
			h.events("cg", 4) // applied at once
			h.completeHeld(c.order[0], c.codes[0])
			h.completeHeld(c.order[1], c.codes[1])
			h.held, h.hold = nil, false
			if c.codes[0] != ErrNone || c.codes[1] != ErrNone {
				if !h.s.NeedsReload() {
					t.Fatal("a failed write did not ask for a reload")
				}
				tally.released() // the runtime drops the partition's flags
				h.adopt()
				// The group rebalances again until its stored history
				// holds four events (over the threshold).
				for round := 0; len(h.s.History("cg")) < 4 && round < 4; round++ {
					h.advance(time.Second)
					if m := h.cmember("cg", "a"); m != nil {
						h.cg(hb{member: "a", epoch: -1})
					} else {
						h.cgJoin("a", "t")
					}
				}
			}
			if n := len(h.s.History("cg")); n < 4 {
				t.Fatalf("%d events stored, want at least 4", n)
			}
			if tally.counted != 1 {
				t.Fatalf("storm counted %d times, want 1; told %s", tally.counted, fmt.Sprint(tally.all))
			}
		})
	}
}
