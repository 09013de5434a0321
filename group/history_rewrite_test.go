package group

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
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
// twoAssignmentsHeld makes g a Stable group of two members (event 1,
// generation gen), then holds two assignment writes: their rebalance's
// (started at start) and, after ids[1] left, the next one's.
func (h *h) twoAssignmentsHeld(g string) (ids []string, gen int32, start time.Time) {
	h.t.Helper()
	ids, gen = h.stableGroup(g, 2)
	h.advance(time.Second)
	start = h.now
	h.heldAssignment(g, ids)
	h.nextAssignmentHeld(g, ids)
	return ids, gen, start
}

func TestHistoryClassicThreeRebalancesBothWritesFail(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprint("first outcome before the leave ", early), func(t *testing.T) {
			h, seen := newTellingH(t)
			ids, gen, start := h.twoAssignmentsHeld("g")
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
	if gh := h.s.hist["g"]; gh != nil && gh.held != nil {
		t.Fatalf("held events %v kept once every write is done: a map per group that once held one", gh.held)
	}
	if msg := h.checkReload(); msg != "" {
		t.Fatal(msg)
	}
}

// checkTold fails unless seen holds each seq of want once, in that order.
func checkTold(t *testing.T, seen []RebalanceEvent, want string) {
	t.Helper()
	if got := toldSeqs(seen); got != want {
		t.Fatalf("told seqs %s, want %s (each once, ascending)", got, want)
	}
}

// Every member leaves while the assignment write (seq 2) is in flight, and
// the shard is unloaded before its outcome: the Empty event (3), held until
// that outcome, is handed to the late write and told after it: after event
// 2 if the write was stored; alone, as the one event both rebalances are
// (from the generation last stored), if it failed.
func TestHistoryClassicUnloadedHeldEvent(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrCoordinatorNotAvailable} {
		t.Run(fmt.Sprint("outcome ", code), func(t *testing.T) {
			h, seen := newTellingH(t)
			gen, gen2 := h.emptiedDuringHeldAssignment("g")
			checkTold(t, *seen, "[1]")
			h.unload(newStormTally())
			checkTold(t, *seen, "[1]")
			h.completeHeld(0, code) // after the unload
			h.held = h.held[1:]
			h.release() // the Empty event's own write
			if n := h.s.LateWrites(); n != 0 {
				t.Fatalf("unloaded shard still awaits %d late writes", n)
			}
			if code == ErrNone {
				checkTold(t, *seen, "[1 2 3]")
				if e := (*seen)[2]; e.Outcome != "empty" || e.FromGeneration != gen2 {
					t.Fatalf("told %+v, want the Empty event from generation %d", e, gen2)
				}
				return
			}
			checkTold(t, *seen, "[1 3]")
			if e := (*seen)[1]; e.Outcome != "empty" || e.FromGeneration != gen || e.Cause.Kind != CauseMetadataChanged ||
				hasCause(e.MoreCauses, CauseMemberLeft, "") != 2 {
				t.Fatalf("told %+v; want the one event, empty, from generation %d, caused by the rejoin, both leaves among its more causes", e, gen)
			}
		})
	}
}

