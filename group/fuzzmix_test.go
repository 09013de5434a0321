package group

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzMixedGroups drives classic and KIP-848 requests at the same two group
// ids, where the seams between group types lie: classic joins (dynamic and
// static, at v3 and v4+), syncs, heartbeats and leaves (one member or all),
// ConsumerGroupHeartbeats (joins, leaves at epoch -1 and -2), DeleteGroups,
// OffsetDelete, member and admin OffsetCommits, topic deletions, clock
// advances past session timeouts and offset retention, and writes held,
// completed or failed. After every step it checks that nothing panicked,
// every answer encodes, and, when no write is in flight, that a shard
// rebuilt from the store answers ListGroups, DescribeGroups,
// ConsumerGroupDescribe and OffsetFetch as the live one does. It also checks
// the storm flags and the rebalance history (stormCheck): the flags
// OnStorm's calls leave, kept as the node's cohort_groups_storming keeps
// them, are the shard's own storm status of each group; events are in order
// and do not overlap; a group that is gone keeps no history. And a group
// a DeleteGroups answered deleted (and no request named since) is not in
// the next shard loaded from the store, whatever other write failed.
//
//	go test -run '^$' -fuzz FuzzMixedGroups -fuzztime 3m -parallel 1 ./group/
func FuzzMixedGroups(f *testing.F) {
	for _, s := range mixSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runMix(t, data, testing.Verbose()) })
}

// FuzzMixedOutcomes is FuzzMixedGroups with the held writes' outcomes
// given one at a time: its op 10 reads a byte that, besides turning the
// hold on or off, completes the oldest held write (stored or failed) or
// unloads the shard with the held writes in flight and reports their
// outcomes, each its own, to the unloaded shard before the partition is
// loaded again. That is where a classic group's event held for an earlier
// assignment write's outcome, and the one events built for each outcome,
// are used (historyrec.go, historylate.go); mixTold checks what
// OnRebalance hears of them.
//
//	go test -run '^$' -fuzz FuzzMixedOutcomes -fuzztime 3m -parallel 1 ./group/
func FuzzMixedOutcomes(f *testing.F) {
	for _, s := range mixSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runMixWith(t, data, testing.Verbose(), true) })
}

// FuzzMixedOutcomesHistoryOff is FuzzMixedOutcomes run twice, with history
// kept and with history off (historyOffTwin). It covers FuzzMixedGroups's
// steps too (op 10 aside).
//
//	go test -run '^$' -fuzz FuzzMixedOutcomesHistoryOff -fuzztime 1m -parallel 1 ./group/
func FuzzMixedOutcomesHistoryOff(f *testing.F) {
	for _, s := range mixSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		historyOffTwin(t, func(mod func(*Config)) *h { return runMixWith(t, data, false, true, mod) })
	})
}

// mixSeeds are quick inputs run by go test ./group/ (FuzzMixedGroups and
// the tests of the bugs it found).
var mixSeeds = [][]byte{
	// a classic member joins (KIP-394 round trip), syncs, commits and
	// leaves; a consumer member replaces the empty group and leaves; a
	// classic member turns it classic again and joins
	// (TestMixReplacedClassicGroupStartsAtGenerationZero)
	{0, 0, 0, 0, 0, 0, 9, 1, 1, 0, 7, 0, 1, 0, 3, 0, 0, 4, 0, 0, 4, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 1, 12, 1},
	// a static classic member replaced by a consumer member with its
	// instance id (upgrade), leaving at epoch -2; writes held over a
	// DeleteGroups and a classic join, then offsets retention
	{0, 4, 0, 9, 1, 1, 4, 7, 4, 0, 0, 4, 4, 0, 4, 4, 3, 10, 5, 0, 0, 0, 0, 12, 1, 9, 0x81, 6, 0, 0},
	// failed writes while a mixed group downgrades
	{4, 0, 0, 0, 2, 0, 0, 2, 0, 9, 1, 11, 0, 4, 0, 2, 11, 1, 12, 1, 9, 50, 12, 0},
	// a consumer group with history turned classic (MEMBER_ID_REQUIRED)
	// and removed by offsets retention
	// (TestMixExpiredConvertedGroupLeavesNoHistory)
	{4, 0, 0, 4, 0, 2, 0, 0, 0, 9, 0x81},
	// a consumer member joins, leaves and joins again: the third
	// rebalance in the window flags the group (threshold 2), but its write
	// fails and the partition is loaded again without it: not storming
	{4, 0, 0, 4, 0, 2, 11, 0, 4, 0, 0, 12, 0},
}

