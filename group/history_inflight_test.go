package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Storms and rebalance counts of groups whose completing writes are in
// flight (docs/history.md, "Observer hook"). Every test runs on the fake
// clock; the harness holds writes and completes them one by one in the order
// and with the outcome each case chooses.

// stormTally counts storms the way the node's metrics do
// (node/rebalancemetrics.go): a flag counts unless the group is flagged
// already or the flag was found at a load; a late flag (told by an
// unloaded shard) counts without marking the group; a reload forgets the
// flags.
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
	case s.Late:
		st.counted++
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

// unload unloads h's shard as the runtime does when the partition moves away
// or the node stops: the requests waiting for writes in flight are answered
// NOT_COORDINATOR, and the runtime's flags of its groups are dropped.
func (h *h) unload(tally *stormTally) {
	h.t.Helper()
	var out Output
	h.s.Unload(h.now, &out)
	for _, r := range out.Replies {
		h.got[r.Ticket] = r.Resp
	}
	tally.released()
}

// A consumer group's rebalance whose completing write is in flight when its
// partition is unloaded (moved to another node, or the node stopping) is
// counted by this node when the write's outcome arrives after the unload:
// told to OnRebalance if it is durable, not if it failed, and a storm it
// makes is flagged (Late) once. The shard that loads the partition next tells
// nothing of the stored event and finds the storm flagged at its load, so
// over both the rebalance and the storm count once. Before, the outcome of
// such a write was dropped and the rebalance counted nowhere.
func TestHistoryCGUnloadedWriteCounted(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrNotCoordinator} {
		t.Run(fmt.Sprint("outcome ", code), func(t *testing.T) {
			tally := newStormTally()
			var seen []RebalanceEvent
			h, _ := newCH(t, map[string]int32{"t": 4}, func(cfg *Config) {
				cfg.StormThreshold, cfg.StormWindow = 2, time.Hour
				cfg.OnStorm = tally.on
				cfg.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) }
			})
			tk := h.cgThirdInFlight(func() int { return len(seen) })
			h.unload(tally)
			if r, ok := h.got[tk].(*kmsg.ConsumerGroupHeartbeatResponse); !ok || r.ErrorCode != ErrNotCoordinator {
				t.Fatalf("the heartbeat waiting for the write answered %+v at the unload, want NOT_COORDINATOR", h.got[tk])
			}
			if h.s.LateWrites() != 1 {
				t.Fatalf("unloaded shard awaits %d late writes, want 1", h.s.LateWrites())
			}
			h.advance(time.Second)
			h.completeHeld(0, code) // the outcome arrives after the unload
			h.held, h.hold = nil, false
			if h.s.LateWrites() != 0 {
				t.Fatalf("unloaded shard still awaits %d late writes", h.s.LateWrites())
			}
			wantSeen, wantStorms := 2, 0
			if code == ErrNone {
				wantSeen, wantStorms = 3, 1
			}
			if len(seen) != wantSeen || seen[len(seen)-1].Seq != uint64(wantSeen) {
				t.Fatalf("OnRebalance told %d events, want %d (the last seq %d)", len(seen), wantSeen, wantSeen)
			}
			if tally.counted != wantStorms {
				t.Fatalf("storm counted %d times after the late outcome, want %d; told %v", tally.counted, wantStorms, tally.all)
			}
			// The next owner loads what the store holds: nothing more is
			// told or counted.
			h.adopt()
			h.events("cg", wantSeen)
			if len(seen) != wantSeen || tally.counted != wantStorms {
				t.Fatalf("after the load: %d events told, storm counted %d times; want %d, %d (told %v)",
					len(seen), tally.counted, wantSeen, wantStorms, tally.all)
			}
			if st := h.s.storm("cg", h.now); st.Flagged != (code == ErrNone) {
				t.Fatalf("loaded shard: storm %+v", st)
			}
		})
	}
}

// A classic group's rebalance that ends Empty (its last member left) is
// recorded at once, in a write of its own, and told to OnRebalance then;
// that write, in flight at the unload, flags the group's storm when it is
// durable after the unload (Late), once over this node and the next owner.
func TestHistoryClassicUnloadedWriteStormCounted(t *testing.T) {
	tally := newStormTally()
	h := newH(t, func(c *Config) {
		c.StormThreshold, c.StormWindow = 2, time.Hour
		c.OnStorm = tally.on
	})
	ids, _ := h.stableGroup("g", 1) // event 1
	h.advance(time.Second)
	h.rejoinAndSync("g", ids[0]) // event 2
	h.advance(time.Second)
	h.hold = true
	if r := h.leave("g", lm(ids[0])); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	h.events("g", 2)
	if len(h.held) != 2 { // event 3 (empty), then the empty generation
		t.Fatalf("%d writes held, want the event's and the group's", len(h.held))
	}
	h.unload(tally)
	h.completeHeld(0, ErrNone)
	h.completeHeld(1, ErrNone)
	h.held, h.hold = nil, false
	if tally.counted != 1 || len(tally.all) != 1 || !tally.all[0].Late || tally.all[0].Count != 3 {
		t.Fatalf("storm counted %d times, told %v; want once, late, count 3", tally.counted, tally.all)
	}
	h.adopt()
	if tally.counted != 1 || len(tally.all) != 2 || !tally.all[1].Loaded {
		t.Fatalf("after the load: storm counted %d times, told %v; want once, then found at the load", tally.counted, tally.all)
	}
}