// Two assignment writes in flight (seq 2, then 3 after a member left) and
// the group then Empty (event 4, held), when the shard is unloaded: each
// event is told once, in seq order, whatever the late outcomes.
func TestHistoryClassicUnloadedHeldChain(t *testing.T) {
	for _, codes := range [][2]int16{{ErrNone, ErrNone}, {ErrNone, ErrCoordinatorNotAvailable},
		{ErrCoordinatorNotAvailable, ErrNone}, {ErrCoordinatorNotAvailable, ErrCoordinatorNotAvailable}} {
		t.Run(fmt.Sprint("outcomes ", codes), func(t *testing.T) {
			h, seen := newTellingH(t)
			ids, gen, start := h.twoAssignmentsHeld("g")
			h.advance(time.Second)
			if r := h.leave("g", lm(ids[0])); r.ErrorCode != 0 {
				t.Fatalf("leave: %d", r.ErrorCode)
			}
			h.unload(newStormTally())
			checkTold(t, *seen, "[1]")
			h.completeHeld(0, codes[0])
			h.completeHeld(1, codes[1])
			h.held = h.held[2:]
			h.release() // the Empty event's own write
			if n := h.s.LateWrites(); n != 0 {
				t.Fatalf("unloaded shard still awaits %d late writes", n)
			}
			want := map[[2]int16]string{
				{ErrNone, ErrNone}:                                       "[1 2 3 4]",
				{ErrNone, ErrCoordinatorNotAvailable}:                    "[1 2 4]",
				{ErrCoordinatorNotAvailable, ErrNone}:                    "[1 3 4]",
				{ErrCoordinatorNotAvailable, ErrCoordinatorNotAvailable}: "[1 4]",
			}[codes]
			checkTold(t, *seen, want)
			if codes[1] != ErrNone {
				// The second write failed: event 4 is the one event of
				// the rebalances since the last stored one.
				e := (*seen)[len(*seen)-1]
				wantGen := gen
				if codes[0] == ErrNone {
					wantGen = (*seen)[1].Generation
				}
				if e.Outcome != "empty" || e.FromGeneration != wantGen || (codes[0] != ErrNone && !e.Start.Equal(start)) {
					t.Fatalf("told %+v; want the one event, empty, from generation %d", e, wantGen)
				}
			}
		})
	}
}

// cgAssignmentHeld makes cg a Stable classic group of two members (event 1,
// generation gen), then rebalances it a second later with the store held,
// up to the leader's assignment: its write, holding the event, is the one
// held write. r is the rejoin's answer.
func (h *h) cgAssignmentHeld() (gen int32, r *kmsg.JoinGroupResponse) {
	h.t.Helper()
	id1, id2, gen := h.classicStable()
	meta := string(subscription(nil, "a"))
	h.advance(time.Second)
	t1 := h.join("cg", jo{member: id1, client: "c1", protos: protos("range", meta)})
	t2 := h.join("cg", jo{member: id2, client: "c2", protos: protos("range", meta)})
	r = h.joinResp(t1)
	h.joinResp(t2)
	follower := id2
	if r.LeaderID == id2 {
		follower = id1
	}
	h.hold = true
	h.sync("cg", follower, r.Generation, nil)
	h.sync("cg", r.LeaderID, r.Generation, map[string]string{
		id1: string(encodeAssignment(set("a", 0, 1), []byte(meta))),
		id2: string(encodeAssignment(set("a", 2, 3), []byte(meta))),
	})
	if len(h.held) != 1 {
		h.t.Fatalf("%d writes held, want the assignment's", len(h.held))
	}
	return gen, r
}

// cgUpgradedAndDowngradedHeld is cgAssignmentHeld, then a consumer-protocol
// member upgrades the group and leaves, which turns it classic again. The
// heartbeats' writes are held behind the assignment's: a partition's writes
// reach the store, and report their outcomes, in the order they were
// issued.
func (h *h) cgUpgradedAndDowngradedHeld() (gen int32, r *kmsg.JoinGroupResponse) {
	h.t.Helper()
	gen, r = h.cgAssignmentHeld()
	h.advance(time.Second)
	h.cgSend(hb{member: "n1", names: []string{"a"}, owned: tpset{}})
	h.advance(time.Second)
	h.cgSend(hb{member: "n1", epoch: epochLeave})
	if g := h.s.Group("cg"); g == nil || g.cg != nil {
		h.t.Fatal("the group is not classic again after the consumer member left")
	}
	return gen, r
}

// A consumer-protocol member upgrades the group and then leaves, which
// turns it classic again, all while the assignment write of the classic
// rebalance before (seq 2) is in flight. Whatever its outcome, the observer
// hears each event once, in seq order, and the store holds what the shard
// shows.
func TestHistoryClassicUpgradeAndDowngradeDuringAssignmentWrite(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrCoordinatorNotAvailable} {
		t.Run(fmt.Sprint("outcome ", code), func(t *testing.T) {
			var seen []RebalanceEvent
			h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) } })
			gen, r := h.cgUpgradedAndDowngradedHeld()
			h.completeHeld(0, code)
			h.held = h.held[1:]
			h.release()
			var stored []uint64
			for _, e := range h.s.History("cg") {
				stored = append(stored, e.Seq)
			}
			if fmt.Sprint(stored) != toldSeqs(seen) {
				t.Fatalf("stored seqs %v, told %s; want the same, each once, ascending", stored, toldSeqs(seen))
			}
			checkTold(t, seen, "[1 2 3]")
			e := seen[1]
			if e.Type != "classic" || e.FromGeneration != gen || e.Generation != r.Generation {
				t.Fatalf("event 2 %+v, want classic, generation %d -> %d", e, gen, r.Generation)
			}
			if want := map[bool]string{true: "stable", false: "superseded"}[code == ErrNone]; e.Outcome != want {
				t.Fatalf("event 2 outcome %s, want %s", e.Outcome, want)
			}
			if e := seen[2]; e.Type != "consumer" || e.Outcome != "superseded" {
				t.Fatalf("event 3 %+v, want the consumer member's, superseded by the downgrade", e)
			}
			if d := h.checkReload(); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// The emptied group is deleted before the outcome of the assignment write:
// the Empty event, held until that outcome, is still told, once, in order.
func TestHistoryClassicGroupDeletedDuringAssignmentWriteTold(t *testing.T) {
	for _, code := range []int16{ErrNone, ErrCoordinatorNotAvailable} {
		t.Run(fmt.Sprint("outcome ", code), func(t *testing.T) {
			h, seen := newTellingH(t)
			h.emptiedDuringHeldAssignment("g")
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Version, req.Groups = 2, []string{"g"}
			h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
			h.completeHeld(0, code)
			h.held = h.held[1:]
			h.release()
			want := "[1 2 3]"
			if code != ErrNone {
				want = "[1 3]"
			}
			checkTold(t, *seen, want)
			if hist := h.s.hist["g"]; hist != nil && len(hist.held) != 0 {
				t.Fatalf("events still held after the outcome: %v", hist.held)
			}
		})
	}
}

// As TestHistoryClassicUpgradeAndDowngradeDuringAssignmentWrite, and the
// classic members then rejoin and their leader gives the next assignment,
// its write held behind the first, which then fails: the first rebalance
// ended superseded by the upgrade (event 2), the consumer member's event
// (3) by the downgrade, and the classic rebalance after the downgrade is
// an event of its own (4), not a continuation of the failed one. The
// conversion closed the first write to later rebalances (open), as a later
// end (Empty) does; nothing else in this package tests that.
func TestHistoryClassicReassignedAfterUpgradeDuringFailedAssignmentWrite(t *testing.T) {
	var seen []RebalanceEvent
	h, _ := newCH(t, map[string]int32{"a": 4}, func(c *Config) { c.OnRebalance = func(e RebalanceEvent) { seen = append(seen, e) } })
	gen, r := h.cgUpgradedAndDowngradedHeld()
	h.advance(time.Second)
	var ids []string
	for _, m := range r.Members {
		ids = append(ids, m.MemberID)
	}
	t1 := h.join("cg", jo{member: ids[0], protos: protos("range", string(subscription(nil, "a")))})
	t2 := h.join("cg", jo{member: ids[1], protos: protos("range", string(subscription(nil, "a")))})
	r2 := h.joinResp(t1)
	if r2.ErrorCode != 0 || h.joinResp(t2).ErrorCode != 0 {
		t.Fatalf("rejoin after the downgrade: %d", r2.ErrorCode)
	}
	for _, id := range ids {
		if id != r2.LeaderID {
			h.sync("cg", id, r2.Generation, nil)
		}
	}
	h.sync("cg", r2.LeaderID, r2.Generation, map[string]string{ids[0]: "x", ids[1]: "y"})
	h.completeHeld(0, ErrCoordinatorNotAvailable)
	h.held = h.held[1:]
	h.release()
	checkTold(t, seen, "[1 2 3 4]")
	if e := seen[1]; e.Type != "classic" || e.Outcome != "superseded" || e.FromGeneration != gen || e.Generation != r.Generation {
		t.Fatalf("event 2 %+v, want classic, superseded, generation %d -> %d", e, gen, r.Generation)
	}
	if e := seen[3]; e.Type != "classic" || e.Outcome != "stable" || e.Generation != r2.Generation || e.Cause.Kind != CauseOther ||
		!strings.Contains(e.Cause.Detail, "converted from the consumer protocol") {
		t.Fatalf("event 4 %+v, want classic, stable at generation %d, caused by the downgrade", e, r2.Generation)
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
}