type mixClassic struct {
	id       string
	gen      int32
	leader   bool
	members  []string
	protocol string
}

// byteSource hands a fuzz input out a byte at a time, and zeros once it is
// used up.
type byteSource []byte

func (s *byteSource) next() byte {
	if len(*s) == 0 {
		return 0
	}
	x := (*s)[0]
	*s = (*s)[1:]
	return x
}

func runMix(t *testing.T, data []byte, verbose bool) { runMixWith(t, data, verbose, false) }

// runMixWith is runMix; outcomes: op 10 gives the held writes' outcomes
// one at a time, or unloads the shard with them in flight
// (FuzzMixedOutcomes).
//
// mod changes the shard's config (historyOffTwin): an OnRebalance it sets is
// told what this one is (not what the shards built only to compare are).
// It returns the harness once done.
func runMixWith(t *testing.T, data []byte, verbose, outcomes bool, mod ...func(*Config)) *h {
	h, cat := newCH(t, map[string]int32{"a": 2, "b": 1}, mod...)
	h.passHistory = len(mod) > 0 // historyOffTwin's run
	h.s.Logf = func(string, ...any) {}
	h.s.cfg.OffsetsRetention = time.Minute
	groups := []string{"g0", "g1"}
	// The storm flags as node.rebalanceMetrics keeps them from OnStorm
	// (cohort_groups_storming): forgotten when the partition's state is
	// dropped, told again by the shard loaded next. listen is off while
	// mixCheck builds shards only to compare them.
	h.s.cfg.StormThreshold, h.s.cfg.StormWindow = 2, time.Minute
	flagged, listen := map[string]bool{}, true
	h.s.cfg.OnStorm = func(st StormStatus) {
		if !listen {
			return
		}
		if st.Flagged {
			flagged[st.Group] = true
		} else {
			delete(flagged, st.Group)
		}
	}
	// failedAt is h.failed when the shard was last loaded: the check that
	// a gone group keeps no history holds while no write has failed since
	// (a failed deletion of it leaves it to the next load).
	failedAt := 0
	// The seqs OnRebalance was told, by group, since the shard was last
	// loaded (mixTold).
	told := newMixTold()
	observe := h.s.cfg.OnRebalance
	h.s.cfg.OnRebalance = func(ev RebalanceEvent) {
		if listen {
			told.on(ev)
			if observe != nil {
				observe(ev)
			}
		}
	}
	// deleting holds the DeleteGroups in flight (ticket -> groups); gone
	// the groups a DeleteGroups answered deleted that no request named
	// since: a shard loaded from the store must not have them, whatever
	// other write failed (cgending.go).
	deleting := map[Ticket][]string{}
	gone := map[string]bool{}
	adopt := func() { // the partition is dropped and loaded again
		clear(flagged)
		told.reset()
		failedAt = h.failed // the load's own writes may fail too
		h.adopt()
		for _, g := range groups {
			if gone[g] && h.s.Group(g) != nil {
				t.Fatalf("group %q, answered deleted by DeleteGroups, is back after the load", g)
			}
		}
		clear(gone)
		h.s.Logf = func(string, ...any) {}
		h.staleMeta = map[string]bool{}
	}
	check := func() string {
		listen = false
		defer func() { listen = true }()
		if d := mixCheck(h, groups); d != "" {
			return d
		}
		if d := told.check(h.s, h.s.PendingWrites() == 0 && len(h.held) == 0); d != "" {
			return d
		}
		return stormCheck(h, flagged, h.failed == failedAt)
	}
	vlog := func(f string, a ...any) {
		if verbose {
			t.Logf(f, a...)
		}
	}
	src := byteSource(data)
	b := src.next
	cls := map[string]*mixClassic{}                          // group/slot -> classic member
	parked := map[Ticket]string{}                            // join ticket -> group/slot
	cgs := map[string]*kmsg.ConsumerGroupHeartbeatResponse{} // group/member -> last answer
	seen := map[Ticket]bool{}
	take := func() {
		// In ticket order: two answers to one slot's joins taken
		// in map order left either member id in the slot, so one
		// input ran two ways (FuzzMixedOutcomesHistoryOff saw it).
		for _, tk := range slices.Sorted(maps.Keys(h.got)) {
			r := h.got[tk]
			if seen[tk] {
				continue
			}
			seen[tk] = true
			r.AppendTo(nil) // every answer encodes at its version
			if ids, ok := deleting[tk]; ok {
				delete(deleting, tk)
				for _, rg := range r.(*kmsg.DeleteGroupsResponse).Groups {
					if rg.ErrorCode == ErrNone && slices.Contains(ids, rg.Group) {
						gone[rg.Group] = true
					}
				}
			}
			key, ok := parked[tk]
			if !ok {
				continue
			}
			delete(parked, tk)
			jr := r.(*kmsg.JoinGroupResponse)
			c := cls[key]
			if c == nil {
				c = &mixClassic{}
				cls[key] = c
			}
			switch jr.ErrorCode {
			case ErrNone:
				c.id, c.gen, c.leader = jr.MemberID, jr.Generation, jr.LeaderID == jr.MemberID
				c.members = c.members[:0]
				for _, m := range jr.Members {
					c.members = append(c.members, m.MemberID)
				}
				if jr.Protocol != nil {
					c.protocol = *jr.Protocol
				}
			case ErrMemberIDRequired:
				c.id = jr.MemberID
			case ErrUnknownMemberID, ErrFencedInstanceID:
				c.id = ""
			}
		}
	}
	pick := func() (string, int) {
		x := b()
		delete(gone, groups[x%2]) // a request that may make it again
		return groups[x%2], int(x>>1) % 4
	}
	instance := func(slot int) *string {
		if slot >= 2 {
			s := fmt.Sprintf("s%d", slot)
			return &s
		}
		return nil
	}
	steps := 0
	for len(src) > 0 && steps < 80 {
		steps++
		if h.s.NeedsReload() && h.s.PendingWrites() == 0 && len(h.held) == 0 {
			// as the runtime: a failed applied write discards the shard
			adopt()
		}
		op := b() % 13
		switch op {
		case 0: // classic JoinGroup
			g, slot := pick()
			key := fmt.Sprintf("%s/%d", g, slot)
			c := cls[key]
			if c == nil {
				c = &mixClassic{}
				cls[key] = c
			}
			fl := b()
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version = 9
			if fl&1 != 0 {
				req.Version = 3
			}
			req.Group, req.MemberID, req.InstanceID = g, c.id, instance(slot)
			if fl&2 != 0 {
				req.MemberID = ""
			}
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6000, 10000
			req.ProtocolType = "consumer"
			topics := []string{"a", "b"}[:1+int(fl>>2)%2]
			req.Protocols = protos("range", string(subscription(tpset{}, topics...)))
			if fl&0x10 != 0 {
				req.Protocols = protos("range", "m") // not a consumer subscription
			}
			if fl&0x60 == 0x60 {
				req.ProtocolType = "connect" // cannot become a consumer group
			}
			tk := h.do(func(tk Ticket, out *Output) { h.s.JoinGroup(h.now, tk, Client{ID: "c", Host: "h"}, req, out) })
			parked[tk] = key
			vlog("join v%d %s id=%q inst=%v", req.Version, key, req.MemberID, req.InstanceID != nil)
		case 1: // classic SyncGroup
			g, slot := pick()
			c := cls[fmt.Sprintf("%s/%d", g, slot)]
			if c == nil {
				break
			}
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version = 5
			req.Group, req.MemberID, req.Generation, req.InstanceID = g, c.id, c.gen, instance(slot)
			pt, p := "consumer", "range"
			req.ProtocolType, req.Protocol = &pt, &p
			if c.leader {
				for _, m := range c.members {
					req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}})
				}
			}
			h.do(func(tk Ticket, out *Output) { h.s.SyncGroup(h.now, tk, req, out) })
			vlog("sync %s/%d gen=%d", g, slot, c.gen)
		case 2: // classic Heartbeat
			g, slot := pick()
			c := cls[fmt.Sprintf("%s/%d", g, slot)]
			if c == nil {
				break
			}
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version = 4
			req.Group, req.MemberID, req.Generation, req.InstanceID = g, c.id, c.gen, instance(slot)
			h.do(func(tk Ticket, out *Output) { h.s.Heartbeat(h.now, tk, req, out) })
		case 3: // classic LeaveGroup: one member, or every slot
			g, slot := pick()
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version = 5
			req.Group = g
			all := b()%2 == 0
			for s := 0; s < 4; s++ {
				if !all && s != slot {
					continue
				}
				c := cls[fmt.Sprintf("%s/%d", g, s)]
				m := kmsg.LeaveGroupRequestMember{InstanceID: instance(s)}
				if c != nil {
					m.MemberID = c.id
				}
				if m.InstanceID == nil && m.MemberID == "" {
					continue
				}
				req.Members = append(req.Members, m)
			}
			if len(req.Members) == 0 {
				break
			}
			h.do(func(tk Ticket, out *Output) { h.s.LeaveGroup(h.now, tk, req, out) })
			vlog("leave %s all=%v", g, all)
		case 4: // ConsumerGroupHeartbeat
			g, slot := pick()
			member := fmt.Sprintf("m%d", slot)
			key := g + "/" + member
			prev := cgs[key]
			o := hb{group: g, member: member}
			switch b() % 7 {
			case 6: // a subscription change at the current epoch
				if prev != nil {
					o.epoch, o.names = prev.MemberEpoch, []string{"a", "b"}[slot%2:]
				}
			case 0, 1:
				o.epoch, o.names, o.owned = 0, []string{"a", "b"}[:1+slot%2], tpset{}
			case 2:
				o.epoch = -1
			case 3:
				o.epoch = -2
			default:
				if prev != nil {
					o.epoch = prev.MemberEpoch
					if a := assigned(prev); a != nil {
						o.owned = a
					}
				}
			}
			if slot >= 2 {
				o.instance = instance(slot) // shared with the classic slot: static replacement across protocols
			}
			req := h.cgReq(o)
			tk := h.do(func(tk Ticket, out *Output) {
				h.s.ConsumerGroupHeartbeat(h.now, tk, Client{ID: "c", Host: "h"}, req, out)
			})
			if r, ok := h.got[tk]; ok {
				resp := r.(*kmsg.ConsumerGroupHeartbeatResponse)
				vlog("cg %s epoch=%d -> %d epoch=%d", key, o.epoch, resp.ErrorCode, resp.MemberEpoch)
				if resp.ErrorCode == 0 && resp.MemberEpoch >= 0 {
					cgs[key] = resp
				} else {
					delete(cgs, key)
				}
			}
		case 5: // DeleteGroups
			g, slot := pick()
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Version = 2
			req.Groups = []string{g}
			if slot == 3 {
				req.Groups = groups
			}
			deleting[h.do(func(tk Ticket, out *Output) { h.s.DeleteGroups(h.now, tk, req, out) })] = req.Groups
			vlog("delete %s", g)
		case 6: // OffsetDelete
			g, _ := pick()
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = g
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = []string{"a", "b"}[b()%2]
			rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
			req.Topics = append(req.Topics, rt)
			h.do(func(tk Ticket, out *Output) { h.s.OffsetDelete(h.now, tk, req, out) })
			vlog("offset delete %s %s", g, rt.Topic)
		case 7: // OffsetCommit: admin, classic member or consumer member
			g, slot := pick()
			var req *kmsg.OffsetCommitRequest
			switch b() % 3 {
			case 0:
				req = commitReq(g, "", -1)
			case 1:
				c := cls[fmt.Sprintf("%s/%d", g, slot)]
				if c == nil {
					req = commitReq(g, "", -1)
				} else {
					req = commitReq(g, c.id, c.gen)
				}
			case 2:
				member := fmt.Sprintf("m%d", slot)
				var epoch int32
				if r := cgs[g+"/"+member]; r != nil {
					epoch = r.MemberEpoch
				}
				req = commitReq(g, member, epoch)
			}
			req.Topics[0].Topic = []string{"a", "b"}[b()%2]
			h.do(func(tk Ticket, out *Output) { h.s.OffsetCommit(h.now, tk, req, out) })
			vlog("commit %s member=%q gen=%d", g, req.MemberID, req.Generation)
		case 8: // topic deleted (and maybe created again)
			name := []string{"a", "b"}[b()%2]
			if _, ok := cat.Lookup(name); ok {
				cat.Delete(name)
				h.do(func(_ Ticket, out *Output) { h.s.DeleteTopicOffsets([]string{name}, out) })
				vlog("delete topic %s", name)
			} else {
				cat.Create(name, 1, nil)
				vlog("create topic %s", name)
			}
		case 9: // time passes; maybe offsets expire
			x := b()
			d := time.Duration(x&0x7f) * time.Second
			if x&0x80 != 0 {
				d = 2 * time.Minute
			}
			h.advance(d)
			if x&1 != 0 {
				h.do(func(_ Ticket, out *Output) { h.s.ExpireOffsets(h.now, out) })
			}
			vlog("advance %v expire=%v", d, x&1 != 0)
		case 10: // hold writes, or release those held
			if outcomes {
				x := b()
				for h.passHistory && x%4 != 0 && len(h.held) > 0 && historyOnly(h.held[0]) {
					h.completeHeld(0, ErrNone) // stored (historyOffTwin)
					h.held = h.held[1:]
				}
				if x%4 != 0 && len(h.held) > 0 {
					if x%4 < 3 {
						// the oldest held write's outcome, the others held
						code := []int16{ErrNone, ErrCoordinatorNotAvailable}[x%4-1]
						h.completeHeld(0, code)
						h.held = h.held[1:]
						vlog("outcome %d", code)
						break
					}
					// The partition moves with the held writes in
					// flight: each outcome (a bit of x apiece) reaches
					// the unloaded shard, then a shard loaded from the
					// store goes on.
					var out Output
					h.s.Unload(h.now, &out)
					h.settle(&out)
					take()
					held := h.held
					h.held, h.hold = nil, false
					i := 0 // the writes' index, history-only ones left out (historyOffTwin)
					for _, w := range held {
						code := ErrNone
						if x>>(2+i%6)&1 != 0 {
							code = ErrCoordinatorNotAvailable
						}
						if !h.passHistory || !historyOnly(w) {
							i++
						}
						h.completeHeld0(w, code)
					}
					if d := told.check(h.s, true); d != "" {
						t.Fatalf("step %d: unloaded shard: %s", steps, d)
					}
					if n := h.s.LateWrites(); n != 0 {
						t.Fatalf("step %d: unloaded shard awaits %d late writes once all are done", steps, n)
					}
					adopt()
					parked = map[Ticket]string{}
					vlog("unloaded with %d writes in flight, reloaded", len(held))
					break
				}
			}
			h.hold = !h.hold
			if !h.hold {
				h.release()
			}
			vlog("hold=%v", h.hold)
		case 11: // writes fail or succeed
			if b()%3 == 0 {
				h.fail = ErrNotCoordinator
			} else {
				h.fail = ErrNone
			}
			vlog("fail=%d", h.fail)
		case 12: // release everything and let writes succeed
			h.fail = ErrNone
			h.release()
			vlog("release")
			if b()%2 == 0 && h.s.PendingWrites() == 0 {
				// the partition moves: a shard loaded from the store goes on
				var out Output
				h.s.Unload(h.now, &out)
				h.settle(&out)
				take()
				adopt()
				parked = map[Ticket]string{}
				vlog("reloaded")
			}
		}
		take()
		if d := check(); d != "" {
			t.Fatalf("step %d (op %d): %s", steps, op, d)
		}
	}
	h.fail = ErrNone
	h.release()
	take()
	if h.s.NeedsReload() && h.s.PendingWrites() == 0 {
		adopt()
	}
	if d := check(); d != "" {
		t.Fatalf("at the end: %s", d)
	}
	h.advance(time.Hour)
	if d := check(); d != "" {
		t.Fatalf("an hour later: %s", d)
	}
	var out Output
	h.s.Unload(h.now, &out)
	h.settle(&out)
	take()
	return h
}