// A classic group's rebalance whose completing write (the leader's
// assignment) is in flight when the partition is unloaded: the write holds
// the rebalance's event, so the store has both or neither. When the outcome
// arrives after the unload, a durable write tells the event to OnRebalance
// and flags the storm it makes (Late), once; a failed one tells nothing. The
// next owner loads the event with the assignment and tells nothing more.
// Before, the event was recorded only once the assignment was durable, in a
// write of its own, which an unloaded shard never issues: the rebalance was
// counted by no node and missing from the stored history.
func TestHistoryClassicUnloadedAssignmentCounted(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrNotCoordinator} {
		t.Run(fmt.Sprint("outcome ", code), func(t *testing.T) {
			tally := newStormTally()
			var seen []RebalanceEvent
			h := newH(t, func(c *Config) {
				c.StormThreshold, c.StormWindow = 2, time.Hour
				c.OnStorm = tally.on
				c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) }
			})
			ids, _ := h.stableGroup("g", 1) // event 1
			h.advance(time.Second)
			h.rejoinAndSync("g", ids[0]) // event 2
			h.advance(time.Second)
			h.hold = true
			r := h.joinResp(h.join("g", jo{member: ids[0]}))
			tk := h.sync("g", ids[0], r.Generation, map[string]string{ids[0]: "a"})
			if len(h.held) != 1 || len(seen) != 2 || tally.counted != 0 {
				t.Fatalf("%d writes held, %d events told, storm counted %d times; want 1, 2, 0", len(h.held), len(seen), tally.counted)
			}
			h.unload(tally)
			if sr, ok := h.got[tk].(*kmsg.SyncGroupResponse); !ok || sr.ErrorCode != ErrNotCoordinator {
				t.Fatalf("the leader's SyncGroup answered %+v at the unload, want NOT_COORDINATOR", h.got[tk])
			}
			h.advance(time.Second)
			h.completeHeld(0, code) // the outcome arrives after the unload
			h.held, h.hold = nil, false
			if n := h.s.LateWrites(); n != 0 {
				t.Fatalf("unloaded shard still awaits %d late writes", n)
			}
			want, wantStorms := 2, 0
			if code == ErrNone {
				want, wantStorms = 3, 1
			}
			if len(seen) != want || seen[len(seen)-1].Seq != uint64(want) {
				t.Fatalf("OnRebalance told %d events, want %d (the last seq %d)", len(seen), want, want)
			}
			if tally.counted != wantStorms || wantStorms == 1 && (!tally.all[0].Late || tally.all[0].Count != 3) {
				t.Fatalf("storm counted %d times after the late outcome, want %d (late, count 3); told %v", tally.counted, wantStorms, tally.all)
			}
			// The next owner loads what the store holds: the event with
			// the assignment, or neither; nothing more is told or counted.
			h.adopt()
			evs := h.events("g", want)
			if code == ErrNone {
				if ev := evs[2]; ev.Outcome != "stable" || ev.Generation != r.Generation || ev.Seq != 3 {
					t.Fatalf("stored event %+v, want seq 3 stable at generation %d", ev, r.Generation)
				}
			}
			if g := h.s.Group("g"); g == nil || g.generation != r.Generation-boolInt(code != ErrNone) {
				t.Fatalf("loaded group %+v, want generation %d", g, r.Generation-boolInt(code != ErrNone))
			}
			if len(seen) != want || tally.counted != wantStorms {
				t.Fatalf("after the load: %d events told, storm counted %d times; want %d, %d (told %v)",
					len(seen), tally.counted, want, wantStorms, tally.all)
			}
		})
	}
}

