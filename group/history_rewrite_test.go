package group

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Rare outcomes of a classic group's assignment write (which holds its
// rebalance's event) when later rebalances end before that outcome is
// known: the event rewritten at a later seq must be the one event all the
// rebalances are, told to OnRebalance once and in seq order.

// toldSeqs lists the seqs told to OnRebalance, in order.
func toldSeqs(seen []RebalanceEvent) string {
	var s []uint64
	for _, e := range seen {
		s = append(s, e.Seq)
	}
	return fmt.Sprint(s)
}

// hasCause counts the causes of kind k by member (any member if "").
func hasCause(cs []Cause, k CauseKind, member string) int {
	n := 0
	for _, c := range cs {
		if c.Kind == k && (member == "" || c.MemberID == member) {
			n++
		}
	}
	return n
}

// Three rebalances inside one write's latency: the first one's assignment
// write (W1, seq 2) is in flight when a member leaves; the remaining leader
// gives the next assignment (W2, seq 3); then the last member leaves and
// the group is Empty (event 4). Both writes fail: nothing of the first two
// rebalances was stored, so all three are one event, ending Empty, from the
// generation last stored, with the first rebalance's start and cause. W1's
// outcome may come before or after the group empties.
func TestHistoryClassicThreeRebalancesBothWritesFail(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprint("first outcome before the leave ", early), func(t *testing.T) {
			h, seen := newTellingH(t)
			ids, gen := h.stableGroup("g", 2) // event 1
			h.advance(time.Second)
			start := h.now
			h.heldAssignment("g", ids)
			h.nextAssignmentHeld("g", ids)
			if early {
				h.completeHeld(0, ErrCoordinatorNotAvailable)
				h.held = h.held[1:]
			}
			h.advance(time.Second)
			if r := h.leave("g", lm(ids[0])); r.ErrorCode != 0 {
				t.Fatalf("leave: %d", r.ErrorCode)
			}
			if !early {
				h.completeHeld(0, ErrCoordinatorNotAvailable)
				h.held = h.held[1:]
			}
			h.completeHeld(0, ErrCoordinatorNotAvailable)
			h.held = h.held[1:]
			h.release()
			e := h.events("g", 2)[1]
			if e.Seq != 4 || e.Outcome != "empty" || e.FromGeneration != gen || !e.Start.Equal(start) ||
				e.Cause.Kind != CauseMetadataChanged || hasCause(e.MoreCauses, CauseMemberLeft, "") != 2 {
				t.Fatalf("event %+v; want seq 4, empty, from generation %d, started %v by the rejoin, both leaves among its more causes", e, gen, start)
			}
			if e.DurationMs != 2000 || e.JoinMs+e.SyncMs != e.DurationMs {
				t.Fatalf("event lasted %d ms (join %d, sync %d), want 2000 = join + sync", e.DurationMs, e.JoinMs, e.SyncMs)
			}
			if got := toldSeqs(*seen); got != "[1 4]" {
				t.Fatalf("told seqs %s, want [1 4]", got)
			}
			if told := (*seen)[1]; told.FromGeneration != gen || !told.Start.Equal(start) {
				t.Fatalf("told %+v, want the one event from generation %d", told, gen)
			}
			if msg := h.checkReload(); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// A consumer-protocol member upgrades the group while two assignment
// writes are in flight (the first rebalance's, then, after a member left,
// the next one's). Both fail: the two rebalances are one, superseded by the
// conversion, from the generation last stored with the first one's cause.
func TestHistoryClassicUpgradeDuringTwoFailedAssignmentWrites(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	id1, id2, gen := h.classicStable() // event 1
	meta := string(subscription(nil, "a"))
	h.advance(time.Second)
	start := h.now
	t1 := h.join("cg", jo{member: id1, client: "c1", protos: protos("range", meta)})
	t2 := h.join("cg", jo{member: id2, client: "c2", protos: protos("range", meta)})
	r := h.joinResp(t1)
	h.joinResp(t2)
	leader, follower := r.LeaderID, id2
	if leader == id2 {
		follower = id1
	}
	h.hold = true
	h.sync("cg", follower, r.Generation, nil)
	h.sync("cg", leader, r.Generation, map[string]string{
		id1: string(encodeAssignment(set("a", 0, 1), []byte(meta))),
		id2: string(encodeAssignment(set("a", 2, 3), []byte(meta))),
	})
	h.advance(time.Second)
	if lr := h.leave("cg", lm(follower)); lr.ErrorCode != 0 {
		t.Fatalf("leave: %d", lr.ErrorCode)
	}
	r2 := h.joinResp(h.join("cg", jo{member: leader, client: "c", protos: protos("range", meta)}))
	if r2.ErrorCode != 0 {
		t.Fatalf("rejoin: %d", r2.ErrorCode)
	}
	h.sync("cg", leader, r2.Generation, map[string]string{leader: string(encodeAssignment(set("a", 0, 1, 2, 3), []byte(meta)))})
	if len(h.held) != 2 {
		t.Fatalf("%d writes held, want both assignments", len(h.held))
	}
	h.hold = false
	h.advance(time.Second)
	if hr := h.cgSend(hb{member: "n1", names: []string{"a"}, owned: tpset{}}); h.got[hr] == nil {
		t.Fatal("the upgrading heartbeat was not answered")
	}
	h.hold = true
	h.completeHeld(0, ErrCoordinatorNotAvailable)
	h.held = h.held[1:]
	h.completeHeld(0, ErrCoordinatorNotAvailable)
	h.held = h.held[1:]
	h.release()
	var classic []RebalanceEvent
	for _, e := range h.s.History("cg") {
		if e.Type == "classic" {
			classic = append(classic, e)
		}
	}
	if len(classic) != 2 {
		t.Fatalf("%d classic events, want 2: %+v", len(classic), classic)
	}
	e := classic[1]
	if e.Outcome != "superseded" || e.FromGeneration != gen || !e.Start.Equal(start) || e.Cause.Kind != CauseMetadataChanged ||
		hasCause(e.MoreCauses, CauseMemberLeft, follower) != 1 ||
		!strings.Contains(e.MoreCauses[len(e.MoreCauses)-1].Detail, "converted to the consumer protocol") {
		t.Fatalf("event %+v; want superseded by the conversion, from generation %d, started %v by the rejoin, the leave among its more causes", e, gen, start)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}

// With --group-history 1, the failed write's rebalance continued through one
// that ended Empty (event 3), and the group had one more rebalance that
// ended Empty (event 4, which pushed event 3 out of the bound) before the
// outcome. Event 3 is out of the history: rewriting it put it back in the
// store, where it stayed after event 4's tombstone.
func TestHistoryClassicRewriteOutOfBound(t *testing.T) {
	h, seen := newTellingH(t)
	h.s.cfg.HistorySize = 1
	h.emptiedDuringHeldAssignment("g") // held: W1 (seq 2), event 3
	h.advance(time.Second)
	jt := h.newMember("g", jo{})
	jr := h.joinResp(jt)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %d", jr.ErrorCode)
	}
	if r := h.leave("g", lm(jr.MemberID)); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	h.completeHeld(0, ErrCoordinatorNotAvailable)
	h.held = h.held[1:]
	h.release()
	if e := h.events("g", 1)[0]; e.Seq != 4 || e.Outcome != "empty" {
		t.Fatalf("event %+v, want seq 4, empty", e)
	}
	// (Event 1 is stored still: its tombstone was in the failed write;
	// the group's next event writes it, as for any trimmed event.)
	if _, ok := h.store[string(historyKey("g", 3))]; ok {
		t.Fatal("event 3 stored, past the bound of 1")
	}
	if got := toldSeqs(*seen); got != "[1 3 4]" {
		t.Fatalf("told seqs %s, want [1 3 4]", got)
	}
	if msg := h.checkReload(); msg != "" {
		t.Fatal(msg)
	}
}
