package group

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A classic group's rebalance is recorded in the write of the leader's
// assignment (rbAssigned). These tests pin what that write's outcome does
// to the event while the shard keeps the partition.

// heldAssignment rebalances the two-member group g (ids: leader first)
// with the store held, up to the leader's SyncGroup: its assignment
// write, holding the event, is the one held write.
func (h *h) heldAssignment(g string, ids []string) int32 {
	h.t.Helper()
	h.hold = true
	t0 := h.join(g, jo{member: ids[0]})
	h.join(g, jo{member: ids[1]})
	r := h.joinResp(t0)
	if r.ErrorCode != 0 || r.LeaderID != ids[0] {
		h.t.Fatalf("rejoin: code %d, leader %s; want 0, %s", r.ErrorCode, r.LeaderID, ids[0])
	}
	h.sync(g, ids[1], r.Generation, nil)
	h.sync(g, ids[0], r.Generation, map[string]string{ids[0]: "a0", ids[1]: "a1"})
	if len(h.held) != 1 {
		h.t.Fatalf("%d writes held, want the assignment's", len(h.held))
	}
	return r.Generation
}

// The assignment write fails: the event is neither kept nor told, its seq
// is given back, and the rebalance goes on as one event, which names the
// failure among its more causes and is the next seq once it completes.
func TestHistoryClassicAssignmentWriteFails(t *testing.T) {
	var seen []RebalanceEvent
	h := newH(t, func(c *Config) { c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) } })
	ids, gen := h.stableGroup("g", 2) // event 1
	h.advance(time.Second)
	h.heldAssignment("g", ids)
	h.completeHeld(0, ErrCoordinatorNotAvailable)
	h.held, h.hold = nil, false
	h.events("g", 1)
	if len(seen) != 1 {
		t.Fatalf("%d events told after the failed write, want 1", len(seen))
	}
	h.advance(time.Second)
	h.rejoinAndSync("g", ids...)
	ev := h.events("g", 2)[1]
	if len(seen) != 2 || ev.Seq != 2 || ev.FromGeneration != gen || ev.Cause.Kind != CauseMetadataChanged {
		t.Fatalf("told %d events; event %+v; want 2 told, seq 2 from generation %d caused by the rejoin", len(seen), ev, gen)
	}
	found := false
	for _, c := range ev.MoreCauses {
		found = found || c.Kind == CauseOther && c.Detail == "storing the assignment failed"
	}
	if !found {
		t.Fatalf("more causes %+v do not name the failed write", ev.MoreCauses)
	}
	if msg := h.checkReload(); msg != "" {
		t.Fatal(msg)
	}
}