func boolInt(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// The partition comes back to the same node before the outcome of a write
// in flight at its unload is reported: the write reached the store before
// the new load (in cluster mode the fenced store takes an old owner's write
// only before the next ownership exists), so the new shard loads its event,
// and the old shard hears of its durability afterwards. Counted the way the
// node's metrics do (a Late flag always counts, a Loaded one never), the
// rebalance is told once and the storm counted once over the two shards.
func TestHistoryCGUnloadedWriteReportedAfterReload(t *testing.T) {
	var seen []RebalanceEvent
	var storms []StormStatus
	counted := 0
	h, _ := newCH(t, map[string]int32{"t": 4}, func(cfg *Config) {
		cfg.StormThreshold, cfg.StormWindow = 2, time.Hour
		cfg.OnStorm = func(st StormStatus) {
			storms = append(storms, st)
			if st.Flagged && !st.Loaded {
				counted++
			}
		}
		cfg.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) }
	})
	h.cgThirdInFlight(func() int { return len(seen) })
	old, w := h.s, h.held[0]
	h.unload(newStormTally())
	storeRecords(h.store, w.Records) // stored, not reported yet
	h.held, h.hold = nil, false
	h.adopt() // the same node loads the partition again
	h.events("cg", 3)
	if len(seen) != 2 || counted != 0 || len(storms) != 1 || !storms[0].Loaded {
		t.Fatalf("after the load: %d events told, storms %v; want 2 told, the storm found at the load", len(seen), storms)
	}
	var out Output
	old.WriteDone(h.now, w.ID, ErrNone, &out) // the outcome reaches the unloaded shard
	if len(out.Replies)+len(out.Writes) != 0 {
		t.Fatalf("unloaded shard answered or wrote: %+v", out)
	}
	if len(seen) != 3 || seen[2].Seq != 3 {
		t.Fatalf("%d events told, want 3 (the last seq 3)", len(seen))
	}
	if counted != 1 || !storms[len(storms)-1].Late {
		t.Fatalf("storm counted %d times, told %v; want once, late", counted, storms)
	}
	// The new shard heard nothing of the old one's outcome.
	if st := h.s.storm("cg", h.now); !st.Flagged || st.Count != 3 {
		t.Fatalf("served shard's storm %+v, want flagged with 3", st)
	}
	if old.LateWrites() != 0 {
		t.Fatalf("unloaded shard still awaits %d writes", old.LateWrites())
	}
}

// A seq stays in ghist.unstored only while its write is in flight, or after
// the write failed, which always asks the runtime for a reload (a new
// shard): a long-lived group's list does not grow with its rebalances.
func TestHistoryCGUnstoredOnlyInFlight(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"t": 4}, func(cfg *Config) {
		cfg.StormThreshold, cfg.StormWindow = 3, time.Hour
	})
	for i := range 20 {
		h.advance(time.Second)
		if i%2 == 0 {
			h.cgJoin("a", "t")
		} else {
			h.cg(hb{member: "a", epoch: -1})
		}
	}
	hist := h.s.hist["cg"]
	if hist == nil {
		t.Fatal("no history of cg")
	}
	if len(hist.unstored) != 0 {
		t.Fatalf("after 20 stored rebalances unstored is %v, want empty", hist.unstored)
	}
	h.hold = true
	h.cgSend(hb{member: "a", names: []string{"t"}, owned: tpset{}})
	if len(h.held) != 1 || len(hist.unstored) != 1 {
		t.Fatalf("%d writes held, unstored %v; want 1, one seq", len(h.held), hist.unstored)
	}
	h.completeHeld(0, ErrCoordinatorNotAvailable)
	h.held, h.hold = nil, false
	if !h.s.NeedsReload() {
		t.Fatal("a failed write left a seq noted unstored without asking for a reload")
	}
	h.adopt()
	if hist := h.s.hist["cg"]; hist != nil && len(hist.unstored) != 0 {
		t.Fatalf("reloaded shard: unstored is %v, want empty", hist.unstored)
	}
}

// cgThirdInFlight makes group cg rebalance twice (member a joins, leaves),
// then a join again whose completing write (event 3) is held; told is how
// many events OnRebalance heard of. It returns the join's ticket.
func (h *h) cgThirdInFlight(told func() int) Ticket {
	h.t.Helper()
	h.cgJoin("a", "t") // event 1
	h.advance(time.Second)
	h.cg(hb{member: "a", epoch: -1}) // event 2
	h.advance(time.Second)
	h.hold = true
	tk := h.cgSend(hb{member: "a", names: []string{"t"}, owned: tpset{}}) // event 3, in flight
	if len(h.held) != 1 || told() != 2 {
		h.t.Fatalf("%d writes held, %d events told; want 1, 2", len(h.held), told())
	}
	return tk
}

// completeHeld0 completes held write w with code (w no longer in h.held).
func (h *h) completeHeld0(w Write, code int16) {
	h.t.Helper()
	var out Output
	saved := h.fail
	h.fail = code
	h.complete(w, &out)
	h.fail = saved
	h.settle(&out)
}