// mixTold follows what OnRebalance is told, by group: each event once, in
// seq order (docs/history.md, the observer hook). The numbering restarts
// with the shard (a failed write's seq is used again by the next load) and
// with a group's history (forgotten once the group is gone).
type mixTold struct {
	last map[string]uint64
	err  string
}

func newMixTold() *mixTold { return &mixTold{last: map[string]uint64{}} }

func (m *mixTold) on(ev RebalanceEvent) {
	if ev.Seq == 0 {
		return // history off: not numbered
	}
	if last, ok := m.last[ev.Group]; ok && ev.Seq <= last && m.err == "" {
		m.err = fmt.Sprintf("group %q: OnRebalance told seq %d after seq %d", ev.Group, ev.Seq, last)
	}
	m.last[ev.Group] = ev.Seq
}

func (m *mixTold) reset() { clear(m.last) }

// check returns the first misordered telling, and, once no write is in
// flight (settled), any state kept for events still to tell or for
// outcomes still to come: held events, trackers' links to other
// rebalances, late writes.
func (m *mixTold) check(s *Shard, settled bool) string {
	if m.err != "" {
		return m.err
	}
	for id := range m.last {
		if s.hist[id] == nil {
			delete(m.last, id) // forgotten: a group of that id starts at seq 1
		}
	}
	if !settled {
		return ""
	}
	for id, gh := range s.hist {
		if gh.held != nil {
			return fmt.Sprintf("group %q: held events %v kept with no write in flight", id, gh.held)
		}
	}
	for id, g := range s.groups {
		if g.rbWriting != nil {
			return fmt.Sprintf("group %q: rbWriting kept with no write in flight", id)
		}
		if rb := g.rb; rb != nil && (rb.ended != nil || rb.next != nil || rb.prev != nil || rb.cont != nil) {
			return fmt.Sprintf("group %q: its rebalance keeps links to writes done: %+v", id, rb)
		}
	}
	if n := len(s.late); n != 0 {
		return fmt.Sprintf("%d late writes kept with no write in flight", n)
	}
	return ""
}

