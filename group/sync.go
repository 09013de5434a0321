package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup handles a SyncGroup request (docs/group-semantics.md §sync).
// Followers that arrive before the leader park; the leader's assignment is
// persisted before anyone receives it.
func (s *Shard) SyncGroup(now time.Time, t Ticket, req *kmsg.SyncGroupRequest, out *Output) {
	v := req.Version
	fail := func(code int16) { out.reply(t, syncError(v, code)) }
	if code := syncPrecheck(req); code != ErrNone { // the coordinator checked it already
		fail(code)
		return
	}
	g := s.groups[req.Group]
	if g != nil && g.cg != nil {
		s.classicSyncToConsumer(now, t, req, out, g)
		return
	}
	if g == nil || g.state == Empty {
		fail(ErrUnknownMemberID)
		return
	}
	if g.state == Dead {
		fail(ErrCoordinatorNotAvailable)
		return
	}
	m, code := g.validateMember(req.MemberID, strOr(req.InstanceID))
	if code != ErrNone {
		fail(code)
		return
	}
	if req.Generation != g.generation {
		fail(ErrIllegalGeneration)
		return
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol) {
		fail(ErrInconsistentProtocol)
		return
	}
	switch g.state {
	case PreparingRebalance:
		fail(ErrRebalanceInProgress)
	case Stable:
		// Answered at once with the member's assignment; like a heartbeat,
		// the answer restarts the member's session (Kafka does the same), so
		// a member that synced late is not expired on the clock of its join.
		mapDrop(&g.pendingSync, m.id)
		s.arm(m.session, now.Add(m.sessionTimeout))
		out.reply(t, g.syncResponse(v, m.assignment))
	case CompletingRebalance:
		if m.sync != nil {
			out.reply(m.sync.t, syncError(m.sync.v, ErrRebalanceInProgress))
		}
		m.sync = &parked{t, v}
		mapDrop(&g.pendingSync, m.id)
		g.rbSynced(now, m)
		if m.id == g.leader && !g.syncWriting {
			g.takeAssignment(now, req.GroupAssignment, out)
		}
	}
}

// takeAssignment records the leader's assignment, persists it, and on success
// releases every parked SyncGroup and makes the group Stable.
func (g *Group) takeAssignment(now time.Time, given []kmsg.SyncGroupRequestGroupAssignment, out *Output) {
	assign := make(map[string][]byte, len(g.members))
	// The assignments are copied into one buffer of their own: they point
	// into the request's frame, which the members would otherwise keep
	// alive for as long as the generation lasts.
	size := 0
	for _, a := range given {
		size += len(a.MemberAssignment)
	}
	buf := make([]byte, 0, size)
	for _, a := range given {
		if g.memberByID(a.MemberID) != nil { // ids not in the group are ignored
			n := len(buf)
			buf = append(buf, a.MemberAssignment...)
			assign[a.MemberID] = buf[n:len(buf):len(buf)]
		}
	}
	for _, m := range g.members {
		if len(assign[m.id]) == 0 {
			// A member the leader left out gets an empty assignment. For
			// the consumer protocol we send an encoded empty assignment,
			// since Java consumers reject fewer than 2 bytes.
			assign[m.id] = g.emptyAssignment()
		}
	}
	gen := g.generation
	g.syncWriting = true
	assigned := func(m *member) []byte { return assign[m.id] }
	img := g.image(assigned)
	// The rebalance's event goes in the same write (rbAssigned): once
	// durable, WriteDone puts it in the history and tells it.
	hrecs, rb := g.rbAssigned(now, assigned)
	var seq uint64
	if len(hrecs) > 0 {
		seq = hrecs[0].ev.Seq
	}
	// Once durable, replaying the record gave the members their
	// assignments if the group is still completing this generation.
	g.writeMetadataWith(now, out, img, hrecs, rb, func(now time.Time, code int16, out *Output) {
		if rb != nil {
			g.rbAssignWritten(now, seq, rb, gen, code, out)
		}
		if g.generation != gen || g.state != CompletingRebalance {
			return // a rebalance started meanwhile; its own path answered
		}
		g.syncWriting = false
		if code != ErrNone {
			for _, m := range g.members {
				if m.sync != nil {
					out.reply(m.sync.t, syncError(m.sync.v, code))
					m.sync = nil
					g.s.arm(m.session, now.Add(m.sessionTimeout)) // see prepareRebalance
				}
			}
			g.note(Cause{Kind: CauseOther, At: now, Detail: "storing the assignment failed"})
			g.prepareRebalance(now, out)
			return
		}
		for _, m := range g.members {
			if m.sync != nil {
				out.reply(m.sync.t, g.syncResponse(m.sync.v, m.assignment))
				m.sync = nil
			}
		}
		g.transition(Stable, now)
		for _, m := range g.members {
			g.s.arm(m.session, now.Add(m.sessionTimeout))
		}
	})
}

func (g *Group) emptyAssignment() []byte {
	if g.protocolType != "consumer" {
		return []byte{}
	}
	a := kmsg.NewConsumerMemberAssignment()
	return a.AppendTo(nil)
}

func (g *Group) syncResponse(v int16, assignment []byte) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = v
	ptype, proto := g.protocolType, g.protocol
	r.ProtocolType = &ptype
	r.Protocol = &proto
	r.MemberAssignment = assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// Heartbeat handles a Heartbeat request (docs/group-semantics.md §heartbeat).
// Nothing is persisted.
func (s *Shard) Heartbeat(now time.Time, t Ticket, req *kmsg.HeartbeatRequest, out *Output) {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = req.Version
	r.ErrorCode = s.heartbeat(now, req)
	out.reply(t, r)
}