// A member leaves while the assignment write is in flight. If the write is
// stored, the rebalance it completes is one event (stable, at the
// assignment's generation) and the leave starts the next one, as a load
// of the store would see it. If the write fails, nothing of it is stored:
// the leave continues the same rebalance, one event with the leave among
// its more causes.
func TestHistoryClassicLeaveDuringAssignmentWrite(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrCoordinatorNotAvailable} {
		t.Run(fmt.Sprint("outcome ", code), func(t *testing.T) {
			var seen []RebalanceEvent
			h := newH(t, func(c *Config) { c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) } })
			ids, gen := h.stableGroup("g", 2) // event 1
			h.advance(time.Second)
			gen2 := h.heldAssignment("g", ids)
			h.advance(time.Second)
			if r := h.leave("g", lm(ids[1])); r.ErrorCode != 0 {
				t.Fatalf("leave: %d", r.ErrorCode)
			}
			h.completeHeld(0, code)
			h.held, h.hold = nil, false
			h.release()
			h.advance(time.Second)
			h.rejoinAndSync("g", ids[0])
			evs := h.events("g", len(seen))
			if code == ErrNone {
				if len(evs) != 3 {
					t.Fatalf("%d events, want 3", len(evs))
				}
				if e := evs[1]; e.Outcome != "stable" || e.FromGeneration != gen || e.Generation != gen2 || len(e.Members) != 2 {
					t.Fatalf("event 2 %+v, want stable %d -> %d with both members", e, gen, gen2)
				}
				if e := evs[2]; e.Cause.Kind != CauseMemberLeft || e.Cause.MemberID != ids[1] || e.FromGeneration != gen2 {
					t.Fatalf("event 3 %+v, want started by %s leaving, from generation %d", e, ids[1], gen2)
				}
			} else {
				if len(evs) != 2 {
					t.Fatalf("%d events, want 2", len(evs))
				}
				e := evs[1]
				if e.Seq != 2 || e.FromGeneration != gen || e.Cause.Kind != CauseMetadataChanged ||
					len(e.MoreCauses) == 0 || e.MoreCauses[0].Kind != CauseMemberLeft || e.MoreCauses[0].MemberID != ids[1] {
					t.Fatalf("event 2 %+v, want seq 2 from generation %d, the leave its first more cause", e, gen)
				}
				if e.DurationMs != e.JoinMs+e.SyncMs || e.DurationMs != 2000 {
					t.Fatalf("event 2 lasted %d ms (join %d, sync %d), want 2000 = join + sync", e.DurationMs, e.JoinMs, e.SyncMs)
				}
			}
			if msg := h.checkReload(); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// While the assignment's write (which holds the event) is in flight, the
// group is still CompletingRebalance and its waiting view still tells the
// rebalance's start and cause, as before the event went with that write.
func TestHistoryWaitingWhileAssignmentWritten(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	h.advance(time.Second)
	start := h.now
	h.heldAssignment("g", ids)
	doc, _ := h.s.HistoryDoc("g", 0, h.now)
	w := doc.Waiting
	if w == nil || w.State != "CompletingRebalance" || !w.Since.Equal(start) || w.Cause == nil || w.Cause.Kind != CauseMetadataChanged {
		t.Fatalf("waiting %+v while the assignment is written, want since %v with the rejoin as its cause", w, start)
	}
	h.release()
	doc, _ = h.s.HistoryDoc("g", 0, h.now)
	if doc.Waiting != nil || doc.State != "Stable" {
		t.Fatalf("state %s, waiting %+v once stored; want Stable, none", doc.State, doc.Waiting)
	}
}

// A consumer-protocol member upgrades the group while the leader's
// assignment write is in flight. Stored, that write ended the rebalance
// (stable, at the assignment's generation), and the conversion comes
// after it. Failed, the rebalance ends superseded by the conversion, as it
// did before the event went with the assignment: its event is built at the
// conversion, with the classic members and generation, and recorded then.
func TestHistoryClassicUpgradeDuringAssignmentWrite(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrCoordinatorNotAvailable} {
		t.Run(fmt.Sprint("outcome ", code), func(t *testing.T) {
			h, _ := newCH(t, map[string]int32{"a": 4})
			gen, r := h.cgAssignmentHeld() // event 1, then event 2's write held
			h.hold = false
			if hr := h.cgSend(hb{member: "n1", names: []string{"a"}, owned: tpset{}}); h.got[hr] == nil {
				t.Fatal("the upgrading heartbeat was not answered")
			}
			h.hold = true
			h.completeHeld(0, code)
			h.held = h.held[1:]
			h.release()
			evs := h.events("cg", 2)
			e := evs[1]
			if e.Seq != 2 || e.Type != "classic" || e.FromGeneration != gen || e.Generation != r.Generation || len(e.Members) != 2 {
				t.Fatalf("event %+v, want seq 2, classic, generation %d -> %d, both members", e, gen, r.Generation)
			}
			if code == ErrNone {
				if e.Outcome != "stable" {
					t.Fatalf("outcome %s, want stable (the assignment was stored)", e.Outcome)
				}
			} else if e.Outcome != "superseded" || len(e.MoreCauses) == 0 ||
				!strings.Contains(e.MoreCauses[len(e.MoreCauses)-1].Detail, "converted to the consumer protocol") {
				t.Fatalf("event %+v, want superseded by the conversion", e)
			}
			if d := h.checkReload(); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// emptiedDuringHeldAssignment makes group a Stable group of two members
// (event 1, generation gen), then has both leave while the assignment of
// their next rebalance (generation gen2) is the held write.
func (h *h) emptiedDuringHeldAssignment(group string) (gen, gen2 int32) {
	h.t.Helper()
	ids, gen := h.stableGroup(group, 2)
	h.advance(time.Second)
	gen2 = h.heldAssignment(group, ids)
	h.advance(time.Second)
	if r := h.leave(group, lm(ids[0]), lm(ids[1])); r.ErrorCode != 0 {
		h.t.Fatalf("leave: %d", r.ErrorCode)
	}
	return gen, gen2
}

// Every member leaves while the assignment write is in flight: the group is
// Empty before that write's outcome. If the write fails, nothing of the
// rebalance whose assignment it held was stored: as for one leave
// (TestHistoryClassicLeaveDuringAssignmentWrite), the leaves continue that
// rebalance, which ends Empty as one event from the generation last stored,
// its rejoin still its cause. That event was recorded (and told) when the
// group became Empty, at seq 3, the failed write's seq 2 taken: it keeps
// seq 3, rewritten with the failed rebalance's start and causes.
func TestHistoryClassicGroupEmptiedDuringFailedAssignmentWrite(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrCoordinatorNotAvailable} {
		t.Run(fmt.Sprint("outcome ", code), func(t *testing.T) {
			var seen []RebalanceEvent
			h := newH(t, func(c *Config) { c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) } })
			gen, gen2 := h.emptiedDuringHeldAssignment("g")
			h.completeHeld(0, code)
			h.held = h.held[1:]
			h.release()
			if st := h.s.Group("g").State(); st != Empty {
				t.Fatalf("group %s after the leaves, want Empty", st)
			}
			if code == ErrNone { // two rebalances, each its own event (unchanged)
				evs := h.events("g", 3)
				if e := evs[1]; e.Seq != 2 || e.Outcome != "stable" || e.Generation != gen2 {
					t.Fatalf("event %+v; want seq 2, stable at generation %d", e, gen2)
				}
				if e := evs[2]; e.Seq != 3 || e.Outcome != "empty" || e.FromGeneration != gen2 || e.Cause.Kind != CauseMemberLeft {
					t.Fatalf("event %+v; want seq 3, empty from generation %d, caused by a leave", e, gen2)
				}
			} else {
				e := h.events("g", 2)[1]
				if e.Seq != 3 || e.Outcome != "empty" || e.FromGeneration != gen || e.Cause.Kind != CauseMetadataChanged {
					t.Fatalf("event %+v; want seq 3, empty, from generation %d, caused by the rejoin", e, gen)
				}
				left := 0
				for _, c := range e.MoreCauses {
					if c.Kind == CauseMemberLeft {
						left++
					}
				}
				if left != 2 {
					t.Fatalf("more causes %+v, want both leaves among them", e.MoreCauses)
				}
			}
			// Told once each, in seq order: 3, recorded when the group
			// became Empty, is told once the outcome of 2's write is
			// known, after 2 if it was stored; if it failed, as the one
			// event it then is. (Before, 3 was told at once: 1, 3, 2.)
			want := "[1 2 3]"
			if code != ErrNone {
				want = "[1 3]"
			}
			if got := toldSeqs(seen); got != want {
				t.Fatalf("told seqs %s, want %s", got, want)
			}
			if last := seen[len(seen)-1]; code != ErrNone && last.FromGeneration != gen {
				t.Fatalf("told %+v, want the one event from generation %d", last, gen)
			}
			if msg := h.checkReload(); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// The same, the emptied group deleted before the failed write's outcome:
// the rewrite of its last event would come after the deletion's tombstones
// and bring that event back into the store. Nothing is written for it.
func TestHistoryClassicGroupDeletedDuringFailedAssignmentWrite(t *testing.T) {
	h := newH(t)
	h.emptiedDuringHeldAssignment("g")
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 2, []string{"g"}
	h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) }) // answered once durable
	h.completeHeld(0, ErrCoordinatorNotAvailable)
	h.held = h.held[1:]
	h.release()
	if g := h.s.Group("g"); g != nil {
		t.Fatalf("group %s after its deletion", g.State())
	}
	if evs := h.s.History("g"); len(evs) != 0 {
		t.Fatalf("%d events after the deletion, want none: %+v", len(evs), evs)
	}
	if msg := h.checkReload(); msg != "" {
		t.Fatal(msg)
	}
}

// nextAssignmentHeld follows heldAssignment: a second later ids[1] leaves,
// and ids[0] rejoins alone and gives the next assignment, held too.
func (h *h) nextAssignmentHeld(g string, ids []string) {
	h.t.Helper()
	h.advance(time.Second)
	if r := h.leave(g, lm(ids[1])); r.ErrorCode != 0 {
		h.t.Fatalf("leave: %d", r.ErrorCode)
	}
	r := h.joinResp(h.join(g, jo{member: ids[0]}))
	if r.ErrorCode != 0 {
		h.t.Fatalf("rejoin: %d", r.ErrorCode)
	}
	h.sync(g, ids[0], r.Generation, map[string]string{ids[0]: "a0"})
	if len(h.held) != 2 {
		h.t.Fatalf("%d writes held, want both assignments", len(h.held))
	}
}

// newTellingH is newH with the events told to OnRebalance collected.
func newTellingH(t *testing.T) (*h, *[]RebalanceEvent) {
	seen := new([]RebalanceEvent)
	return newH(t, func(c *Config) { c.OnRebalance = func(e RebalanceEvent) { *seen = append(*seen, e) } }), seen
}

// A member leaves while the assignment write is in flight, and the next
// rebalance completes and its leader gives its assignment before that first
// write's outcome: the first write fails. Nothing of the first rebalance was
// stored, so it went on through the second: one event from the generation
// last stored, its rejoin its cause, the leave among its more causes. If
// the second write is stored, that event is the second write's seq (3; 2,
// the failed write's, stays unused), rewritten; if it fails too, the
// rebalance goes on, and is seq 3 once it completes.
func TestHistoryClassicNextAssignmentDuringFailedAssignmentWrite(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrCoordinatorNotAvailable} {
		t.Run(fmt.Sprint("second outcome ", code), func(t *testing.T) {
			h, seen := newTellingH(t)
			ids, gen := h.stableGroup("g", 2) // event 1
			h.advance(time.Second)
			h.heldAssignment("g", ids)
			h.nextAssignmentHeld("g", ids)
			h.completeHeld(0, ErrCoordinatorNotAvailable)
			h.held = h.held[1:]
			h.completeHeld(0, code)
			h.held = h.held[1:]
			h.release() // what the outcomes wrote
			if code != ErrNone {
				h.advance(time.Second)
				h.rejoinAndSync("g", ids[0])
			}
			e := h.events("g", 2)[1]
			if e.Seq != 3 || e.Outcome != "stable" || e.FromGeneration != gen || e.Cause.Kind != CauseMetadataChanged {
				t.Fatalf("event %+v; want seq 3, stable from generation %d, caused by the rejoin", e, gen)
			}
			found := false
			for _, c := range e.MoreCauses {
				found = found || c.Kind == CauseMemberLeft && c.MemberID == ids[1]
			}
			if !found {
				t.Fatalf("more causes %+v, want the leave among them", e.MoreCauses)
			}
			if told := *seen; len(told) != 2 || told[1].Seq != 3 {
				t.Fatalf("told %d events (%+v), want 2, the last seq 3", len(told), told)
			}
			if msg := h.checkReload(); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// As TestHistoryClassicNextAssignmentDuringFailedAssignmentWrite, both
// writes stored: two rebalances, each its own event, the second (seq 3)
// from the generation the first stored, and neither rewritten.
func TestHistoryClassicNextAssignmentDuringStoredAssignmentWrite(t *testing.T) {
	h, seen := newTellingH(t)
	ids, _ := h.stableGroup("g", 2) // event 1
	h.advance(time.Second)
	gen2 := h.heldAssignment("g", ids)
	h.nextAssignmentHeld("g", ids)
	h.completeHeld(0, ErrNone)
	h.held = h.held[1:]
	h.completeHeld(0, ErrNone)
	h.held = h.held[1:]
	h.release()
	evs := h.events("g", 3)
	if e := evs[2]; e.Seq != 3 || e.FromGeneration != gen2 || e.Cause.Kind != CauseMemberLeft {
		t.Fatalf("event %+v; want seq 3 from generation %d, caused by the leave", e, gen2)
	}
	checkTold(t, *seen, "[1 2 3]")
	if msg := h.checkReload(); msg != "" {
		t.Fatal(msg)
	}
}