// mixCheck compares the live shard with one rebuilt from the store when no
// write is in flight; it returns a description of the first difference.
func mixCheck(h *h, groups []string) string {
	if h.s.PendingWrites() > 0 || len(h.held) > 0 || h.s.NeedsReload() {
		return ""
	}
	if d := h.checkReload(); d != "" {
		return d
	}
	re := h.reload()
	list := func(s *Shard) map[string]string {
		m := map[string]string{}
		for _, lg := range s.ListGroups(kmsg.NewPtrListGroupsRequest()) {
			g := s.Group(lg.Group)
			if g.cg == nil && ((g.state != Stable && g.state != Empty) || h.staleMeta[lg.Group]) {
				continue // a classic group between generations is ahead of its record
			}
			if _, stored := h.store[string(groupKey(lg.Group))]; g.cg == nil && g.state == Empty && !stored && g.generation == 0 && len(g.offsets) == 0 {
				continue // nothing of it was ever stored
			}
			m[lg.Group] = fmt.Sprintf("%s/%s/%s", lg.GroupType, lg.GroupState, lg.ProtocolType)
		}
		return m
	}
	live, rel := list(h.s), list(re)
	for id, a := range live {
		if b, ok := rel[id]; ok && a != b {
			return fmt.Sprintf("ListGroups %q: live %s, reloaded %s", id, a, b)
		}
		if _, ok := rel[id]; !ok && re.Group(id) == nil {
			return fmt.Sprintf("ListGroups %q: live %s, absent after reload", id, a)
		}
	}
	for id, b := range rel {
		if h.s.Group(id) == nil || h.s.Group(id).state == Dead {
			return fmt.Sprintf("ListGroups %q: absent live, reloaded %s", id, b)
		}
	}
	for _, id := range groups {
		if h.staleMeta[id] {
			continue
		}
		enc := func(s *Shard) []byte {
			r := kmsg.NewPtrConsumerGroupDescribeResponse()
			r.Version = 1
			r.Groups = append(r.Groups, s.DescribeConsumerGroup(id, 1, false))
			return r.AppendTo(nil)
		}
		if a, b := enc(h.s), enc(re); !bytes.Equal(a, b) {
			return fmt.Sprintf("ConsumerGroupDescribe %q differs after reload:\nlive     %+v\nreloaded %+v", id, h.s.DescribeConsumerGroup(id, 1, false), re.DescribeConsumerGroup(id, 1, false))
		}
	}
	return ""
}