func (s *Shard) heartbeat(now time.Time, req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	g := s.groups[req.Group]
	if g == nil {
		return ErrUnknownMemberID
	}
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
	}
	if g.cg != nil {
		return s.classicHeartbeatToConsumer(now, req, g)
	}
	m, code := g.validateMember(req.MemberID, strOr(req.InstanceID))
	if code != ErrNone {
		return code
	}
	if req.Generation != g.generation {
		if g.state == PreparingRebalance && m.downgradedFrom != 0 && req.Generation == m.downgradedFrom {
			s.arm(m.session, now.Add(m.sessionTimeout))
			return ErrRebalanceInProgress // see maybeDowngrade
		}
		return ErrIllegalGeneration
	}
	switch g.state {
	case Empty:
		return ErrUnknownMemberID
	case PreparingRebalance:
		s.arm(m.session, now.Add(m.sessionTimeout))
		return ErrRebalanceInProgress
	default: // CompletingRebalance (clients heartbeat between Join and Sync), Stable
		s.arm(m.session, now.Add(m.sessionTimeout))
		return ErrNone
	}
}

// LeaveGroup handles a LeaveGroup request, single (v0–2) or batch (v3+)
// (docs/group-semantics.md §leave). A classic group's leave is answered at
// once; the members removed from a consumer group go in one write with one
// bump of the group epoch (classicLeaveToConsumer), and the answer waits
// until that write is durable, as for every change of a consumer group
// (docs/kip848.md, Durability).
func (s *Shard) LeaveGroup(now time.Time, t Ticket, req *kmsg.LeaveGroupRequest, out *Output) {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = req.Version
	if req.Group == "" {
		r.ErrorCode = ErrInvalidGroupID
		out.reply(t, r)
		return
	}
	ids := req.Members
	if req.Version < 3 {
		ids = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g := s.groups[req.Group]
	if g != nil && g.state == Dead {
		r.ErrorCode = ErrCoordinatorNotAvailable
		out.reply(t, r)
		return
	}
	// done answers; for a consumer group, once its write is durable.
	done := func(out *Output) {
		if r.Version < 3 {
			r.ErrorCode = r.Members[0].ErrorCode
			r.Members = nil
		}
		out.reply(t, r)
	}
	switch {
	case g == nil:
		for _, id := range ids {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = id.MemberID, id.InstanceID, ErrUnknownMemberID
			r.Members = append(r.Members, rm)
		}
	case g.cg != nil:
		// Every listed member is removed first, then the group epoch
		// is bumped once: one write for the batch, answered once it is
		// durable.
		recs := s.classicLeaveToConsumer(now, ids, r, out, g)
		if len(recs) == 0 {
			break
		}
		s.writeApplied(out, recs, func(_ time.Time, code int16, out *Output) {
			if code != ErrNone {
				// No member was removed. Kafka answers a LeaveGroup
				// whose write failed with that error at the top level
				// (clients retry); each removal of the batch carries it
				// too, while a member refused on its own keeps its
				// answer.
				r.ErrorCode = code
				for i := range r.Members {
					if r.Members[i].ErrorCode == ErrNone {
						r.Members[i].ErrorCode = code
					}
				}
			}
			done(out)
		})
		return
	default:
		// A classic member left (removed) or a KIP-394 pending id did
		// (pendingLeft): the group reacts once, after all of them.
		removed, pendingLeft := false, false
		for _, id := range ids {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = id.MemberID, id.InstanceID
			var dropped, pending bool
			rm.ErrorCode, dropped, pending = g.leave(now, id.MemberID, strOr(id.InstanceID), reasonOf(id.Reason), out)
			removed, pendingLeft = removed || dropped, pendingLeft || pending
			r.Members = append(r.Members, rm)
		}
		switch {
		case removed:
			// As Kafka: every listed member goes first, then one
			// rebalance (or one check of the join barrier), so that a
			// member removed later in the batch is not made leader of a
			// generation the batch's next removal cancels.
			g.afterRemoval(now, out)
		case pendingLeft && g.state == PreparingRebalance:
			// Only pending ids left: the barrier may have been waiting
			// for them alone.
			g.tryCompleteJoin(now, out)
		}
	}
	done(out)
}

// leave takes one member (or pending member) out of the group, without the
// group's reaction: LeaveGroup reacts once for the whole batch, with
// afterRemoval when a member was dropped, or else, when only pending
// members (KIP-394) went, with a check of the join barrier of a
// PreparingRebalance group (Kafka's newer coordinator also rebalances a
// Stable group then; cohort does not: docs/group-semantics.md §deviations).
// Reacting here, in the middle of a batch, could complete a join that a
// removal earlier in the batch then cancels.
func (g *Group) leave(now time.Time, memberID, instanceID, reason string, out *Output) (code int16, dropped, pending bool) {
	if memberID == "" && instanceID != "" {
		// Admin removal of a static member by instance id: no fencing check.
		id, ok := g.static[instanceID]
		if !ok {
			return ErrUnknownMemberID, false, false
		}
		c := causeOf(CauseAdmin, now, g.memberByID(id))
		c.Detail, c.Reason = "remove_members", reason
		g.note(c)
		g.dropMember(g.memberByID(id), out)
		return ErrNone, true, false
	}
	if pt, ok := g.pending[memberID]; ok {
		g.s.cancel(pt)
		mapDrop(&g.pending, memberID)
		return ErrNone, false, true
	}
	m, code := g.validateMember(memberID, instanceID)
	if code != ErrNone {
		return code, false, false
	}
	c := causeOf(CauseMemberLeft, now, m)
	c.Reason = reason
	g.note(c)
	g.dropMember(m, out)
	return ErrNone, true, false
}

func strOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