// stormCheck compares the storm flags OnStorm's calls leave (flagged) with
// the shard's own storm status of every group it keeps a history of, once
// no write is in flight (a consumer group's event is in its history from
// the moment it is applied, and flags it once durable), and checks each
// group's history: events in order, none ending before it starts or
// starting before the previous one ended, and none kept for a group that is
// gone once no write is in flight (unless one failed: gone false).
func stormCheck(h *h, flagged map[string]bool, gone bool) string {
	for id := range flagged {
		if h.s.hist[id] == nil {
			return fmt.Sprintf("group %q counted as storming without a history", id)
		}
	}
	settled := h.s.PendingWrites() == 0 && len(h.held) == 0 && !h.s.NeedsReload()
	for id := range h.s.hist {
		st := h.s.storm(id, h.now)
		if !st.Flagged && flagged[id] && h.s.storm(id, h.now.Add(-time.Millisecond)).Flagged {
			continue // the timer that unflags it fires 1 ms after the window has passed its oldest event
		}
		if settled && st.Flagged != flagged[id] {
			return fmt.Sprintf("group %q: storm status flagged=%v (%d in the window), OnStorm's calls leave it flagged=%v", id, st.Flagged, st.Count, flagged[id])
		}
		evs := h.s.History(id)
		for i, ev := range evs {
			if ev.End.Before(ev.Start) {
				return fmt.Sprintf("group %q event %d ends before it starts: %+v", id, ev.Seq, ev)
			}
			if i > 0 && (ev.Seq <= evs[i-1].Seq || ev.Start.Before(evs[i-1].End)) {
				return fmt.Sprintf("group %q event %d (start %v) overlaps event %d (end %v)", id, ev.Seq, ev.Start, evs[i-1].Seq, evs[i-1].End)
			}
		}
		if gone && h.s.PendingWrites() == 0 && len(h.held) == 0 && len(evs) > 0 {
			if g := h.s.Group(id); g == nil || g.state == Dead {
				return fmt.Sprintf("group %q is gone but keeps %d history events", id, len(evs))
			}
		}
	}
	return ""
}
